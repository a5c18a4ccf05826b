"""Every default is defined once, in `relrep_hf.utils.defaults`, and read from there: changing a
constant there changes it everywhere. Each test names a place that must not hold its own copy."""

from dataclasses import fields

import pytest

from relrep_hf.anchors.param.arguments import (
    ParamTrainingArguments,
    loss_weight_field,
)
from relrep_hf.cli import build_parser
from relrep_hf.commands.arguments import training_args
from relrep_hf.functional.losses import LossWeights
from relrep_hf.utils import defaults


def test_the_paper_table_5_values():
    """The values themselves (paper, Table 5 and Appendix B)."""
    assert (defaults.DEFAULT_SHRINKAGE, defaults.DEFAULT_EPS) == (0.15, 5e-8)
    assert defaults.DEFAULT_NUM_ANCHORS == 300 and defaults.DEFAULT_NUM_TRAIN_EPOCHS == 95
    weights = (
        defaults.DEFAULT_INFO_NCE_WEIGHT,
        defaults.DEFAULT_COVERAGE_WEIGHT,
        defaults.DEFAULT_ORTHOGONALITY_WEIGHT,
        defaults.DEFAULT_LENGTH_WEIGHT,
    )
    assert weights == (0.70, 11.3, 0.27, 1.2)
    assert (defaults.DEFAULT_INFO_NCE_TEMPERATURE, defaults.DEFAULT_COVERAGE_TEMPERATURE) == (
        0.10,
        2.7,
    )


def test_training_arguments_and_loss_weights_read_the_defaults():
    args = ParamTrainingArguments("out")
    assert (args.shrinkage, args.eps) == (defaults.DEFAULT_SHRINKAGE, defaults.DEFAULT_EPS)
    assert args.num_anchors == defaults.DEFAULT_NUM_ANCHORS
    assert args.num_train_epochs == defaults.DEFAULT_NUM_TRAIN_EPOCHS
    assert args.train_batch_size == defaults.DEFAULT_TRAIN_BATCH_SIZE
    assert args.learning_rate == defaults.DEFAULT_LEARNING_RATE
    assert args.mixture_temperature == defaults.DEFAULT_MIXTURE_TEMPERATURE
    assert args.loss_weights == LossWeights()  # the dataclass and the loss agree


def test_each_loss_weight_reads_the_default_of_its_argument_name():
    """``coverage``: the argument ``coverage_weight``, both ``DEFAULT_COVERAGE_WEIGHT``."""
    args = ParamTrainingArguments("out")
    for f in fields(LossWeights):
        name = loss_weight_field(f.name)
        default = getattr(defaults, f"DEFAULT_{name.upper()}")
        assert f.default == getattr(args, name) == default, f.name


def test_every_training_field_has_command_line_help():
    for f in fields(ParamTrainingArguments):
        assert f.name == "output_dir" or f.metadata.get("help"), f.name


def test_the_cli_defaults_are_the_library_defaults():
    parser = build_parser()
    embed = parser.parse_args(["embed", "run"])
    assert embed.test_size == defaults.DEFAULT_TEST_SIZE
    assert embed.batch_size == defaults.DEFAULT_EMBED_BATCH_SIZE
    assert parser.parse_args(["evaluate", "run"]).head_epochs == defaults.DEFAULT_HEAD_EPOCHS
    fit = parser.parse_args(["fit", "run"])
    assert fit.method == defaults.DEFAULT_METHOD
    assert fit.eps == defaults.DEFAULT_EPS
    # --shrinkage unset: each method's measured best (`pipeline.fit`), PARAM's is the paper's
    assert fit.shrinkage is None
    assert training_args(fit).shrinkage == defaults.DEFAULT_SHRINKAGE
    assert fit.num_anchors == defaults.DEFAULT_NUM_ANCHORS


def test_statistics_default_to_the_same_shrinkage():
    from relrep_hf.functional import statistics

    assert statistics.DEFAULT_SHRINKAGE is defaults.DEFAULT_SHRINKAGE
    assert statistics.DEFAULT_EPS is defaults.DEFAULT_EPS


@pytest.mark.parametrize("shrinkage, eps", [(-0.1, 0.0), (1.5, 0.0), (0.1, -1e-9)])
def test_similarity_settings_are_checked_where_stored(shrinkage, eps):
    with pytest.raises(ValueError, match="Need 0 <= shrinkage <= 1 and eps >= 0"):
        defaults.check_similarity_settings(shrinkage, eps)
    with pytest.raises(ValueError, match=f"got shrinkage={shrinkage} and eps={eps}"):
        ParamTrainingArguments("out", shrinkage=shrinkage, eps=eps)
    defaults.check_similarity_settings(0.0, 0.0)  # the affine-invariant limit is allowed


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("support_size", 0, "support_size must be >= 1 or None, got 0"),
        ("save_total_limit", 0, "save_total_limit must be >= 1 or None, got 0"),
        ("save_steps", 0, "save_steps must be >= 1, got 0"),
        ("coverage_chunk_size", 0, "coverage_chunk_size must be >= 1, got 0"),
        ("weight_decay", -0.1, "weight_decay and init_scale must be >= 0"),
        ("coverage_weight", -1.0, "LossWeights.coverage must be a finite number >= 0"),
    ],
)
def test_training_arguments_are_validated_once_when_made(field, value, message):
    with pytest.raises(ValueError, match=message):
        ParamTrainingArguments("out", **{field: value})


@pytest.mark.parametrize(
    "value, error, message",
    [
        (2.0, TypeError, r"num_anchors must be a whole number \(an int\), got 2.0 \(float\): pass an "
         r"int \(e.g. num_anchors=2\)"),
        (True, TypeError, r"got True \(bool\)"),
        ("3", TypeError, r"got '3' \(str\)"),
        (0, ValueError, "num_anchors must be >= 1, got 0"),
    ],
)  # fmt: skip
def test_a_count_must_be_a_whole_number(value, error, message):
    from relrep_hf.utils.defaults import check_count

    with pytest.raises(error, match=message):
        check_count(value, "num_anchors")


def test_integer_scalars_of_numpy_and_torch_are_counts():
    import numpy as np
    import torch

    from relrep_hf.utils.defaults import check_count

    assert check_count(np.int64(3), "m") == 3 and check_count(torch.tensor(4), "m") == 4
    assert type(check_count(np.int32(5), "m")) is int
