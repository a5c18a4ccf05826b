"""The registry of anchor methods: one declaration per method, read by the pipeline, the command
line, the report and the card; each method's defaults live in its arguments class."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from relrep_hf.anchors import ANCHOR_METHODS, FitData, anchor_method
from relrep_hf.anchors.arguments import FitArguments
from relrep_hf.anchors.param.arguments import ParamTrainingArguments
from relrep_hf.anchors.shared_linear.arguments import SharedLinearArguments
from relrep_hf.cli import build_parser
from relrep_hf.commands.arguments import method_args
from relrep_hf.functional.mixing import MIXING_KINDS
from relrep_hf.publishing.cards.anchor_set_card import anchor_set_card
from relrep_hf.utils.defaults import DEFAULT_METHOD, DEFAULT_SHRINKAGE, SHARED_LINEAR_SHRINKAGE


def _data(rows: int = 120) -> FitData:
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(rows, 6, generator=generator)
    return FitData(
        training={
            "a": base @ torch.randn(6, 8, generator=generator),
            "b": base @ torch.randn(6, 10, generator=generator)
            + 0.05 * torch.randn(rows, 10, generator=generator),
        },
        inputs=[f"text {i}" for i in range(rows)],
        encoders={"a": {"encoder_id": "enc-a"}, "b": {"encoder_id": "enc-b"}},
    )


def _small_args(method_name: str, output_dir: str) -> FitArguments:
    arguments = ANCHOR_METHODS[method_name].arguments
    extra = {"num_train_epochs": 2, "train_batch_size": 64, "disable_tqdm": True,
             "save_strategy": "no"} if arguments is ParamTrainingArguments else {}  # fmt: skip
    size = None if method_name in ("shared_linear", "full_support") else 60
    return arguments(output_dir, num_anchors=5, support_size=size, **extra)


@pytest.mark.parametrize("name", list(ANCHOR_METHODS))
def test_every_method_fits_what_it_declares(name, tmp_path):
    """Each registered fit returns an anchor set of its strategy and mixing kind, on support
    rows of the data, recording the training encoders and their provenance."""
    method = ANCHOR_METHODS[name]
    assert method.mixing in MIXING_KINDS and method.label and method.title
    data = _data()
    anchor_set, rows = method.fit(_small_args(name, str(tmp_path / "out")), data)
    assert anchor_set.strategy == name and anchor_set.mixing == method.mixing
    assert anchor_set.support == [data.inputs[i] for i in rows.tolist()]
    expected = len(rows) if name == "full_support" else 5
    assert anchor_set.num_anchors == expected
    recorded = {e["name"]: e for e in anchor_set.encoders}
    assert recorded["a"]["encoder_id"] == "enc-a" and recorded["b"]["dim"] == 10
    card = anchor_set_card(anchor_set)
    assert method.title in card.text and f"{name.replace('_', '-')}-anchors" in card.data.tags


def test_each_method_has_its_defaults_in_one_place():
    """The shared linear map chooses its shrinkage from the data; every other method takes the
    paper's 0.15; the command line's unset --shrinkage gives each method its class's default."""
    assert SharedLinearArguments("x").shrinkage == SHARED_LINEAR_SHRINKAGE == "auto"
    assert FitArguments("x").shrinkage == ParamTrainingArguments("x").shrinkage
    assert FitArguments("x").shrinkage == DEFAULT_SHRINKAGE
    assert all(issubclass(m.arguments, FitArguments) for m in ANCHOR_METHODS.values())
    common = {f.name for f in dataclasses.fields(FitArguments)}
    assert common == {"output_dir", "num_anchors", "support_size", "shrinkage", "eps", "seed"}
    parsed = build_parser().parse_args(["fit", "run"])
    for name, method in ANCHOR_METHODS.items():
        assert method_args(parsed, name) == method.arguments("unused"), name
    given = build_parser().parse_args(["fit", "run", "--shrinkage", "auto", "--num-anchors", "7"])
    assert method_args(given, "shared_linear") == SharedLinearArguments(
        "unused", shrinkage="auto", num_anchors=7
    )
    assert DEFAULT_METHOD in ANCHOR_METHODS


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: FitArguments("x", shrinkage="auto"), r"shrinkage='auto' .* is the shared"),
        (lambda: ParamTrainingArguments("x", shrinkage="auto"), "ParamTrainingArguments takes"),
        (lambda: SharedLinearArguments("x", shrinkage=1.5), "Need 0 <= shrinkage <= 1"),
        (lambda: FitArguments("x", num_anchors=0), "num_anchors must be >= 1, got 0"),
        (lambda: anchor_method("pca"), r"Invalid method 'pca'\. Valid: 'param', 'shared_linear'"),
    ],
)
def test_bad_method_arguments_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_report_compares_each_method_with_a_registered_one():
    for method in ANCHOR_METHODS.values():
        assert method.compared_with in ANCHOR_METHODS and method.compared_with != method.name
