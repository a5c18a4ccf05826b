"""Each row of the deprecated-import table still imports, is the object at its new home, and
warns with a DeprecationWarning naming that home (issue #45)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import relrep_hf  # noqa: F401  installs the finder of old module paths
from relrep_hf.utils.deprecated_import import DEPRECATED_PATHS


def _resolve(path: str) -> object:
    """A dotted path: a module, or a module's attribute."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("old", sorted(DEPRECATED_PATHS))
def test_each_moved_path_still_imports_and_warns(old, monkeypatch):
    new = DEPRECATED_PATHS[old]
    monkeypatch.delitem(sys.modules, old, raising=False)  # imported again: the finder runs
    with pytest.warns(DeprecationWarning, match=f"moved to '{new}'"):
        found = _resolve(old)
    assert found is _resolve(new)


def test_old_paths_are_not_left_as_modules():
    """A moved module is a row, not a shim file at the old path."""
    root = importlib.import_module("relrep_hf").__path__[0]
    shims = [
        old
        for old in DEPRECATED_PATHS
        if Path(root, *old.split(".")[1:]).with_suffix(".py").is_file()
    ]
    assert shims == []


def test_an_unknown_old_name_is_an_attribute_error():
    from relrep_hf.utils import hub_files

    with pytest.raises(AttributeError, match="has no attribute 'push_everything'"):
        hub_files.push_everything  # noqa: B018


def test_a_split_module_answers_its_names_only(monkeypatch):
    """The old path of a module split in several homes (relrep_hf.training.anchor_arguments)
    imports as a module of its rows' names; another name is an ImportError naming it, and a
    module still at its path is never replaced by such a module."""
    monkeypatch.delitem(sys.modules, "relrep_hf.training.anchor_arguments", raising=False)
    split = importlib.import_module("relrep_hf.training.anchor_arguments")
    with pytest.warns(DeprecationWarning, match="relrep_hf.anchors.param.arguments"):
        from relrep_hf.training.anchor_arguments import ParamTrainingArguments
    assert ParamTrainingArguments.__module__ == "relrep_hf.anchors.param.arguments"
    with pytest.raises(ImportError, match="cannot import name 'HeadTrainer'"):
        from relrep_hf.training.anchor_arguments import HeadTrainer  # noqa: F401
    assert split.__spec__.origin is None  # no file: a moved module leaves none behind
    from relrep_hf.utils import hub_files  # a module with a renamed name: the real one

    assert hub_files.__spec__.origin.endswith("hub_files.py")
