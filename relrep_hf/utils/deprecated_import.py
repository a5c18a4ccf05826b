"""The one table of moved public paths: each old import path and its new home.

Like sentence-transformers' ``util/deprecated_import.py``: a module that moved is a row here,
not a shim module left at its old path. Saved artifacts record import paths
(sentence-transformers' ``modules.json``, ``py:`` encoder specs in ``run.json``), so an old path
keeps importing: a meta-path finder (installed by ``import relrep_hf``) answers an old module
path with the module at its new home, a module whose public function was renamed answers
the old name through `deprecated_attributes`, and the old path of a module split in several
homes (no file left there) is answered with a module of its names only, each read from its row. Both warn with a `DeprecationWarning` that names
the new home. Imports nothing of relrep_hf.

>>> import sys, warnings
>>> install_deprecated_imports()
>>> _ = sys.modules.pop("relrep_hf.functional.tables", None)  # warned once per process
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     tables = importlib.import_module("relrep_hf.functional.tables")
>>> tables.__name__, "relrep_hf.functional.markdown_tables" in str(caught[0].message)
('relrep_hf.functional.markdown_tables', True)
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["DEPRECATED_PATHS", "deprecated_attributes", "install_deprecated_imports"]

DEPRECATED_PATHS: dict[str, str] = {
    # modules: old module path -> new module path
    "relrep_hf.sentence_transformers_module": "relrep_hf.models.sentence_transformers_module",
    "relrep_hf.training.sentence_transformers_module": (
        "relrep_hf.models.sentence_transformers_module"
    ),
    "relrep_hf.packaged_encoders": "relrep_hf.encoding.packaged_encoders",
    "relrep_hf.functional.tables": "relrep_hf.functional.markdown_tables",
    "relrep_hf.training.anchor_methods": "relrep_hf.anchors.anchor_methods",
    "relrep_hf.publishing.cards.folders": "relrep_hf.publishing.cards.folder_cards",
    "relrep_hf.training.param_trainer": "relrep_hf.anchors.param.trainer",
    "relrep_hf.training.param_data": "relrep_hf.anchors.param.data",
    "relrep_hf.training.param_checkpoints": "relrep_hf.anchors.param.checkpoints",
    "relrep_hf.training.shared_linear_trainer": "relrep_hf.anchors.shared_linear.trainer",
    # names: old module.name -> new module.name (the old module reads them, see below)
    "relrep_hf.utils.hub_files.push_folder": "relrep_hf.utils.hub_files.commit_folder",
    # a module split in several homes: each of its names (the old path answers them, see below)
    "relrep_hf.training.anchor_arguments.FitArguments": (
        "relrep_hf.anchors.arguments.FitArguments"
    ),
    "relrep_hf.training.anchor_arguments.SharedLinearArguments": (
        "relrep_hf.anchors.shared_linear.arguments.SharedLinearArguments"
    ),
    "relrep_hf.training.anchor_arguments.ParamTrainingArguments": (
        "relrep_hf.anchors.param.arguments.ParamTrainingArguments"
    ),
    "relrep_hf.training.anchor_arguments.loss_weight_field": (
        "relrep_hf.anchors.param.arguments.loss_weight_field"
    ),
}
"""Old dotted path -> new dotted path: a module, or a module's public name (issue #45)."""


def _warn(old: str, new: str) -> None:
    """The warning, pointed at the first caller outside importlib and this module."""
    stacklevel, frame = 2, sys._getframe(1)
    while frame is not None and (
        "importlib" in frame.f_code.co_filename or frame.f_code.co_filename == __file__
    ):
        stacklevel, frame = stacklevel + 1, frame.f_back
    warnings.warn(
        f"{old!r} moved to {new!r}: import it from there ({old!r} will be removed in a future "
        "version).",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _AliasLoader(importlib.abc.Loader):
    """Gives the already-imported module at the new home, without executing it again."""

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module
        self._spec = module.__spec__

    def create_module(self, spec: Any) -> types.ModuleType:
        return self._module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._spec  # the module keeps its own name and spec


class _SplitModuleLoader(importlib.abc.Loader):
    """Gives the old path of a split module: a module whose names are its rows' (warning)."""

    def create_module(self, spec: Any) -> types.ModuleType:
        return types.ModuleType(spec.name, f"Moved: each name of {spec.name} has a new home.")

    def exec_module(self, module: types.ModuleType) -> None:
        module.__getattr__ = deprecated_attributes(module.__name__)  # type: ignore[method-assign]


def _split_module_spec(fullname: str, path: Any) -> Any:
    """The spec of ``fullname`` if it is the old path of a split module: rows name some of its
    names and no file is left there (a module still there reads its rows itself)."""
    if not any(old.startswith(f"{fullname}.") for old in DEPRECATED_PATHS):
        return None
    if importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
        return None
    return importlib.util.spec_from_loader(fullname, _SplitModuleLoader())


class _DeprecatedModuleFinder(importlib.abc.MetaPathFinder):
    """Answers an old module path of `DEPRECATED_PATHS` with the module at its new home."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        new = DEPRECATED_PATHS.get(fullname)
        if new is None:
            return _split_module_spec(fullname, path)
        try:
            module = importlib.import_module(new)
        except ModuleNotFoundError as error:
            if error.name != new:  # the new home lacks a dependency: say so
                raise
            return None  # a row of a renamed name, not of a module
        _warn(fullname, new)
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module))


def install_deprecated_imports() -> None:
    """Put the finder of old module paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _DeprecatedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DeprecatedModuleFinder())


def deprecated_attributes(module: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module`` that answers its renamed names (rows of
    `DEPRECATED_PATHS` under ``module.``) from their new homes, with the warning."""

    def __getattr__(name: str) -> Any:
        new = DEPRECATED_PATHS.get(f"{module}.{name}")
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        _warn(f"{module}.{name}", new)
        home, _, attribute = new.rpartition(".")
        return getattr(importlib.import_module(home), attribute)

    return __getattr__
