"""What `relrep_hf.training.head_trainer.HeadTrainer` is given: its arguments, and the columns
of a `datasets.Dataset` it reads.

`HeadTrainingArguments` is a `transformers.TrainingArguments` with the head's defaults and a few
fields of its own, so everything `TrainingArguments` takes is accepted (``report_to``,
``load_best_model_at_end``, ``metric_for_best_model``, ``push_to_hub``, ``hub_model_id``,
``hub_token``, ...). Every field is checked against its annotation when the arguments are made:
a string where a number belongs is an error here, not a crash in the middle of training.

A Dataset holds one feature column per encoder (each row a list of m floats: the relative
features of that row through that encoder's projector) and one label column (class indices, a
`ClassLabel`, class names, or multi-hot floats). The columns' default names are ``"relative"``
(one encoder) and ``"label"``; ``feature_columns`` names others: a column, a list of columns (one
encoder each, named by its column) or ``{encoder: column}`` (`dataset_columns`).
"""

from __future__ import annotations

import enum
import numbers
import os
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Any, Literal, Union

import datasets
import numpy as np
from transformers import TrainingArguments
from transformers.trainer_utils import SchedulerType

from relrep_hf.training.head_directions import DIRECTION_CANDIDATES, DIRECTION_TOLERANCE
from relrep_hf.utils.defaults import DEFAULT_SEED

__all__ = [
    "DEFAULT_FEATURE_COLUMN",
    "DEFAULT_LABEL_COLUMN",
    "FeatureColumns",
    "HeadTrainingArguments",
    "check_field_types",
    "dataset_columns",
    "feature_column_map",
    "setting_value",
]

_SCHEDULERS = tuple(kind.value for kind in SchedulerType)


@dataclass
class HeadTrainingArguments(TrainingArguments):
    """Arguments of `HeadTrainer`: `transformers.TrainingArguments` with the head's defaults.

    Every `TrainingArguments` field is accepted (``report_to``, ``load_best_model_at_end``,
    ``metric_for_best_model``, ``save_strategy``, ``push_to_hub``, ``hub_model_id``,
    ``hub_token``, ``hub_private_repo``, ...). The defaults that differ from
    `TrainingArguments`', and the fields of the head's own:

    Args:
        output_dir: where `HeadTrainer.save_model` writes the head (config.json + safetensors),
            and the Trainer its checkpoints when ``save_strategy`` is not ``"no"``.
        num_train_epochs: passes over the training features (a whole number).
        learning_rate: peak learning rate of AdamW (3e-3).
        per_device_train_batch_size: rows per step and process (64).
        per_device_eval_batch_size: rows per evaluation forward (512).
        weight_decay: AdamW's decoupled weight decay (not applied to biases and LayerNorm).
        warmup_ratio: fraction of the steps with a linear warm-up (``warmup_steps`` if 0).
        lr_scheduler_type: a `transformers.SchedulerType`; ``"constant"`` is constant after
            the warm-up.
        max_grad_norm: gradient clipping norm; ``None`` disables clipping.
        seed: seeds initialisation-free randomness of the run (shuffling, dropout).
        logging_steps: log the mean training loss every this many steps.
        eval_strategy: ``"epoch"`` evaluates after each epoch when eval data is given.
        save_strategy: ``None`` (the default): ``eval_strategy`` with
            ``load_best_model_at_end``, else ``"no"`` (no checkpoints).
        report_to: ``"none"``.
        disable_tqdm: no progress bar.
        hub_strategy: ``"end"``, the only one: with ``push_to_hub`` the head is pushed once,
            when training ends, through the artifact base (card and manifest), to
            ``hub_model_id`` (default: the name of ``output_dir``).
        save_final_model: save the head to ``output_dir`` when training ends.
        choose_directions: given several encoders' features and a head whose
            ``num_directions`` is unset, choose how many leading features it reads
            (`relrep_hf.training.head_directions`); ``False`` reads all m.
        direction_candidates: the numbers tried (those below m, and m).
        direction_tolerance: keep the most directions scoring within this of the best
            (`relrep_hf.training.head_directions.DIRECTION_TOLERANCE`; 0: the best alone).
    """

    output_dir: str
    num_train_epochs: int = 10
    learning_rate: float = 3e-3
    per_device_train_batch_size: int = 64
    per_device_eval_batch_size: int = 512
    weight_decay: float = 0.01
    lr_scheduler_type: SchedulerType | str = "linear"
    max_grad_norm: float | None = 1.0
    seed: int = DEFAULT_SEED
    logging_steps: int = 50
    eval_strategy: Any = "epoch"  # IntervalStrategy | str, checked by TrainingArguments
    save_strategy: Any = None  # SaveStrategy | str | None: see the docstring
    report_to: str | list[str] | None = "none"
    disable_tqdm: bool | None = False
    hub_strategy: Any = "end"  # HubStrategy | str
    warmup_ratio: float = 0.0
    save_final_model: bool = True
    choose_directions: bool = True
    direction_candidates: tuple[int, ...] = DIRECTION_CANDIDATES
    direction_tolerance: float = DIRECTION_TOLERANCE

    def __post_init__(self) -> None:
        check_field_types(self)
        for name in (
            "num_train_epochs",
            "per_device_train_batch_size",
            "per_device_eval_batch_size",
            "logging_steps",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}.")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}.")
        if self.weight_decay < 0 or not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(
                f"Need weight_decay >= 0 and 0 <= warmup_ratio < 1, got {self.weight_decay!r} and "
                f"{self.warmup_ratio!r}."
            )
        if setting_value(self.lr_scheduler_type) not in _SCHEDULERS:
            raise ValueError(
                f"Invalid lr_scheduler_type {self.lr_scheduler_type!r}. Valid: "
                f"{', '.join(map(repr, _SCHEDULERS))}."
            )
        if not self.direction_tolerance >= 0:
            raise ValueError(f"direction_tolerance must be >= 0, got {self.direction_tolerance!r}.")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {self.max_grad_norm!r}.")
        hub_strategy = setting_value(self.hub_strategy)
        if hub_strategy != "end":
            raise ValueError(
                f"hub_strategy={hub_strategy!r} is not supported: HeadTrainer pushes "
                "the head once, when training ends, with its card and manifest "
                "(hub_strategy='end'). Leave hub_strategy unset."
            )
        if self.save_strategy is None:
            self.save_strategy = self.eval_strategy if self.load_best_model_at_end else "no"
        super().__post_init__()

    def trainer_arguments(self, **overrides: Any) -> TrainingArguments:
        """These arguments as the plain `TrainingArguments` `HeadTrainer` gives
        `transformers.Trainer`: the head's own fields read into Trainer's (``warmup_ratio``
        into ``warmup_steps``, ``"constant"`` after a warm-up, ``max_grad_norm=None`` as 0),
        then ``overrides``."""
        values = {f.name: getattr(self, f.name) for f in fields(TrainingArguments) if f.init}
        if self.warmup_ratio:
            values["warmup_steps"] = self.warmup_ratio  # a float below 1 is a ratio of the steps
        if setting_value(self.lr_scheduler_type) == "constant":
            values["lr_scheduler_type"] = "constant_with_warmup"
        values["max_grad_norm"] = self.max_grad_norm or 0.0  # 0: no clipping
        return TrainingArguments(**{**values, **overrides})


def setting_value(setting: Any) -> Any:
    """An enum's value, or the setting itself (``"epoch"`` for ``IntervalStrategy.EPOCH``)."""
    return setting.value if isinstance(setting, enum.Enum) else setting


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def check_field_types(args: Any) -> None:
    """Raise ``TypeError`` naming the first field of the dataclass ``args`` whose value does not
    match its annotation (an int for a float is fine; a bool is no number; a path is a str;
    an enum's field takes its values' strings)."""
    hints = _hints(type(args))
    for f in fields(args):
        if not f.init or f.name not in hints:
            continue
        value, hint = getattr(args, f.name), hints[f.name]
        if not _matches(value, hint):
            raise TypeError(
                f"{type(args).__name__}.{f.name} must be {_describe(hint)}, got {value!r} "
                f"({type(value).__name__}). Pass e.g. {f.name}={_example(f)}."
            )


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_matches(value, option) for option in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    kind = origin or hint
    if not isinstance(kind, type):
        return True  # an annotation this check does not read
    if kind is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, (str, os.PathLike))
    if issubclass(kind, enum.Enum):
        return isinstance(value, (kind, str))
    if kind in (list, tuple):
        return isinstance(value, (list, tuple))
    return isinstance(value, kind)


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_describe(option) for option in typing.get_args(hint))
    if hint is type(None):
        return "None"
    return getattr(hint, "__name__", str(hint)) if typing.get_origin(hint) is None else str(hint)


def _example(f: Any) -> str:
    default = None if f.default is MISSING else setting_value(f.default)
    return repr(default) if default is not None else "..."


# ------------------------------------------------------------------ a Dataset's columns

DEFAULT_FEATURE_COLUMN = "relative"  # the head's main_input_name
DEFAULT_LABEL_COLUMN = "label"  # datasets' convention (a ClassLabel column is named so)

FeatureColumns = str | Sequence[str] | Mapping[str, str] | None


def feature_column_map(feature_columns: FeatureColumns) -> dict[str, str]:
    """``{encoder: column}``; one column is one unnamed encoder (``""``)."""
    if feature_columns is None:
        return {"": DEFAULT_FEATURE_COLUMN}
    if isinstance(feature_columns, str):
        return {"": feature_columns}
    if isinstance(feature_columns, Mapping):
        columns = {str(encoder): column for encoder, column in feature_columns.items()}
    else:
        columns = {str(column): column for column in feature_columns}
    if not columns or not all(isinstance(column, str) for column in columns.values()):
        raise ValueError(
            f"feature_columns must name one or more columns (a str, a list of str or "
            f"{{encoder: column}}), got {feature_columns!r}."
        )
    return columns


def dataset_columns(
    dataset: Any,
    *,
    feature_columns: FeatureColumns,
    label_column: str | None,
    split: str,
) -> tuple[dict[str, np.ndarray], Any, dict[str, str]]:
    """``({encoder: features [N, m]}, labels or None, {encoder: name for messages})`` read
    from the columns of ``dataset`` (``label_column=None``: no labels, for predictions).

    Raises:
        TypeError: ``dataset`` is not a `datasets.Dataset` (a `DatasetDict`: pick a split).
        ValueError: a column is missing, or a feature column does not hold lists of numbers
            of one length.
    """
    what = f"{split}_dataset"
    if isinstance(dataset, datasets.DatasetDict):
        raise TypeError(
            f"{what} is a DatasetDict with splits {list(dataset)}: pass one split, e.g. "
            f"dataset[{next(iter(dataset), 'train')!r}]."
        )
    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(f"{what} must be a datasets.Dataset, got {type(dataset).__name__}.")
    columns = feature_column_map(feature_columns)
    wanted = [*columns.values(), *([label_column] if label_column is not None else [])]
    missing = [column for column in wanted if column not in dataset.column_names]
    if missing:
        raise ValueError(
            f"{what} has no column {', '.join(map(repr, missing))}; its columns are "
            f"{dataset.column_names}. Name the feature columns with feature_columns= (one per "
            f"encoder) and the labels with label_column=."
        )
    rows = dataset.with_format("numpy", columns=wanted)[:]
    names = {encoder: f"{what}[{column!r}]" for encoder, column in columns.items()}
    features = {
        encoder: _feature_rows(rows[column], names[encoder]) for encoder, column in columns.items()
    }
    labels = rows[label_column] if label_column is not None else None
    return features, labels, names


def _feature_rows(values: np.ndarray, name: str) -> np.ndarray:
    """A feature column as one array ``[N, m]``, or an error that says what the rows hold."""
    if values.dtype == object:  # rows of different lengths (or of other things)
        lengths = sorted({len(row) if hasattr(row, "__len__") else 1 for row in values})
        raise ValueError(
            f"{name} must hold one list of m numbers per row ([N, m]), got rows of lengths "
            f"{lengths[:5]}: every row needs the same number of relative features."
        )
    if values.ndim != 2 or values.dtype.kind not in "fiu":
        raise ValueError(
            f"{name} must hold one list of m numbers per row ([N, m]), got an array of shape "
            f"{values.shape} and dtype {values.dtype}."
        )
    return values
