"""`HeadTrainingArguments`: the arguments of `relrep_hf.training.head_trainer.HeadTrainer`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from relrep_hf.training.head_directions import DIRECTION_CANDIDATES, DIRECTION_TOLERANCE
from relrep_hf.utils.defaults import DEFAULT_SEED

__all__ = ["HeadTrainingArguments"]


@dataclass
class HeadTrainingArguments:
    """Arguments of `HeadTrainer`, named as in `transformers.TrainingArguments`.

    Args:
        output_dir: where `HeadTrainer.save_model` writes the head (config.json + safetensors).
        num_train_epochs: passes over the training features.
        learning_rate: peak learning rate of AdamW.
        per_device_train_batch_size: rows per step and process.
        per_device_eval_batch_size: rows per evaluation forward.
        weight_decay: AdamW's decoupled weight decay (not applied to biases and LayerNorm).
        warmup_ratio: fraction of the steps with a linear warm-up.
        lr_scheduler_type: ``"linear"``, ``"cosine"`` or ``"constant"`` (after the warm-up).
        max_grad_norm: gradient clipping norm; ``None`` disables clipping.
        seed: seeds initialisation-free randomness of the run (shuffling, dropout).
        logging_steps: log the mean training loss every this many steps.
        eval_strategy: ``"epoch"`` evaluates after each epoch when eval features are given.
        save_final_model: save the head to ``output_dir`` when training ends.
        disable_tqdm: no progress bar.
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
    warmup_ratio: float = 0.0
    lr_scheduler_type: Literal["linear", "cosine", "constant"] = "linear"
    max_grad_norm: float | None = 1.0
    seed: int = DEFAULT_SEED
    logging_steps: int = 50
    eval_strategy: Literal["no", "epoch"] = "epoch"
    save_final_model: bool = True
    disable_tqdm: bool = False
    choose_directions: bool = True
    direction_candidates: tuple[int, ...] = DIRECTION_CANDIDATES
    direction_tolerance: float = DIRECTION_TOLERANCE

    def __post_init__(self) -> None:
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
        if self.lr_scheduler_type not in ("linear", "cosine", "constant"):
            raise ValueError(
                f"Invalid lr_scheduler_type {self.lr_scheduler_type!r}. Valid: 'linear', 'cosine', "
                f"'constant'."
            )
        if not self.direction_tolerance >= 0:
            raise ValueError(f"direction_tolerance must be >= 0, got {self.direction_tolerance!r}.")
        if self.eval_strategy not in ("no", "epoch"):
            raise ValueError(f"Invalid eval_strategy {self.eval_strategy!r}. Valid: 'no', 'epoch'.")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {self.max_grad_norm!r}.")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
