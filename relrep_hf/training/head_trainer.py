"""Training heads on relative features with `transformers.Trainer`.

Relative features are small (``[N, m]`` floats), so they are trained on as tensors in memory:
extract them once (`RelativeWrapper.encode` or `extract_embeddings` + the projector), then
`HeadTrainer(model, args, train_relative, train_labels).train()`. The head returns a
`SequenceClassifierOutput`, so `Trainer` drives it as it would any sequence classifier; accuracy
and weighted F1 come from ``compute_metrics``. The run is deterministic for a seed.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset
from transformers import EvalPrediction, Trainer, TrainingArguments
from transformers.trainer_callback import PrinterCallback

from relrep_hf.functional.metrics import accuracy, weighted_f1
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    write_head_metrics,
)
from relrep_hf.utils.defaults import DEFAULT_SEED
from relrep_hf.utils.validation import as_embeddings, check_embeddings

__all__ = ["HeadTrainOutput", "HeadTrainer", "HeadTrainingArguments"]


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
    """

    output_dir: str
    num_train_epochs: int = 10
    learning_rate: float = 1e-3
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
        if self.eval_strategy not in ("no", "epoch"):
            raise ValueError(f"Invalid eval_strategy {self.eval_strategy!r}. Valid: 'no', 'epoch'.")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {self.max_grad_norm!r}.")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class HeadTrainOutput:
    """What `HeadTrainer.train` returns: steps taken, mean training loss, last metrics."""

    global_step: int
    training_loss: float
    metrics: dict[str, float] = field(default_factory=dict)


class HeadTrainer:
    r"""Train a `RelativeHeadForClassification` on relative features with `transformers.Trainer`.

    Args:
        model: the head to train (trained in place, like `transformers.Trainer` does).
        args: `HeadTrainingArguments`.
        train_relative: training features ``[N, m]`` (tensor or array).
        train_labels: class indices ``[N]`` (float ``[N, C]`` for multi-label heads).
        eval_relative, eval_labels: evaluation features and labels (optional).

    Example:
        >>> import torch
        >>> from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
        >>> from relrep_hf.training.head_trainer import HeadTrainer, HeadTrainingArguments
        >>> from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
        >>> x = torch.randn(256, 16); y = (x[:, 0] > 0).long()
        >>> head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=16, num_labels=2))
        >>> args = HeadTrainingArguments("out", num_train_epochs=20, learning_rate=1e-2,
        ...                              disable_tqdm=True, save_final_model=False)
        >>> result = HeadTrainer(head, args, x, y, x, y).train()
        >>> result.metrics["eval_accuracy"] > 0.9
        True
    """

    def __init__(
        self,
        model: RelativeHeadForClassification,
        args: HeadTrainingArguments,
        train_relative: Tensor | np.ndarray,
        train_labels: Tensor | np.ndarray | list[int],
        eval_relative: Tensor | np.ndarray | None = None,
        eval_labels: Tensor | np.ndarray | list[int] | None = None,
    ):
        if not isinstance(args, HeadTrainingArguments):
            raise ValueError(f"args must be HeadTrainingArguments, got {type(args).__name__}.")
        if (eval_relative is None) != (eval_labels is None):
            raise ValueError("Pass both eval_relative and eval_labels, or neither.")
        self.model = model
        self.args = args
        self.train_dataset = _Features(*self._as_tensors(train_relative, train_labels, "train"))
        self.eval_dataset = None
        if eval_relative is not None:
            self.eval_dataset = _Features(*self._as_tensors(eval_relative, eval_labels, "eval"))
        self.trainer: Trainer | None = None
        self.eval_metrics: dict[str, float] = {}

    def _as_tensors(self, relative: Any, labels: Any, split: str) -> tuple[Tensor, Tensor]:
        relative = (
            as_embeddings(relative, name=f"{split}_relative").detach().to("cpu", torch.float32)
        )
        m = self.model.config.num_anchors
        check_embeddings(
            relative,
            dim=m,
            name=f"{split}_relative",
            min_rows=1,
            dim_hint=" (the head's num_anchors)",
        )
        if relative.ndim != 2:
            raise ValueError(
                f"{split}_relative must have shape [N, {m}], got {tuple(relative.shape)}."
            )
        labels = self._label_ids(labels, split)
        if labels.shape[0] != relative.shape[0]:
            raise ValueError(
                f"{split}_labels has {labels.shape[0]} rows but {split}_relative has {relative.shape[0]}: "
                f"row i of both must describe the same input."
            )
        single_label = self.model.config.problem_type in (None, "single_label_classification")
        if (
            labels.is_floating_point()
            and single_label
            and self.model.config.num_labels > 1
            and labels.ndim == 1
        ):
            raise ValueError(
                f"{split}_labels must be class indices (ints), got dtype {labels.dtype}. Multi-hot "
                f"float labels have shape [N, num_labels]."
            )
        if not labels.is_floating_point():
            labels = labels.long()
            num_labels = self.model.config.num_labels
            if labels.numel() and (labels.min() < 0 or labels.max() >= num_labels):
                raise ValueError(
                    f"{split}_labels must lie in [0, {num_labels}) (the head's num_labels), got "
                    f"values from {int(labels.min())} to {int(labels.max())}."
                )
        return relative, labels

    def _label_ids(self, labels: Any, split: str) -> Tensor:
        """Labels as a tensor; class names (strings) mapped through the head's ``label2id``."""
        if isinstance(labels, np.ndarray) and labels.dtype.kind in "UO":
            labels = labels.tolist()
        if isinstance(labels, (list, tuple)) and labels and isinstance(labels[0], str):
            label2id = self.model.config.label2id or {}
            unknown = sorted({label for label in labels if label not in label2id})
            if unknown:
                raise ValueError(
                    f"{split}_labels holds class names {unknown[:5]} that the head does not know "
                    f"(its label2id is {label2id}). Build the head with "
                    f"id2label={{0: 'first class', ...}} naming every class."
                )
            return torch.tensor([label2id[label] for label in labels])
        return torch.as_tensor(labels).detach().cpu()

    # ---------------------------------------------------------------------------- train

    def _trainer(self) -> Trainer:
        """The `transformers.Trainer` that runs this head's training and evaluation."""
        if self.trainer is None:
            args = self.args
            self.trainer = Trainer(
                model=self.model,
                args=TrainingArguments(
                    # Trainer writes nothing there (no checkpoints, no reports); save_model saves
                    output_dir=os.path.join(tempfile.gettempdir(), "relrep_hf_head_trainer"),
                    num_train_epochs=args.num_train_epochs,
                    learning_rate=args.learning_rate,
                    per_device_train_batch_size=args.per_device_train_batch_size,
                    per_device_eval_batch_size=args.per_device_eval_batch_size,
                    weight_decay=args.weight_decay,
                    warmup_steps=args.warmup_ratio,  # a float below 1 is a ratio of the steps
                    lr_scheduler_type="constant_with_warmup"
                    if args.lr_scheduler_type == "constant"
                    else args.lr_scheduler_type,
                    max_grad_norm=args.max_grad_norm or 0.0,  # 0: no clipping
                    seed=args.seed,
                    logging_steps=args.logging_steps,
                    eval_strategy=args.eval_strategy if self.eval_dataset is not None else "no",
                    save_strategy="no",
                    report_to="none",
                    disable_tqdm=args.disable_tqdm,
                    label_names=["labels"],
                    dataloader_pin_memory=False,
                ),
                train_dataset=self.train_dataset,
                eval_dataset=self.eval_dataset,
                compute_metrics=_compute_metrics,
            )
            self.trainer.remove_callback(PrinterCallback)  # logs go to the logger, not stdout
        return self.trainer

    @property
    def log_history(self) -> list[dict[str, float]]:
        """Training losses every ``logging_steps`` and the evaluations, as `Trainer` logs them."""
        return self.trainer.state.log_history if self.trainer is not None else []

    def train(self) -> HeadTrainOutput:
        """Train for ``num_train_epochs``; evaluate after each epoch when eval data is given."""
        trainer = self._trainer()
        output = trainer.train()
        self.model = trainer.model
        self.model.eval()
        evaluations = [entry for entry in self.log_history if "eval_loss" in entry]
        metrics = _scores(evaluations[-1], "eval") if evaluations else {}
        if metrics:
            self.eval_metrics = metrics
        if self.args.save_final_model:
            self.save_model()
        return HeadTrainOutput(
            global_step=output.global_step, training_loss=output.training_loss, metrics=metrics
        )

    # ------------------------------------------------------------------------- evaluate

    @torch.no_grad()
    def predict_logits(self, relative: Tensor | np.ndarray) -> Tensor:
        """The head's logits ``[N, C]`` (CPU, float32) for features ``[N, m]``, in eval mode."""
        relative = as_embeddings(relative, name="relative").to(torch.float32)
        predictions = self._trainer().predict(_Features(relative)).predictions
        return torch.from_numpy(np.asarray(predictions)).float()

    def evaluate(
        self, relative: Tensor | np.ndarray | None = None, labels: Any = None, prefix: str = "eval"
    ) -> dict[str, float]:
        """Loss, accuracy and weighted F1 on the given features (default: the eval split)."""
        eval_split = relative is None
        if eval_split:
            if self.eval_dataset is None:
                raise ValueError(
                    "No evaluation features: pass relative and labels, or eval_relative to the trainer."
                )
            dataset = self.eval_dataset
        else:
            dataset = _Features(*self._as_tensors(relative, labels, prefix))
        metrics = _scores(self._trainer().evaluate(dataset, metric_key_prefix=prefix), prefix)
        if eval_split:  # what save_model records beside the head
            self.eval_metrics = metrics
        return metrics

    def save_model(self, output_dir: str | os.PathLike | None = None) -> None:
        """Save the head (main process only) to ``output_dir`` (default ``args.output_dir``).

        After an evaluation on the eval split, its accuracy and weighted F1 are written beside
        the head (``metrics.json``) and shown in its model card.
        """
        trainer = self._trainer()
        trainer.accelerator.wait_for_everyone()
        if trainer.is_world_process_zero():
            model = trainer.accelerator.unwrap_model(self.model)
            folder = output_dir or self.args.output_dir
            model.save_pretrained(folder)
            scores = {
                name: self.eval_metrics[f"eval_{name}"]
                for name in ("accuracy", "weighted_f1")
                if f"eval_{name}" in self.eval_metrics
            }
            if scores:
                encoder = model.config.source_encoder_id or "training encoder"
                write_head_metrics(folder, {encoder: scores}, source_encoder=encoder)


class _Features(Dataset):
    """Rows of relative features (and labels) as `Trainer` batches: ``{"relative", "labels"}``."""

    def __init__(self, relative: Tensor, labels: Tensor | None = None):
        self.relative, self.labels = relative, labels

    def __len__(self) -> int:
        return len(self.relative)

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        if self.labels is None:
            return {"relative": self.relative[index]}
        return {"relative": self.relative[index], "labels": self.labels[index]}


def _compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy and weighted F1 of class predictions (none for multi-hot or regression labels)."""
    labels = np.asarray(prediction.label_ids)
    if np.issubdtype(labels.dtype, np.floating):
        return {}
    predicted = np.asarray(prediction.predictions).argmax(axis=-1)
    return {"accuracy": accuracy(predicted, labels), "weighted_f1": weighted_f1(predicted, labels)}


def _scores(logged: dict[str, float], prefix: str) -> dict[str, float]:
    """Loss, accuracy and weighted F1 of an evaluation, without `Trainer`'s timings."""
    return {
        f"{prefix}_{name}": float(logged[f"{prefix}_{name}"])
        for name in ("loss", "accuracy", "weighted_f1")
        if f"{prefix}_{name}" in logged
    }
