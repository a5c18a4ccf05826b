"""Evaluators with sentence-transformers' interface, for a head inside a Trainer's evaluation.

An evaluator is called with the model (``evaluator(model, output_path=None, epoch=-1,
steps=-1)``) and returns ``{metric: value}``; ``primary_metric`` names the one that ranks
checkpoints and ``greater_is_better`` its direction, as sentence-transformers' ``BaseEvaluator``
has them (without importing it: sentence-transformers is an optional extra). `HeadTrainer`
runs one in every evaluation, so ``metric_for_best_model`` and ``load_best_model_at_end`` pick the
head that transfers best:

>>> import torch
>>> from relrep_hf import RelativeHeadConfig, RelativeHeadForClassification
>>> x = torch.randn(40, 6); y = (x[:, 0] > 0).long()
>>> evaluator = RelativeClassificationEvaluator({"enc_b": x}, y, name="zero_shot")
>>> head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=6, num_labels=2))
>>> sorted(evaluator(head))  # doctest: +NORMALIZE_WHITESPACE
['zero_shot_accuracy', 'zero_shot_enc_b_accuracy', 'zero_shot_enc_b_weighted_f1',
 'zero_shot_weighted_f1']
>>> evaluator.primary_metric, evaluator.greater_is_better
('zero_shot_weighted_f1', True)
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path
from statistics import mean
from typing import Any

import torch
from torch import Tensor, nn

from relrep_hf.utils.validation import as_embeddings, check_distinct_names, check_embeddings

__all__ = ["RelativeClassificationEvaluator", "RelrepEvaluator"]


class RelrepEvaluator:
    """sentence-transformers' evaluator interface: ``primary_metric``, ``greater_is_better``,
    ``__call__(model, output_path=None, epoch=-1, steps=-1) -> {metric: value}`` and
    ``prefix_name_to_metrics``."""

    primary_metric: str
    greater_is_better: bool = True

    def __call__(
        self, model: nn.Module, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        raise NotImplementedError

    def prefix_name_to_metrics(self, metrics: Mapping[str, float], name: str) -> dict[str, float]:
        """``{f"{name}_{metric}": value}`` (unchanged for no name), as sentence-transformers."""
        return {f"{name}_{key}" if name else key: float(value) for key, value in metrics.items()}


class RelativeClassificationEvaluator(RelrepEvaluator):
    """A head's accuracy and weighted F1 on the relative features of one or more encoders.

    Through an encoder the head was not trained on, this is its zero-shot score; the mean over
    the encoders is the primary metric (``weighted_f1``, higher is better). The metrics come
    from the `evaluate` module `relrep_hf.functional.metric_modules.WeightedF1`.

    Args:
        features: relative features ``[N, m]``, or ``{encoder: [N, m]}`` of the same rows.
        labels: class indices ``[N]``.
        name: prefix of every metric (``"zero_shot"`` gives ``zero_shot_weighted_f1``).
        batch_size: rows per forward pass.
        write_csv: with an ``output_path``, append each call's metrics to
            ``{name or "classification"}_evaluation_results.csv`` there.
    """

    def __init__(
        self,
        features: Tensor | Mapping[str, Tensor],
        labels: Any,
        *,
        name: str = "",
        batch_size: int = 512,
        write_csv: bool = True,
    ):
        spaces = dict(features) if isinstance(features, Mapping) else {"": features}
        if not spaces:
            raise ValueError("features is an empty mapping: pass {encoder: [N, m]} features.")
        check_distinct_names(spaces, what="encoders of the evaluator's features")
        self.labels = torch.as_tensor(labels).detach().cpu().long().reshape(-1)
        self.features = {}
        for encoder, values in spaces.items():
            shown = f"features[{encoder!r}]" if encoder else "features"
            values = as_embeddings(values, name=shown).detach()
            check_embeddings(values, name=shown, min_rows=1)
            if values.ndim != 2 or len(values) != len(self.labels):
                raise ValueError(
                    f"{shown} has shape {tuple(values.shape)} but there are {len(self.labels)} "
                    "labels: pass [N, m] features with one label per row."
                )
            self.features[str(encoder)] = values
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        self.name, self.batch_size, self.write_csv = name, batch_size, write_csv
        self.greater_is_better = True
        self.primary_metric = f"{name}_weighted_f1" if name else "weighted_f1"

    @torch.no_grad()
    def _predictions(self, model: nn.Module, features: Tensor) -> Tensor:
        """Predicted classes, computed on the model's device in eval mode (restored after)."""
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        try:
            logits = [model(rows.to(device)).logits for rows in features.split(self.batch_size)]
        finally:
            model.train(was_training)
        return torch.cat(logits).argmax(dim=-1).cpu()

    def __call__(
        self, model: nn.Module, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        """``{encoder}_accuracy`` and ``{encoder}_weighted_f1`` of each encoder (with more than
        one), and their means ``accuracy`` and ``weighted_f1``, prefixed by ``name``."""
        from relrep_hf.functional.metric_modules import load

        metric = load("weighted_f1", keep_in_memory=True)
        per_encoder = {
            encoder: metric.compute(
                predictions=self._predictions(model, features).tolist(),
                references=self.labels.tolist(),
            )
            for encoder, features in self.features.items()
        }
        metrics: dict[str, float] = {}
        if len(per_encoder) > 1 or "" not in per_encoder:
            for encoder, scores in per_encoder.items():
                metrics |= {f"{encoder}_{key}": value for key, value in sorted(scores.items())}
        for key in ("accuracy", "weighted_f1"):
            metrics[key] = mean(scores[key] for scores in per_encoder.values())
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        if output_path is not None and self.write_csv:
            self._write_csv(Path(output_path), metrics, epoch, steps)
        return metrics

    def _write_csv(self, folder: Path, metrics: dict[str, float], epoch: int, steps: int) -> None:
        path = folder / f"{self.name or 'classification'}_evaluation_results.csv"
        folder.mkdir(parents=True, exist_ok=True)
        new = not os.path.exists(path)
        with open(path, "a", newline="") as handle:
            writer = csv.writer(handle)
            if new:
                writer.writerow(["epoch", "steps", *metrics])
            writer.writerow([epoch, steps, *metrics.values()])
