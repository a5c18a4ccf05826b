"""A method is one folder of relrep_hf/anchors/, and every folder there is registered (issue #45)."""

from __future__ import annotations

import dataclasses
import importlib
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

import relrep_hf.anchors as anchors
from relrep_hf import AnchorSet
from relrep_hf.anchors import (
    ANCHOR_METHODS,
    REPORT_ORDER,
    AnchorMethod,
    FitData,
    method_folders,
    register_anchor_method,
    register_anchor_methods,
    unregister_anchor_method,
)
from relrep_hf.anchors.arguments import FitArguments
from relrep_hf.functional.anchor_strategies import (
    farthest_point_mixture,
    kmeans_mixture,
    random_mixture,
)
from relrep_hf.functional.mixing_kinds import STRATEGY_MIXING

SUPPORT = [f"input {i}" for i in range(12)]
EMBEDDINGS = [
    torch.randn(12, 5, generator=torch.Generator().manual_seed(1)),
    torch.randn(12, 3, generator=torch.Generator().manual_seed(2)),
]


def test_every_folder_is_registered_in_report_order():
    """Each folder of relrep_hf/anchors/ is a registered method, the paper's first."""
    root = Path(anchors.__file__).parent
    folders = sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())
    assert sorted(f.__name__.rsplit(".", 1)[1] for f in method_folders()) == folders
    assert list(ANCHOR_METHODS)[: len(folders)] == list(REPORT_ORDER)
    assert list(ANCHOR_METHODS.values())[: len(folders)] == [f.METHOD for f in method_folders()]


@pytest.fixture
def extra_folder(tmp_path, monkeypatch):
    """A second folder of relrep_hf.anchors' (``tmp_path``); its modules and methods go after."""
    monkeypatch.setattr(anchors, "__path__", [*anchors.__path__, str(tmp_path)])
    registered = dict(ANCHOR_METHODS)
    yield tmp_path
    for name in [n for n in ANCHOR_METHODS if n not in registered]:
        unregister_anchor_method(name)
    for module in [m for m in sys.modules if m.startswith("relrep_hf.anchors.toy")]:
        del sys.modules[module]
        if hasattr(anchors, module.rsplit(".", 1)[1]):
            delattr(anchors, module.rsplit(".", 1)[1])


def test_a_new_method_is_one_new_folder_and_nothing_else(extra_folder):
    """The random folder copied under a new name, its METHOD renamed, and nothing else edited:
    `register_anchor_methods` (which ``import relrep_hf`` calls) registers it, after the
    package's own, and it fits and draws through the registry."""
    shutil.copytree(Path(anchors.__file__).parent / "random", extra_folder / "toy_random")
    source = extra_folder / "toy_random" / "__init__.py"
    text = source.read_text(encoding="utf-8")
    assert '    "random",\n    "Random-WIP",' in text
    source.write_text(
        text.replace('    "random",\n    "Random-WIP",', '    "toy_random",\n    "Toy-WIP",')
    )
    assert "toy_random" not in ANCHOR_METHODS
    register_anchor_methods()
    assert list(ANCHOR_METHODS)[-1] == "toy_random"
    assert ANCHOR_METHODS["toy_random"].mixing == "one_hot"
    data = FitData({"a": EMBEDDINGS[0], "b": EMBEDDINGS[1]}, SUPPORT)
    anchor_set, rows = ANCHOR_METHODS["toy_random"].fit(FitArguments("unused", num_anchors=3), data)
    assert anchor_set.num_anchors == 3 and len(rows) == len(SUPPORT)
    drawn = AnchorSet._sampled("toy_random", SUPPORT, None, 3, seed=0)
    assert drawn.strategy == "toy_random" and drawn.mixing == "one_hot"
    assert torch.equal(drawn.mixture, random_mixture(len(SUPPORT), 3, seed=0))


def test_a_folder_without_its_method_is_refused(extra_folder):
    # docs/bad_inputs.md, "Anchor method folders (issue #45 item 1)"
    (extra_folder / "toy_empty").mkdir()
    (extra_folder / "toy_empty" / "__init__.py").write_text('"""Nothing declared."""\n')
    registered = list(ANCHOR_METHODS)
    message = "relrep_hf.anchors.toy_empty declares no METHOD (an AnchorMethod)"
    with pytest.raises(TypeError, match=re.escape(message)):
        register_anchor_methods()
    assert list(ANCHOR_METHODS) == registered


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
