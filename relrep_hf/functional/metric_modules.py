"""The metrics of `relrep_hf.functional.metrics` as :mod:`evaluate` modules that work offline
(nothing is fetched from the Hub)::

    from relrep_hf.functional import metrics
    retrieval = metrics.load("retrieval")
    retrieval.compute(predictions=rel_test, references=rel_train, ks=[1, 5])

Apart from the pure functions, and reached through ``metrics.load`` / ``metrics.Retrieval``
on first use: importing `evaluate` imports transformers' pipelines (seconds), which a program
that only computes a Recall@k should not pay.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import datasets
import evaluate

from relrep_hf.functional.metrics import (
    accuracy,
    normalized_mse,
    retrieval_metrics,
    rr_std,
    weighted_f1,
)
from relrep_hf.utils.citation import CITATION

__all__ = ["RelativeAlignment", "Retrieval", "WeightedF1", "available_metrics", "load"]

_VECTORS = datasets.Features(
    {
        "predictions": datasets.Sequence(datasets.Value("float32")),
        "references": datasets.Sequence(datasets.Value("float32")),
    }
)


class _RelrepMetric(evaluate.Metric):
    """A relrep_hf metric: its `evaluate.MetricInfo` from the class's ``_DESCRIPTION``,
    ``_INPUTS`` and ``_FEATURES``, with the paper's citation."""

    _DESCRIPTION = ""
    _INPUTS = ""
    _FEATURES: ClassVar[datasets.Features | list[datasets.Features]] = _VECTORS

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=self._DESCRIPTION,
            citation=CITATION,
            inputs_description=self._INPUTS,
            features=self._FEATURES,
        )


class Retrieval(_RelrepMetric):
    """Recall@k and MRR of cross-space nearest-neighbour retrieval (cosine, pessimistic ties)."""

    _DESCRIPTION = (
        "Cross-space retrieval between two relative spaces of the same samples: for each "
        "query (row i of the predictions) rank all keys (the references) by cosine "
        "similarity; the correct key is row i. Reports Recall@k (fraction with the correct "
        "key in the top k) and the mean reciprocal rank. Ties count against the query."
    )
    _INPUTS = (
        "\nArgs:\n"
        "    predictions: query relative vectors, one list of m floats per sample.\n"
        "    references: key relative vectors, row i parallel to predictions row i.\n"
        "    ks: ranks at which to report recall (default [1, 5]).\n"
        "    chunk_size: queries scored at once (default 4096).\n"
        'Returns: {"recall@k": float for each k, "mrr": float}\n'
    )

    def _compute(
        self,
        predictions: Sequence[Sequence[float]],
        references: Sequence[Sequence[float]],
        ks: Iterable[int] = (1, 5),
        chunk_size: int = 4096,
    ) -> dict[str, float]:
        return retrieval_metrics(predictions, references, ks, chunk_size=chunk_size)


class RelativeAlignment(_RelrepMetric):
    """Normalised MSE between two relative spaces, and their RR_std."""

    _DESCRIPTION = (
        "Agreement of two relative spaces of the same samples. normalized_mse is the mean "
        "squared difference divided by the mean per-anchor variance of the references "
        "(1 - variance-weighted R^2: 0 is perfect, 1 is no better than the reference "
        "mean). rr_std and reference_rr_std are the per-anchor standard deviations over "
        "samples, averaged over anchors, of the predictions and of the references."
    )
    _INPUTS = (
        "\nArgs:\n"
        "    predictions: relative vectors of the evaluated space, one list of m floats "
        "per sample.\n"
        "    references: relative vectors of the reference space, row i parallel to "
        "predictions row i.\n"
        'Returns: {"normalized_mse": float, "rr_std": float, "reference_rr_std": float}\n'
    )

    def _compute(
        self, predictions: Sequence[Sequence[float]], references: Sequence[Sequence[float]]
    ) -> dict[str, float]:
        return {
            "normalized_mse": normalized_mse(predictions, references),
            "rr_std": rr_std(predictions),
            "reference_rr_std": rr_std(references),
        }


class WeightedF1(_RelrepMetric):
    """Support-weighted F1 and accuracy of class predictions (integer or string labels)."""

    _DESCRIPTION = (
        "Support-weighted mean of per-class F1 (as sklearn's f1_score(average='weighted'), "
        "the score the paper reports for stitched classifiers) and accuracy."
    )
    _INPUTS = (
        "\nArgs:\n"
        "    predictions: predicted labels (ints or strings).\n"
        "    references: true labels, of the same type.\n"
        'Returns: {"weighted_f1": float, "accuracy": float}\n'
    )
    _FEATURES: ClassVar[list[datasets.Features]] = [
        datasets.Features(
            {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
        ),
        datasets.Features(
            {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
        ),
    ]

    def _compute(self, predictions: Sequence[Any], references: Sequence[Any]) -> dict[str, float]:
        return {
            "weighted_f1": weighted_f1(predictions, references),
            "accuracy": accuracy(predictions, references),
        }


_METRICS: dict[str, type[evaluate.Metric]] = {
    "retrieval": Retrieval,
    "relative_alignment": RelativeAlignment,
    "weighted_f1": WeightedF1,
}


def available_metrics() -> list[str]:
    """Names accepted by :func:`load`."""
    return sorted(_METRICS)


def load(name: str, **kwargs: Any) -> evaluate.Metric:
    """A fresh metric instance by name, without touching the Hub.

    ``kwargs`` go to :class:`evaluate.Metric` (e.g. ``keep_in_memory=True``, ``cache_dir``,
    ``num_process``/``process_id``/``experiment_id`` for distributed evaluation).
    """
    try:
        cls = _METRICS[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown metric {name!r}; choose one of {available_metrics()}.") from None
    return cls(**kwargs)
