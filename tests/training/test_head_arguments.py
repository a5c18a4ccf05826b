"""`HeadTrainingArguments`: a `transformers.TrainingArguments` that keeps the head's defaults,
takes every field Trainer users pass, and checks each against its type."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import TrainingArguments

from relrep_hf.training.head_arguments import HeadTrainingArguments
from relrep_hf.training.head_directions import DIRECTION_CANDIDATES, DIRECTION_TOLERANCE
from relrep_hf.utils.defaults import DEFAULT_SEED
from tests.fixtures import trainer_inputs

# the head's defaults, where they differ from TrainingArguments' (or are its own fields)
HEAD_DEFAULTS = {
    "num_train_epochs": 10, "learning_rate": 3e-3, "per_device_train_batch_size": 64,
    "per_device_eval_batch_size": 512, "weight_decay": 0.01, "warmup_ratio": 0.0,
    "max_grad_norm": 1.0, "seed": DEFAULT_SEED, "logging_steps": 50, "disable_tqdm": False,
    "save_final_model": True, "choose_directions": True,
    "direction_candidates": DIRECTION_CANDIDATES, "direction_tolerance": DIRECTION_TOLERANCE,
}  # fmt: skip


def test_the_head_defaults_are_kept_on_a_training_arguments():
    args = HeadTrainingArguments("out")
    assert isinstance(args, TrainingArguments)
    for name, value in HEAD_DEFAULTS.items():
        assert getattr(args, name) == value, name
    assert args.lr_scheduler_type.value == "linear" and args.eval_strategy.value == "epoch"
    assert args.save_strategy.value == "no" and args.report_to == []  # nothing written
    assert args.hub_strategy.value == "end" and not args.push_to_hub
    to_dict = args.to_dict()  # what head_directions reads
    assert to_dict["num_train_epochs"] == 10 and to_dict["learning_rate"] == 3e-3


def test_every_trainer_field_is_accepted():
    args = HeadTrainingArguments(
        Path("out"), report_to="none", load_best_model_at_end=True,
        metric_for_best_model="weighted_f1", greater_is_better=True, push_to_hub=True,
        hub_model_id="me/head", hub_token="hf_x", hub_private_repo=True, save_total_limit=2,
        lr_scheduler_type="cosine_with_restarts", eval_strategy="steps", eval_steps=5,
        warmup_steps=3, max_grad_norm=None,
    )  # fmt: skip
    # load_best_model_at_end saves when it evaluates (save_strategy left unset)
    assert args.save_strategy.value == "steps" and args.save_steps == 500
    assert (
        args.output_dir == "out" and args.hub_model_id == "me/head" and args.save_total_limit == 2
    )
    trainer = args.trainer_arguments(output_dir="elsewhere")
    assert type(trainer) is TrainingArguments and trainer.output_dir == "elsewhere"
    assert trainer.max_grad_norm == 0.0 and trainer.warmup_steps == 3  # None: no clipping
    warm = HeadTrainingArguments("out", warmup_ratio=0.1, lr_scheduler_type="constant")
    trainer = warm.trainer_arguments()
    assert trainer.warmup_steps == 0.1  # a float below 1: a ratio of the steps
    assert trainer.lr_scheduler_type.value == "constant_with_warmup"  # constant after warm-up


MESSAGES = {
    "a TrainingArguments field of the wrong type (a str for a number)":
        (TypeError, r"HeadTrainingArguments.learning_rate must be float, got '1e-3' \(str\). "
                    r"Pass e.g. learning_rate=0.003"),
    "a hub_strategy other than 'end'":
        (ValueError, r"hub_strategy='every_save' is not supported: HeadTrainer pushes the head "
                     r"once, when training ends"),
}  # fmt: skip


@pytest.mark.parametrize("case", [c for c in trainer_inputs.CASES if c[0] in MESSAGES],
                         ids=lambda c: c[0])  # fmt: skip
def test_bad_arguments_get_clear_errors(case, tmp_path):
    error, message = MESSAGES[case[0]]
    with pytest.raises(error, match=message):
        case[2](type("Setup", (), {"folder": tmp_path})())


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("per_device_train_batch_size", "64", r"must be int, got '64' \(str\)"),
        ("num_train_epochs", True, "must be int, got True"),
        ("push_to_hub", "yes", r"push_to_hub must be bool, got 'yes'"),
        ("hub_model_id", 3, r"hub_model_id must be str or None, got 3 \(int\)"),
        ("report_to", 1, r"report_to must be str or list\[str\] or None, got 1"),
        ("direction_candidates", 16, r"direction_candidates must be .*got 16"),
    ],
)
def test_each_field_is_checked_against_its_type(field, value, message):
    with pytest.raises(TypeError, match=message):
        HeadTrainingArguments("out", **{field: value})


def test_the_heads_own_checks_stay():
    with pytest.raises(ValueError, match="num_train_epochs must be a positive int, got 0"):
        HeadTrainingArguments("out", num_train_epochs=0)
    with pytest.raises(ValueError, match="Invalid lr_scheduler_type 'step'. Valid: 'linear'"):
        HeadTrainingArguments("out", lr_scheduler_type="step")
    with pytest.raises(ValueError, match="max_grad_norm must be > 0 or None"):
        HeadTrainingArguments("out", max_grad_norm=0.0)
