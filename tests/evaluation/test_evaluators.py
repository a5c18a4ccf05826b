"""Evaluators with sentence-transformers' interface: `RelativeClassificationEvaluator`."""

from __future__ import annotations

import csv

import pytest
import torch

from relrep_hf.evaluation.evaluators import RelativeClassificationEvaluator
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification


def sign_head() -> RelativeHeadForClassification:
    """A linear head on 2 features that predicts class 1 where feature 0 is positive: the
    LayerNorm of [a, -a] is [1, -1] (a > 0) or [-1, 1], so logits [0, 2 * sign(a)] - 0."""
    head = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=2, num_labels=2, hidden_sizes=[], dropout=0.0)
    )
    with torch.no_grad():
        head.classifier.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, -1.0]]))
        head.classifier.bias.zero_()
    return head


def test_accuracy_and_weighted_f1_per_encoder_and_their_means(tmp_path):
    a = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [2.0, -2.0], [-2.0, 2.0]])  # predicts 1, 0, 1, 0
    labels = torch.tensor([1, 0, 1, 0])
    flipped = -a  # predicts 0, 1, 0, 1: every row wrong
    half = torch.cat([a[:2], flipped[2:]])  # right, right, wrong, wrong
    head = sign_head().train()
    evaluator = RelativeClassificationEvaluator(
        {"a": a, "flipped": flipped, "half": half}, labels, name="zs"
    )
    metrics = evaluator(head, output_path=str(tmp_path), epoch=1, steps=7)
    assert head.training  # the model's mode is given back
    # half: predictions [1, 0, 0, 1] for [1, 0, 1, 0]; per class precision 1/2, recall 1/2,
    # F1 1/2, each of support 2: weighted F1 0.5
    expected = {
        "zs_a_accuracy": 1.0, "zs_a_weighted_f1": 1.0,
        "zs_flipped_accuracy": 0.0, "zs_flipped_weighted_f1": 0.0,
        "zs_half_accuracy": 0.5, "zs_half_weighted_f1": 0.5,
        "zs_accuracy": 0.5, "zs_weighted_f1": 0.5,
    }  # fmt: skip
    assert metrics == pytest.approx(expected)
    assert (evaluator.primary_metric, evaluator.greater_is_better) == ("zs_weighted_f1", True)
    assert evaluator.primary_metric in metrics
    rows = list(csv.reader((tmp_path / "zs_evaluation_results.csv").read_text().splitlines()))
    assert rows[0] == ["epoch", "steps", *metrics] and rows[1][:2] == ["1", "7"]
    # one unnamed encoder: its two metrics alone
    single = RelativeClassificationEvaluator(a, labels)
    assert single(head) == {"accuracy": 1.0, "weighted_f1": 1.0}
    assert single.primary_metric == "weighted_f1"


@pytest.mark.parametrize(
    "features, labels, message",
    [
        (torch.zeros(3, 2), [0, 1], r"features has shape \(3, 2\) but there are 2 labels"),
        ({}, [0], "features is an empty mapping"),
        ({"a": torch.full((2, 2), float("nan"))}, [0, 1], r"features\['a'\]: NaN or Inf"),
    ],
)
def test_bad_features_get_clear_errors(features, labels, message):
    with pytest.raises(ValueError, match=message):
        RelativeClassificationEvaluator(features, labels)
