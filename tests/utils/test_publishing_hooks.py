"""The one hook from artifacts up to the publishing layer (`relrep_hf.utils.publishing_hooks`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from relrep_hf.publishing.hub import RelrepPublisher
from relrep_hf.utils import publishing_hooks


def test_importing_relrep_hf_registers_the_publisher_lazily():
    """The registration is in effect after ``import relrep_hf`` and loads neither the card nor
    the push code (they load on first use)."""
    code = (
        "import sys, relrep_hf, relrep_hf.utils.publishing_hooks as hooks; "
        "assert type(hooks.publisher()).__name__ == 'RelrepPublisher'; "
        "loaded = [m for m in ('relrep_hf.publishing.cards', 'relrep_hf.publishing.hub.push', 'relrep_hf.publishing.provenance') "
        "if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert isinstance(publishing_hooks.publisher(), RelrepPublisher)


def test_a_second_publisher_is_refused_unless_asked(monkeypatch):
    monkeypatch.setattr(publishing_hooks, "_registered", [])
    with pytest.raises(RuntimeError, match="No publisher is registered"):
        publishing_hooks.publisher()
    first, second = RelrepPublisher(), RelrepPublisher()
    publishing_hooks.register_publisher(first)
    publishing_hooks.register_publisher(first)  # the same one again: fine
    with pytest.raises(ValueError, match="A publisher is registered already"):
        publishing_hooks.register_publisher(second)
    publishing_hooks.register_publisher(second, exist_ok=True)
    assert publishing_hooks.publisher() is second


def test_the_publisher_is_unregistered_as_it_was_registered(monkeypatch):
    first = RelrepPublisher()
    monkeypatch.setattr(publishing_hooks, "_registered", [first])
    assert publishing_hooks.unregister_publisher() is first
    with pytest.raises(RuntimeError, match="No publisher is registered"):
        publishing_hooks.publisher()
    with pytest.raises(ValueError, match="nothing to unregister"):
        publishing_hooks.unregister_publisher()
    publishing_hooks.register_publisher(first)  # back, with no exist_ok needed
    assert publishing_hooks.publisher() is first
