"""Training heads on relative features with `transformers.Trainer`.

Relative features are small (``[N, m]`` floats), so they are trained on as tensors in memory:
extract them once (`RelativeWrapper.encode` or `extract_embeddings` + the projector), then
`HeadTrainer(model, args, train_relative, train_labels).train()`. A swappable head is trained
on several encoders' features of the same labelled rows, ``{encoder: [N, m]}``: their rows are
stacked, and the number of leading features the head reads is chosen first by leave-one-encoder-out
transfer among them (`relrep_hf.training.head_directions`). The head returns a
`SequenceClassifierOutput`, so `Trainer` drives it as it would any sequence classifier; accuracy
and weighted F1 come from ``compute_metrics``. The run is deterministic for a seed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset
from transformers import EvalPrediction, Trainer, TrainingArguments, default_data_collator
from transformers.trainer_callback import PrinterCallback

from relrep_hf.functional.metrics import accuracy, weighted_f1
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    write_head_metrics,
)
from relrep_hf.training.head_arguments import HeadTrainingArguments
from relrep_hf.training.head_directions import choose_num_directions
from relrep_hf.utils.validation import as_embeddings, check_distinct_names, check_embeddings

__all__ = ["HeadTrainOutput", "HeadTrainer", "HeadTrainingArguments", "train_in_memory"]


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
        train_relative: training features ``[N, m]`` (tensor or array), or several encoders'
            features of the same rows, ``{encoder: [N, m]}``: one head across them (rows
            stacked), reading the number of leading features chosen by leave-one-encoder-out
            transfer among them (``args.choose_directions``) when its config leaves it unset.
        train_labels: class indices ``[N]`` (or a column ``[N, 1]``; float ``[N, C]`` for
            multi-label heads).
        eval_relative, eval_labels: evaluation features (one tensor or ``{encoder: [N, m]}``)
            and labels (optional).

    Features may be on any device (each encoder's on its own): they are held on the CPU as
    float32, and `transformers.Trainer` moves each batch to its own device (``args.device``:
    the GPU when there is one), where the head is trained. The head goes back to the device
    it was given on after each `train`, `evaluate` and `predict_logits`, so a head built on the
    CPU can be applied to CPU features on a machine with a GPU.

    Example:
        >>> import torch
        >>> from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
        >>> from relrep_hf.training.head_trainer import HeadTrainer, HeadTrainingArguments
        >>> from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
        >>> x = torch.randn(256, 16); y = (x[:, 0] > 0).long()
        >>> x[:, 0] += 3 * (2 * y - 1)  # a margin: the classes stay apart after the LayerNorm
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
        self.train_features, labels = self._encoder_features(train_relative, train_labels, "train")
        self.train_labels = labels
        self.train_dataset = _stacked(self.train_features, labels)
        self.eval_dataset = None
        if eval_relative is not None:
            eval_features, eval_ids = self._encoder_features(eval_relative, eval_labels, "eval")
            self.eval_dataset = _stacked(eval_features, eval_ids)
        self.trainer: Trainer | None = None
        self.eval_metrics: dict[str, float] = {}

    def _encoder_features(
        self, relative: Any, labels: Any, split: str
    ) -> tuple[dict[str, Tensor], Tensor]:
        """``({encoder: [N, m]}, labels [N])``, checked; one tensor is one unnamed encoder."""
        if not isinstance(relative, Mapping):
            relative, labels = self._as_tensors(relative, labels, split)
            return {"": relative}, labels
        if not relative:
            raise ValueError(
                f"{split}_relative is an empty mapping: pass {{encoder: [N, m] features}} of one "
                f"or more encoders."
            )
        check_distinct_names(relative, what=f"encoders of {split}_relative")
        features, ids = {}, None
        for name, values in relative.items():
            features[str(name)], ids = self._as_tensors(
                values, labels, split, name=f"{split}_relative[{name!r}]"
            )
        return features, ids

    def _as_tensors(
        self, relative: Any, labels: Any, split: str, name: str | None = None
    ) -> tuple[Tensor, Tensor]:
        name = name or f"{split}_relative"
        # held on the CPU: the Trainer moves each batch to its device (class docstring)
        relative = as_embeddings(relative, name=name).detach().to("cpu", torch.float32)
        m = self.model.config.num_anchors
        check_embeddings(
            relative, dim=m, name=name, min_rows=1, dim_hint=" (the head's num_anchors)"
        )
        if relative.ndim != 2:
            raise ValueError(f"{name} must have shape [N, {m}], got {tuple(relative.shape)}.")
        labels = self._label_ids(labels, split)
        if labels.ndim == 2 and labels.shape[1] == 1 and not labels.is_floating_point():
            labels = labels[:, 0]  # a column of class indices
        if labels.ndim != 1 and not labels.is_floating_point():
            raise ValueError(
                f"{split}_labels must be class indices of shape [N] (or [N, 1]), got shape "
                f"{tuple(labels.shape)} of dtype {labels.dtype}. Multi-hot labels are floats "
                "[N, num_labels]."
            )
        if labels.shape[0] != relative.shape[0]:
            raise ValueError(
                f"{split}_labels has {labels.shape[0]} rows but {name} has {relative.shape[0]}: "
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
                    remove_unused_columns=False,  # _Features holds the model's inputs only
                ),
                train_dataset=self.train_dataset,
                eval_dataset=self.eval_dataset,
                data_collator=_collate,
                compute_metrics=_compute_metrics,
            )
            self.trainer.remove_callback(PrinterCallback)  # logs go to the logger, not stdout
        return self.trainer

    @contextmanager
    def _on_trainer_device(self) -> Iterator[Trainer]:
        """The Trainer, with the head on its device while it runs, and back where it was after."""
        device = next(self.model.parameters()).device
        trainer = self._trainer()
        self.model.to(trainer.args.device)
        try:
            yield trainer
        finally:
            self.model.to(device)

    @property
    def log_history(self) -> list[dict[str, float]]:
        """Training losses every ``logging_steps`` and the evaluations, as `Trainer` logs them."""
        return self.trainer.state.log_history if self.trainer is not None else []

    def choose_directions(self) -> int | None:
        """Choose how many leading features the head reads, as `train` does first: with 2 or
        more encoders' features, class-index labels, ``args.choose_directions`` and the head's
        ``num_directions`` unset (its layers are then built again). Returns the number, or
        ``None`` when nothing was chosen."""
        config = self.model.config
        if (
            len(self.train_features) < 2
            or not self.args.choose_directions
            or config.num_directions is not None
            or self.train_labels.is_floating_point()
            or config.num_labels < 2
        ):
            return None
        chosen, record = choose_num_directions(
            config,
            self.train_features,
            self.train_labels,
            training=self.args.to_dict(),
            grid=self.args.direction_candidates,
            seed=self.args.seed,
            tolerance=self.args.direction_tolerance,
        )
        self.model.read_directions(chosen, record)
        self.trainer = None  # its optimizer would hold the old layers
        return chosen

    def train(self) -> HeadTrainOutput:
        """Train for ``num_train_epochs`` (after `choose_directions`); evaluate after each epoch
        when eval data is given."""
        self.choose_directions()
        with self._on_trainer_device() as trainer:
            output = trainer.train()
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
        """The head's logits ``[N, C]`` (float32) for features ``[N, m]``, in eval mode, on the
        features' device (the Trainer computes them on its own)."""
        relative = as_embeddings(relative, name="relative")
        features = relative.detach().to("cpu", torch.float32)
        with self._on_trainer_device() as trainer:
            predictions = trainer.predict(_Features(features)).predictions
        return torch.from_numpy(np.asarray(predictions)).float().to(relative.device)

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
        with self._on_trainer_device() as trainer:
            metrics = _scores(trainer.evaluate(dataset, metric_key_prefix=prefix), prefix)
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


def train_in_memory(
    head: RelativeHeadForClassification,
    features: Tensor | Mapping[str, Tensor],
    labels: Any,
    **arguments: Any,
) -> RelativeHeadForClassification:
    """``head`` trained on ``features`` (one tensor or ``{encoder: tensor}``) with nothing
    written and nothing printed (no output folder, evaluation or progress bar), in eval mode:
    how the pipeline, Algorithm 1 and the benchmarks train theirs. ``arguments`` override
    `HeadTrainingArguments`' defaults."""
    quiet = {"eval_strategy": "no", "save_final_model": False, "disable_tqdm": True}
    with tempfile.TemporaryDirectory() as folder, torch.enable_grad():
        HeadTrainer(
            head, HeadTrainingArguments(folder, **{**quiet, **arguments}), features, labels
        ).train()
    return head.eval()


def _stacked(features: dict[str, Tensor], labels: Tensor) -> _Features:
    """Every encoder's rows one after another, each with its row's label."""
    return _Features(
        torch.cat(list(features.values())), labels.repeat(len(features), *([1] * (labels.ndim - 1)))
    )


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

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        """A whole batch by one index per tensor (the DataLoader's batched fetch): the same
        tensors as stacking the rows, without a Python call and a dict per row."""
        return self[indices]


def _collate(batch: dict[str, Tensor] | list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """A batch `_Features.__getitems__` made as it is; rows fetched one by one, stacked."""
    return batch if isinstance(batch, dict) else default_data_collator(batch)


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
