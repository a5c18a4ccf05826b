"""Training heads on relative features with `transformers.Trainer`.

Relative features are small (``[N, m]`` floats), so they are trained on as tensors in memory:
extract them once (`RelativeWrapper.encode` or `extract_embeddings` + the projector), then
`HeadTrainer(model, args, train_relative, train_labels).train()`. A swappable head is trained
on several encoders' features of the same labelled rows, ``{encoder: [N, m]}``: their rows are
stacked, and the number of leading features the head reads is chosen first by leave-one-encoder-out
transfer among them (`relrep_hf.training.head_directions`). The head returns a
`SequenceClassifierOutput`, so `Trainer` drives it as it would any sequence classifier; accuracy
and weighted F1 come from ``compute_metrics``. The run is deterministic for a seed.

Trainer's conventions hold: the features and labels may come as a `datasets.Dataset`
(`relrep_hf.training.head_arguments.dataset_columns`), the arguments are `TrainingArguments`
(``report_to``, ``load_best_model_at_end``, ``push_to_hub``, ...), and ``compute_metrics``,
``callbacks`` and an ``evaluator`` (sentence-transformers' interface: its metrics join each
evaluation, so ``metric_for_best_model`` may name them) go to the `transformers.Trainer` that
runs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from accelerate.state import AcceleratorState
from torch import Tensor
from torch.utils.data import Dataset
from transformers import EvalPrediction, Trainer, TrainerCallback, default_data_collator
from transformers.trainer_callback import PrinterCallback

from relrep_hf.functional.metrics import accuracy, weighted_f1
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    write_head_metrics,
)
from relrep_hf.training.head_arguments import (
    DEFAULT_LABEL_COLUMN,
    FeatureColumns,
    HeadTrainingArguments,
    dataset_columns,
    feature_column_map,
    setting_value,
)
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
        train_dataset, eval_dataset: the same as a `datasets.Dataset` (instead of the tensors;
            a Dataset passed as ``train_relative`` or ``eval_relative`` is taken too): one
            column of features per encoder and a column of labels.
        feature_columns: the feature columns: one name (default ``"relative"``), a list (one
            encoder per column, named by it) or ``{encoder: column}``.
        label_column: the label column (default ``"label"``): class indices, a `ClassLabel`,
            class names of the head's ``label2id``, or multi-hot floats.
        compute_metrics: ``EvalPrediction -> {name: value}``, as `transformers.Trainer` takes
            it; its metrics join accuracy and weighted F1 (its own win on a shared name).
        callbacks: `transformers.TrainerCallback` instances (or classes) for the Trainer.
        evaluator: an evaluator with sentence-transformers' interface (``evaluator(model)``
            returns ``{metric: value}``; ``primary_metric``, ``greater_is_better``), such as
            `relrep_hf.evaluation.evaluators.RelativeClassificationEvaluator`: run in every
            evaluation, its metrics logged with the ``eval_`` prefix, so
            ``metric_for_best_model`` may name them.

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
        train_relative: Tensor | np.ndarray | Mapping[str, Any] | Any = None,
        train_labels: Tensor | np.ndarray | list[int] | None = None,
        eval_relative: Tensor | np.ndarray | Mapping[str, Any] | Any = None,
        eval_labels: Tensor | np.ndarray | list[int] | None = None,
        *,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        feature_columns: FeatureColumns = None,
        label_column: str = DEFAULT_LABEL_COLUMN,
        compute_metrics: Callable[[EvalPrediction], dict[str, float]] | None = None,
        callbacks: Sequence[TrainerCallback | type[TrainerCallback]] | None = None,
        evaluator: Callable[..., dict[str, float]] | None = None,
    ):
        if not isinstance(args, HeadTrainingArguments):
            raise ValueError(f"args must be HeadTrainingArguments, got {type(args).__name__}.")
        self.model = model
        self.args = args
        self.compute_metrics, self.evaluator = compute_metrics, evaluator
        self.callbacks = list(callbacks or [])
        self._columns = columns = {"feature_columns": feature_columns, "label_column": label_column}
        train = _split(train_relative, train_labels, train_dataset, "train")
        if train is None:
            raise ValueError("Pass the training features and labels, or a train_dataset.")
        self.train_features, labels = self._encoder_features(*train, "train", **columns)
        self.train_labels = labels
        self.train_dataset = _stacked(self.train_features, labels)
        self.eval_dataset = None
        evaluation = _split(eval_relative, eval_labels, eval_dataset, "eval")
        if evaluation is not None:
            eval_features, eval_ids = self._encoder_features(*evaluation, "eval", **columns)
            self.eval_dataset = _stacked(eval_features, eval_ids)
        self.trainer: Trainer | None = None
        self.eval_metrics: dict[str, float] = {}

    def _encoder_features(
        self,
        relative: Any,
        labels: Any,
        split: str,
        *,
        feature_columns: FeatureColumns = None,
        label_column: str = DEFAULT_LABEL_COLUMN,
    ) -> tuple[dict[str, Tensor], Tensor]:
        """``({encoder: [N, m]}, labels [N])``, checked; one tensor is one unnamed encoder, a
        `datasets.Dataset` its columns (`relrep_hf.training.head_arguments.dataset_columns`)."""
        names: dict[str, str] = {}
        labels_name = f"{split}_labels"
        if labels is None:  # a Dataset (`_split` checked that)
            relative, labels, names = dataset_columns(
                relative, feature_columns=feature_columns, label_column=label_column, split=split
            )
            labels_name = f"{split}_dataset[{label_column!r}]"
            if list(relative) == [""]:
                relative = relative[""]
        elif feature_columns is not None:
            feature_column_map(feature_columns)  # checked, though tensors name no columns
        if not isinstance(relative, Mapping):
            name = names.get("", f"{split}_relative")
            relative, labels = self._as_tensors(relative, labels, split, name, labels_name)
            return {"": relative}, labels
        if not relative:
            raise ValueError(
                f"{split}_relative is an empty mapping: pass {{encoder: [N, m] features}} of one "
                f"or more encoders."
            )
        check_distinct_names(relative, what=f"encoders of {split}_relative")
        features, ids = {}, None
        for name, values in relative.items():
            shown = names.get(name, f"{split}_relative[{name!r}]")
            features[str(name)], ids = self._as_tensors(values, labels, split, shown, labels_name)
        return features, ids

    def _as_tensors(
        self,
        relative: Any,
        labels: Any,
        split: str,
        name: str | None = None,
        labels_name: str | None = None,
    ) -> tuple[Tensor, Tensor]:
        name, labels_name = name or f"{split}_relative", labels_name or f"{split}_labels"
        # held on the CPU: the Trainer moves each batch to its device (class docstring)
        relative = as_embeddings(relative, name=name).detach().to("cpu", torch.float32)
        m = self.model.config.num_anchors
        check_embeddings(
            relative, dim=m, name=name, min_rows=1, dim_hint=" (the head's num_anchors)"
        )
        if relative.ndim != 2:
            raise ValueError(f"{name} must have shape [N, {m}], got {tuple(relative.shape)}.")
        labels = self._label_ids(labels, labels_name)
        if labels.ndim == 2 and labels.shape[1] == 1 and not labels.is_floating_point():
            labels = labels[:, 0]  # a column of class indices
        if labels.ndim != 1 and not labels.is_floating_point():
            raise ValueError(
                f"{labels_name} must be class indices of shape [N] (or [N, 1]), got shape "
                f"{tuple(labels.shape)} of dtype {labels.dtype}. Multi-hot labels are floats "
                "[N, num_labels]."
            )
        if labels.shape[0] != relative.shape[0]:
            raise ValueError(
                f"{labels_name} has {labels.shape[0]} rows but {name} has {relative.shape[0]}: "
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
                f"{labels_name} must be class indices (ints), got dtype {labels.dtype}. Multi-hot "
                f"float labels have shape [N, num_labels]."
            )
        if not labels.is_floating_point():
            labels = labels.long()
            num_labels = self.model.config.num_labels
            if labels.numel() and (labels.min() < 0 or labels.max() >= num_labels):
                raise ValueError(
                    f"{labels_name} must lie in [0, {num_labels}) (the head's num_labels), got "
                    f"values from {int(labels.min())} to {int(labels.max())}."
                )
        return relative, labels

    def _label_ids(self, labels: Any, labels_name: str) -> Tensor:
        """Labels as a tensor; class names (strings) mapped through the head's ``label2id``."""
        if isinstance(labels, np.ndarray) and labels.dtype.kind in "UO":
            labels = labels.tolist()
        elif isinstance(labels, Sequence) and not isinstance(labels, (list, tuple, str)):
            # a dataset's column (``dataset["label"]``): read once as a list, not row by row by
            # torch (2,000 labels: 0.48 s against 0.03), and class names in it are found
            labels = list(labels)
        if isinstance(labels, (list, tuple)) and labels and isinstance(labels[0], str):
            label2id = self.model.config.label2id or {}
            unknown = sorted({label for label in labels if label not in label2id})
            if unknown:
                raise ValueError(
                    f"{labels_name} holds class names {unknown[:5]} that the head does not know "
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
            evaluates = self.eval_dataset is not None
            if not evaluates and (args.load_best_model_at_end or self.evaluator is not None):
                raise ValueError(
                    "load_best_model_at_end and an evaluator need evaluation data: pass "
                    "eval_relative and eval_labels, or an eval_dataset."
                )
            # Trainer writes into output_dir only checkpoints and reports; save_model saves
            writes = setting_value(args.save_strategy) != "no" or bool(args.report_to)
            self.trainer = _EvaluatorTrainer(
                model=self.model,
                args=args.trainer_arguments(
                    output_dir=args.output_dir if writes else _QUIET_DIR,
                    eval_strategy=args.eval_strategy if evaluates else "no",
                    push_to_hub=False,  # the head is pushed by its artifact base (push_to_hub)
                    label_names=["labels"],
                    dataloader_pin_memory=False,
                    remove_unused_columns=False,  # _Features holds the model's inputs only
                ),
                train_dataset=self.train_dataset,
                eval_dataset=self.eval_dataset,
                data_collator=_collate,
                compute_metrics=_with_default_metrics(self.compute_metrics),
                callbacks=self.callbacks or None,
                evaluator=self.evaluator,
            )
            self.trainer.remove_callback(PrinterCallback)  # logs go to the logger, not stdout
        elif not AcceleratorState._shared_state:
            # every TrainingArguments made since (another HeadTrainingArguments) reset
            # accelerate's process-wide state, which this Trainer's Accelerator reads
            self.trainer.create_accelerator_and_postprocess()
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
        when eval data is given. Then save the head (``save_final_model``) and push it
        (``push_to_hub``). The metrics returned (and recorded beside the saved head) are the
        last evaluation's, or with ``load_best_model_at_end`` the best one's."""
        self.choose_directions()
        with self._on_trainer_device() as trainer:
            output = trainer.train()
        self.model.eval()
        evaluations = [entry for entry in self.log_history if "eval_loss" in entry]
        best_step = trainer.state.best_global_step if self.args.load_best_model_at_end else None
        kept = [entry for entry in evaluations if entry.get("step") == best_step]
        metrics = _scores((kept or evaluations)[-1], "eval") if evaluations else {}
        if metrics:
            self.eval_metrics = metrics
        if self.args.save_final_model:
            self.save_model()
        if self.args.push_to_hub:
            self.push_to_hub()
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
        """Loss, accuracy and weighted F1 (and ``compute_metrics``' and the evaluator's metrics)
        on the given features and labels, or `datasets.Dataset` (default: the eval split)."""
        eval_split = relative is None
        if eval_split:
            if self.eval_dataset is None:
                raise ValueError(
                    "No evaluation features: pass relative and labels, or eval_relative to the trainer."
                )
            dataset = self.eval_dataset
        else:
            given = _split(relative, labels, None, prefix)
            dataset = _stacked(*self._encoder_features(*given, prefix, **self._columns))
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

    def push_to_hub(self, commit_message: str = "End of training") -> str | None:
        """Push the head (main process only) through its artifact base: one commit with its
        card and manifest, to ``args.hub_model_id`` (default: the name of ``output_dir``),
        with ``hub_token`` and ``hub_private_repo``. Returns the commit's sha (None on the
        other processes)."""
        trainer = self._trainer()
        trainer.accelerator.wait_for_everyone()
        if not trainer.is_world_process_zero():
            return None
        model = trainer.accelerator.unwrap_model(self.model)
        return model.push_to_hub(
            self.args.hub_model_id or Path(self.args.output_dir).name,
            token=self.args.hub_token,
            private=self.args.hub_private_repo,
            commit_message=commit_message,
        )


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


_QUIET_DIR = os.path.join(tempfile.gettempdir(), "relrep_hf_head_trainer")  # nothing written


def _split(relative: Any, labels: Any, dataset: Any, split: str) -> tuple[Any, Any] | None:
    """``(features, labels)`` of a split given as tensors, or ``(dataset, None)`` for a
    `datasets.Dataset` (given as ``{split}_dataset`` or in place of the features); ``None``
    when the split is not given."""
    if isinstance(relative, (datasets.Dataset, datasets.DatasetDict)):
        if dataset is not None or labels is not None:
            raise ValueError(
                f"{split}_relative is a Dataset: its labels are its label column (label_column=). "
                f"Pass the Dataset alone."
            )
        relative, dataset = None, relative
    if dataset is not None:
        if relative is not None or labels is not None:
            raise ValueError(
                f"Pass {split}_dataset, or {split}_relative and {split}_labels, not both."
            )
        return dataset, None
    if relative is None and labels is None:
        return None
    if relative is None or labels is None:
        raise ValueError(f"Pass both {split}_relative and {split}_labels, or neither.")
    return relative, labels


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


class _EvaluatorTrainer(Trainer):
    """`transformers.Trainer` whose evaluations also run an evaluator with
    sentence-transformers' interface (as `SentenceTransformerTrainer` does): its metrics join
    the loop's, prefixed as they are (``eval_``), so ``metric_for_best_model`` may name them."""

    def __init__(self, *args: Any, evaluator: Callable[..., Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.evaluator = evaluator

    def evaluation_loop(self, *args: Any, **kwargs: Any) -> Any:
        output = super().evaluation_loop(*args, **kwargs)
        description = kwargs.get("description", args[1] if len(args) > 1 else "")
        if self.evaluator is None or description == "Prediction":  # predict: logits only
            return output
        prefix = kwargs.get("metric_key_prefix", args[4] if len(args) > 4 else "eval")
        scores = self.evaluator(
            self.accelerator.unwrap_model(self.model),
            epoch=-1 if self.state.epoch is None else self.state.epoch,
            steps=self.state.global_step,
        )
        if not isinstance(scores, Mapping):  # an evaluator may return its primary score alone
            scores = {getattr(self.evaluator, "primary_metric", None) or "evaluator": scores}
        for key, value in scores.items():
            name = key if key.startswith(f"{prefix}_") else f"{prefix}_{key}"
            output.metrics[name] = float(value)
        return output


def _with_default_metrics(
    compute_metrics: Callable[[EvalPrediction], dict[str, float]] | None,
) -> Callable[[EvalPrediction], dict[str, float]]:
    """Accuracy and weighted F1, then the user's ``compute_metrics`` (whose names win)."""
    if compute_metrics is None:
        return _compute_metrics
    return lambda prediction: {**_compute_metrics(prediction), **compute_metrics(prediction)}


def _compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy and weighted F1 of class predictions (none for multi-hot or regression labels)."""
    labels = np.asarray(prediction.label_ids)
    if np.issubdtype(labels.dtype, np.floating):
        return {}
    predicted = np.asarray(prediction.predictions).argmax(axis=-1)
    return {"accuracy": accuracy(predicted, labels), "weighted_f1": weighted_f1(predicted, labels)}


_TIMINGS = ("_runtime", "_per_second", "_preparation_time")


def _scores(logged: dict[str, float], prefix: str) -> dict[str, float]:
    """The metrics of an evaluation (loss, accuracy, weighted F1, ``compute_metrics``' and the
    evaluator's), without `Trainer`'s timings."""
    return {
        name: float(value)
        for name, value in logged.items()
        if name.startswith(f"{prefix}_") and not name.endswith(_TIMINGS)
    }
