"""`ParamTrainingArguments`: PARAM's arguments, `FitArguments` and its training (the paper's
Table 5, `relrep_hf.utils.defaults`), as transformers' ``training_args.py`` beside
``trainer.py``. Light to import: the command line builds its flags from these fields
(``relrep-hf --help`` imports no torch, accelerate or datasets).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from relrep_hf.anchors.arguments import FitArguments, argument_field
from relrep_hf.utils.defaults import (
    DEFAULT_COVERAGE_CHUNK_SIZE,
    DEFAULT_COVERAGE_TEMPERATURE,
    DEFAULT_COVERAGE_WEIGHT,
    DEFAULT_INFO_NCE_TEMPERATURE,
    DEFAULT_INFO_NCE_WEIGHT,
    DEFAULT_LEARNING_RATE,
    DEFAULT_LENGTH_WEIGHT,
    DEFAULT_MIXTURE_TEMPERATURE,
    DEFAULT_NUM_TRAIN_EPOCHS,
    DEFAULT_ORTHOGONALITY_WEIGHT,
    DEFAULT_STATISTICS_BATCH_SIZE,
    DEFAULT_TRAIN_BATCH_SIZE,
    check_count,
)

if TYPE_CHECKING:
    from relrep_hf.functional.losses import LossWeights

__all__ = ["ParamTrainingArguments", "loss_weight_field"]


@dataclass
class ParamTrainingArguments(FitArguments):
    """Arguments of `ParamTrainer`: `FitArguments` and PARAM's training; defaults are the
    paper's Table 5 (`relrep_hf.utils.defaults`).

    ``train_batch_size`` is the GLOBAL batch (split across processes), so one process and
    many see the same batches and learn the same anchors. Every field is a flag of
    ``relrep-hf fit`` and ``relrep-hf demo`` (through `transformers.HfArgumentParser`).
    """

    _argument_group_name = "PARAM training (defaults: the paper's Table 5)"

    mixture_temperature: float = argument_field(
        DEFAULT_MIXTURE_TEMPERATURE, "softmax temperature T of the mixture P = softmax(logits / T)"
    )
    num_train_epochs: int = argument_field(
        DEFAULT_NUM_TRAIN_EPOCHS, "epochs over the training rows"
    )
    learning_rate: float = argument_field(DEFAULT_LEARNING_RATE, "learning rate of the optimizer")
    optimizer: Literal["adamw", "adam"] = argument_field("adamw", "optimizer of the mixture logits")
    weight_decay: float = argument_field(0.0, "decoupled weight decay of AdamW")
    train_batch_size: int = argument_field(DEFAULT_TRAIN_BATCH_SIZE, "global batch size")
    coverage_chunk_size: int = argument_field(
        DEFAULT_COVERAGE_CHUNK_SIZE, "rows per chunk of the coverage loss's soft assignments"
    )
    info_nce_weight: float = argument_field(DEFAULT_INFO_NCE_WEIGHT, "weight of the InfoNCE term")
    coverage_weight: float = argument_field(DEFAULT_COVERAGE_WEIGHT, "weight of the coverage term")
    orthogonality_weight: float = argument_field(
        DEFAULT_ORTHOGONALITY_WEIGHT, "weight of the orthogonality term"
    )
    length_weight: float = argument_field(DEFAULT_LENGTH_WEIGHT, "weight of the length term")
    info_nce_temperature: float = argument_field(
        DEFAULT_INFO_NCE_TEMPERATURE, "temperature of InfoNCE"
    )
    coverage_temperature: float = argument_field(
        DEFAULT_COVERAGE_TEMPERATURE, "temperature of the coverage's soft assignments"
    )
    init_scale: float = argument_field(1.0, "standard deviation of the initial mixture logits")
    logging_steps: int = argument_field(10, "log the loss terms every this many steps")
    save_strategy: Literal["no", "epoch", "steps"] = argument_field(
        "epoch", "when to checkpoint (the last step always is, unless 'no')"
    )
    save_steps: int = argument_field(500, "steps between checkpoints under save_strategy 'steps'")
    save_total_limit: int | None = argument_field(
        2, "checkpoints kept, the oldest removed first (None: all)"
    )
    disable_tqdm: bool = argument_field(False, "no progress bar")
    report_to: list[str] = field(
        default_factory=list,
        metadata={"help": "accelerate trackers to log to (e.g. tensorboard)"},
    )
    statistics_batch_size: int = argument_field(
        DEFAULT_STATISTICS_BATCH_SIZE, "rows per chunk when estimating the whitening statistics"
    )
    # bfloat16 for the two products with the support (P @ whitened support and dL/dP), the
    # bulk of a step: faster where bf16 matmuls are native (AVX512-BF16, AMX, GPUs); the
    # losses move by about 1e-4 relative (printed by `python -m benchmarks --only param`)
    bf16: bool = argument_field(False, "bfloat16 products with the support (faster where native)")

    def __post_init__(self) -> None:
        super().__post_init__()  # anchors, support size, shrinkage and eps
        if self.optimizer not in ("adamw", "adam"):
            raise ValueError(f"Invalid optimizer {self.optimizer!r}. Valid: 'adamw', 'adam'.")
        if self.save_strategy not in ("no", "epoch", "steps"):
            raise ValueError(
                f"Invalid save_strategy {self.save_strategy!r}. Valid: 'no', 'epoch', 'steps'."
            )
        positive = (
            "num_train_epochs",
            "train_batch_size",
            "logging_steps",
            "save_steps",
            "coverage_chunk_size",
            "statistics_batch_size",
        )
        for name in positive:
            check_count(getattr(self, name), name)
        if self.save_total_limit is not None:
            check_count(self.save_total_limit, "save_total_limit", optional=True)
        if self.mixture_temperature <= 0 or self.learning_rate <= 0:
            raise ValueError("mixture_temperature and learning_rate must be > 0.")
        if self.weight_decay < 0 or self.init_scale < 0:
            raise ValueError(
                f"weight_decay and init_scale must be >= 0, got {self.weight_decay} and "
                f"{self.init_scale}."
            )
        self.loss_weights  # validates weights and temperatures  # noqa: B018

    @property
    def checkpoint_dir(self) -> Path:
        """Where checkpoints go: ``<output_dir>-checkpoints``, beside the anchor set and never
        inside it, so optimizer state and pickles are not published with the artifact."""
        output = Path(os.path.abspath(self.output_dir))
        return output.with_name(f"{output.name}-checkpoints")

    @property
    def loss_weights(self) -> LossWeights:
        """The loss's weights and temperatures, each read from its field (`loss_weight_field`)."""
        from relrep_hf.functional.losses import (
            LossWeights,  # torch: imported when training, not for --help
        )

        names = (f.name for f in dataclasses.fields(LossWeights))
        return LossWeights(**{name: getattr(self, loss_weight_field(name)) for name in names})


def loss_weight_field(name: str) -> str:
    """The `ParamTrainingArguments` field of `LossWeights`'s ``name``: ``<term>_weight`` for a
    term's weight (``coverage_weight``), a temperature by its own name; its default is the
    constant of that name in `relrep_hf.utils.defaults` (``DEFAULT_COVERAGE_WEIGHT``)."""
    return name if name.endswith("temperature") else f"{name}_weight"
