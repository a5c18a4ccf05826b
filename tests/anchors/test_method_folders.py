"""A method is one folder of relrep_hf/anchors/, registered in one list (issue #45)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import torch

import relrep_hf.anchors as anchors
from relrep_hf import AnchorSet
from relrep_hf.anchors import (
    ANCHOR_METHODS,
    METHOD_FOLDERS,
    AnchorMethod,
    register_anchor_method,
    unregister_anchor_method,
)
from relrep_hf.functional.mixing_kinds import STRATEGY_MIXING


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


def _toy(mixing: str) -> AnchorMethod:
    from relrep_hf.training.anchor_arguments import FitArguments

    return AnchorMethod(
        "toy", "Toy", "toy anchors", "a toy", FitArguments, lambda a, d: None, mixing
    )


def test_the_mixing_kinds_are_the_registered_methods():
    """An anchor set that records no mixing holds its method's kind, as the registry says (no
    name is hard-coded below the registry); an unregistered strategy's is stochastic."""
    mixture = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert AnchorSet.random(["a", "b", "c"], 2, seed=0).mixing == ANCHOR_METHODS["random"].mixing
    assert AnchorSet(mixture, ["a", "b"], strategy="toy").mixing == "stochastic"
    register_anchor_method(_toy("identity"))
    try:
        assert AnchorSet(mixture, ["a", "b"], strategy="toy").mixing == "identity"
    finally:
        unregister_anchor_method("toy")
    assert AnchorSet(mixture, ["a", "b"], strategy="toy").mixing == "stochastic"


def test_a_method_of_an_unknown_mixing_kind_is_refused_and_nothing_registered():
    # docs/bad_inputs.md, "Extension points and moved paths": the first sentence
    message = "Invalid mixing 'banded' for the anchor method 'toy'. Valid: 'stochastic', "
    with pytest.raises(ValueError, match=re.escape(message)):
        register_anchor_method(_toy("banded"))
    assert "toy" not in ANCHOR_METHODS and "toy" not in STRATEGY_MIXING
