"""A package's public names imported on first use (PEP 562), so importing it stays light.

A package maps each lazy name to the module that defines it and installs the pair this module
builds: ``__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, namespace: dict[str, Any], lazy: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: a name of ``lazy`` (name ->
    the module that defines it) is imported on first access and stored in ``namespace`` (the
    package's ``globals()``), so later accesses skip the import."""

    def __getattr__(name: str) -> Any:
        if name not in lazy:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(lazy[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(lazy))

    return __getattr__, __dir__
