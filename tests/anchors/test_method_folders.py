"""A method is one folder of relrep_hf/anchors/, registered in one list (issue #45)."""

from __future__ import annotations

import importlib
from pathlib import Path

import relrep_hf.anchors as anchors
from relrep_hf.anchors import ANCHOR_METHODS, METHOD_FOLDERS


def test_every_folder_is_listed_once_and_registers_its_method():
    """A folder left out of `METHOD_FOLDERS` fails here: the list is the one registration."""
    root = Path(anchors.__file__).parent
    folders = sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())
    assert sorted(f.__name__.rsplit(".", 1)[1] for f in METHOD_FOLDERS) == folders
    assert list(ANCHOR_METHODS.values())[: len(folders)] == [f.METHOD for f in METHOD_FOLDERS]


def test_importing_a_folder_registers_nothing():
    """Registration is the list's, never a side effect of importing a method's module."""
    registered = dict(ANCHOR_METHODS)
    ANCHOR_METHODS.pop("kmeans")
    try:
        importlib.reload(importlib.import_module("relrep_hf.anchors.kmeans"))
        assert "kmeans" not in ANCHOR_METHODS
    finally:
        ANCHOR_METHODS.clear()
        ANCHOR_METHODS.update(registered)  # as it was, in its order
