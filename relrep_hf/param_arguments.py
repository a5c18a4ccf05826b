"""`ParamTrainingArguments`: the arguments of `ParamTrainer`, apart from the trainer.

Like transformers' ``training_args.py`` beside ``trainer.py``: the command line reads these
fields and defaults to build its flags, and importing them costs no torch, accelerate or
datasets (``relrep-hf --help`` stays fast).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from relrep_hf.losses import LossWeights


@dataclass
class ParamTrainingArguments:
    """Arguments of `ParamTrainer`; defaults are the paper's Table 5.

    ``train_batch_size`` is the GLOBAL batch (split across processes), so one process and
    many see the same batches and learn the same anchors.
    """

    output_dir: str
    num_anchors: int = 300
    support_size: int | None = None  # K; None: every input is a support point
    mixture_temperature: float = 2.9  # T in P = softmax(logits / T)
    num_train_epochs: int = 95
    learning_rate: float = 0.03
    optimizer: Literal["adamw", "adam"] = "adamw"
    weight_decay: float = 0.0
    train_batch_size: int = 1024
    coverage_chunk_size: int = 16384
    info_nce_weight: float = 0.70
    coverage_weight: float = 11.3
    orthogonality_weight: float = 0.27
    length_weight: float = 1.2
    info_nce_temperature: float = 0.10
    coverage_temperature: float = 2.7
    shrinkage: float = 0.15
    eps: float = 5e-8
    init_scale: float = 1.0  # std of the initial mixture logits
    seed: int = 42
    logging_steps: int = 10
    save_strategy: Literal["no", "epoch", "steps"] = "epoch"
    save_steps: int = 500
    save_total_limit: int | None = 2
    disable_tqdm: bool = False
    report_to: list[str] = field(default_factory=list)
    statistics_batch_size: int = 16384
    # bfloat16 for the two products with the support (P @ whitened support and dL/dP), the
    # bulk of a step: faster where bf16 matmuls are native (AVX512-BF16, AMX, GPUs); the
    # losses move by about 1e-4 relative (printed by `python -m benchmarks --only bench_param`)
    bf16: bool = False

    def __post_init__(self) -> None:
        if self.optimizer not in ("adamw", "adam"):
            raise ValueError(f"Invalid optimizer {self.optimizer!r}. Valid: 'adamw', 'adam'.")
        if self.save_strategy not in ("no", "epoch", "steps"):
            raise ValueError(
                f"Invalid save_strategy {self.save_strategy!r}. Valid: 'no', 'epoch', 'steps'."
            )
        for name in ("num_anchors", "num_train_epochs", "train_batch_size", "logging_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if self.mixture_temperature <= 0 or self.learning_rate <= 0:
            raise ValueError("mixture_temperature and learning_rate must be > 0.")
        self.loss_weights  # validates weights and temperatures  # noqa: B018

    @property
    def checkpoint_dir(self) -> Path:
        """Where checkpoints go: ``<output_dir>-checkpoints``, beside the anchor set and never
        inside it, so optimizer state and pickles are not published with the artifact."""
        output = Path(os.path.abspath(self.output_dir))
        return output.with_name(f"{output.name}-checkpoints")

    @property
    def loss_weights(self) -> LossWeights:
        from relrep_hf.losses import LossWeights  # torch: imported when training, not for --help

        return LossWeights(
            info_nce=self.info_nce_weight,
            coverage=self.coverage_weight,
            orthogonality=self.orthogonality_weight,
            length=self.length_weight,
            info_nce_temperature=self.info_nce_temperature,
            coverage_temperature=self.coverage_temperature,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
