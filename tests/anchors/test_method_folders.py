"""A method is one folder of relrep_hf/anchors/, registered in one list (issue #45)."""

from __future__ import annotations

import dataclasses
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
from relrep_hf.functional.anchor_strategies import (
    farthest_point_mixture,
    kmeans_mixture,
    random_mixture,
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
    from relrep_hf.anchors.arguments import FitArguments

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


SUPPORT = [f"input {i}" for i in range(12)]
EMBEDDINGS = [
    torch.randn(12, 5, generator=torch.Generator().manual_seed(1)),
    torch.randn(12, 3, generator=torch.Generator().manual_seed(2)),
]
# each constructor beside the code it replaced: the pure math called directly (before #45)
BEFORE = {
    "random": (
        lambda: AnchorSet.random(SUPPORT, 4, seed=3),
        lambda: random_mixture(len(SUPPORT), 4, seed=3),
    ),
    "kmeans": (
        lambda: AnchorSet.kmeans(SUPPORT, EMBEDDINGS, 4, seed=3, iterations=7),
        lambda: kmeans_mixture(EMBEDDINGS, 4, seed=3, iterations=7),
    ),
    "farthest_point": (
        lambda: AnchorSet.farthest_point(SUPPORT, EMBEDDINGS, 4, seed=3),
        lambda: farthest_point_mixture(EMBEDDINGS, 4, seed=3),
    ),
}


@pytest.mark.parametrize("strategy", sorted(BEFORE))
def test_the_constructors_give_the_same_bytes_through_the_registry(strategy, tmp_path):
    """`AnchorSet.random/kmeans/farthest_point` reach their math through the registry and save
    the bytes the direct calls saved: the mixture, the description and the support."""
    constructor, mixture = BEFORE[strategy]
    built = constructor()
    before = AnchorSet(mixture(), list(SUPPORT), strategy=strategy, training={"seed": 3})
    assert built.mixture.dtype == before.mixture.dtype
    assert built.mixture.numpy().tobytes() == before.mixture.numpy().tobytes()
    built.save_pretrained(tmp_path / "built")
    before.save_pretrained(tmp_path / "before")
    for name in ("anchor_set.safetensors", "anchor_set.json", "support.jsonl"):
        assert (tmp_path / "built" / name).read_bytes() == (tmp_path / "before" / name).read_bytes()


def _replaced(name: str, **changes: object) -> dict:
    """Swap method ``name`` for a copy with ``changes``; the registry as it was, to restore."""
    registered = dict(ANCHOR_METHODS)
    unregister_anchor_method(name)
    register_anchor_method(dataclasses.replace(registered[name], **changes))
    return registered


def _restore(registered: dict) -> None:
    for name in list(ANCHOR_METHODS):
        unregister_anchor_method(name)
    for method in registered.values():
        register_anchor_method(method)


def test_a_constructor_draws_with_the_registered_sampler():
    """Swapping the method's registration swaps what `AnchorSet.random` draws: the constructor
    reads the registry, not the function it was written beside."""

    def last_rows(support_size, support_embeddings, num_anchors, *, seed=0):
        return torch.eye(support_size)[-num_anchors:]

    registered = _replaced("random", sampler=last_rows)
    try:
        anchor_set = AnchorSet.random(["a", "b", "c"], 2, seed=0)
        assert anchor_set.mixture.argmax(dim=1).tolist() == [1, 2]
    finally:
        _restore(registered)
    assert list(ANCHOR_METHODS.values()) == list(registered.values())


def test_a_constructor_of_an_unregistered_method_says_how_to_register_it_again():
    # docs/bad_inputs.md, "Anchor method folders (issue #45 item 1)"
    registered = dict(ANCHOR_METHODS)
    unregister_anchor_method("kmeans")
    try:
        message = "No registered anchor method 'kmeans' draws its anchors by sampling"
        with pytest.raises(ValueError, match=re.escape(message)) as caught:
            AnchorSet.kmeans(SUPPORT, EMBEDDINGS, 4)
        assert "register_anchor_methods()" in str(caught.value)
        assert "'random'" in str(caught.value)  # the sampling methods still registered
    finally:
        _restore(registered)
