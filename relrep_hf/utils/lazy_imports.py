"""A package's public names imported on first use (PEP 562), so importing it stays light.

A package writes each public name once, in its ``__init__.pyi`` stub (``from relrep_hf.x.y
import Name as Name``: what type checkers and IDEs read, as scientific-python's lazy_loader
stubs), and its ``__init__.py`` reads that list and installs the pair this module builds:

    _LAZY = stub_names(__file__)
    __all__ = sorted(_LAZY)
    __getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)

A name the package no longer exports, but did, is a row of `DEPRECATED_PATHS`
(``utils/deprecated_import.py``): it still answers, from its home, with a `DeprecationWarning`,
and is in neither ``__all__`` nor ``dir()``.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from relrep_hf.utils.deprecated_import import deprecated_attributes


def stub_names(init_file: str) -> dict[str, str]:
    """Public name -> the module that defines it, read from the ``from module import Name as
    Name`` lines of the stub beside a package's ``__init__.py`` (``init_file``)."""
    stub = Path(init_file).with_suffix(".pyi")
    try:
        tree = ast.parse(stub.read_text(encoding="utf-8"), filename=str(stub))
    except OSError as error:
        raise ImportError(
            f"{stub} is missing or unreadable ({error}): it lists the package's public names. "
            "The install is incomplete: reinstall relrep-hf (pip install --force-reinstall)."
        ) from error
    return {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def lazy_attributes(
    package: str, namespace: dict[str, Any], lazy: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: a name of ``lazy`` (name ->
    the module that defines it) is imported on first access and stored in ``namespace`` (the
    package's ``globals()``), so later accesses skip the import; a name the package exported
    before answers from `DEPRECATED_PATHS`, warning, and is not stored."""
    deprecated = deprecated_attributes(package)
    _keep_public_names_over_submodules(package, lazy)

    def __getattr__(name: str) -> Any:
        if name not in lazy:
            return deprecated(name)  # AttributeError unless the name moved
        value = getattr(importlib.import_module(lazy[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(lazy))

    return __getattr__, __dir__


def _keep_public_names_over_submodules(package: str, lazy: Mapping[str, str]) -> None:
    """A public name that is also a submodule's (relrep_hf.migration's `migrate` function, from
    ``migration/migrate.py``) keeps naming the public object: the import system sets the
    package's attribute to the submodule once it loads it, and an eager ``__init__`` bound the
    name again after that import; lazily, the attribute is dropped instead, so the next access
    imports the public name (`lazy_attributes`)."""
    module = sys.modules.get(package)
    if module is None or type(module) is not types.ModuleType:
        return
    names = frozenset(lazy) & {
        m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))
    }
    if not names:
        return

    class _LazyPackage(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in names and getattr(value, "__name__", None) == f"{package}.{name}":
                self.__dict__.pop(name, None)
                return
            super().__setattr__(name, value)

    module.__class__ = _LazyPackage
