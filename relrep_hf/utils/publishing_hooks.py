"""The one hook through which an artifact reaches the publishing layer (cards and Hub pushes).

Artifacts (anchor sets, projectors, heads, migration maps) sit below the publishing code and
never import it. Their ``save_pretrained`` asks the registered `Publisher` to write the model card
into the folder being saved, and their ``push_to_hub`` asks it to ready the folder for the Hub
(the upload itself is `relrep_hf.utils.hub_files.commit_folder`); the publishing layer registers
itself once, like ``AutoConfig.register`` (`relrep_hf.publishing.hub`, imported by
``relrep_hf/__init__.py``, so the hook is in effect whenever any relrep_hf module is imported).
This module imports nothing heavy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

__all__ = ["Publisher", "publisher", "register_publisher", "unregister_publisher"]


class Publisher(Protocol):
    """What the publishing layer offers the artifacts."""

    def write_card(self, folder: Path) -> Path | None:
        """Write the model card (and its images) of the artifact saved in ``folder``; its path,
        or None when a README.md the user wrote was kept."""

    def prepare_upload(
        self, folder: Path, *, repo_id: str, token: str | bool | None = None
    ) -> None:  # pragma: no cover - a protocol
        """Ready a saved artifact ``folder`` (a temporary copy) for the Hub, in place: portable
        provenance, the card for ``repo_id``, remote code, the manifest."""


_registered: list[Publisher] = []


def register_publisher(publisher: Publisher, *, exist_ok: bool = False) -> None:
    """Register the publishing layer; a second, different publisher is refused unless
    ``exist_ok`` (then it replaces the first)."""
    if _registered and _registered[0] is not publisher and not exist_ok:
        raise ValueError(
            f"A publisher is registered already ({_registered[0]!r}); pass exist_ok=True to "
            "replace it."
        )
    _registered[:] = [publisher]


def unregister_publisher() -> Publisher:
    """Take the registered publisher out and return it (a ValueError if none is): cards are
    then not written, nor artifacts pushed, until one is registered again."""
    if not _registered:
        raise ValueError("No publisher is registered: there is nothing to unregister.")
    return _registered.pop()


def publisher() -> Publisher:
    """The registered publisher."""
    if not _registered:
        raise RuntimeError(
            "No publisher is registered, so cards cannot be written nor artifacts pushed: "
            "import relrep_hf (its __init__ imports relrep_hf.publishing.hub, which registers it)."
        )
    return _registered[0]
