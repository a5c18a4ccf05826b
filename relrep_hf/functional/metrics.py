"""Evaluation metrics for relative spaces (paper, section 7) and stitched classifiers.

Pure functions first -- retrieval ranks, Recall@k and MRR between two relative spaces,
normalised MSE and RR_std, weighted F1 and accuracy -- then :mod:`evaluate` modules over
them that work offline (nothing is fetched from the Hub; defined in
`relrep_hf.functional.metric_modules`, imported on first use)::

    from relrep_hf.functional import metrics
    retrieval = metrics.load("retrieval")
    retrieval.compute(predictions=rel_test, references=rel_train, ks=[1, 5])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from relrep_hf.utils.lazy_imports import lazy_attributes
from relrep_hf.utils.validation import check_same_device

_EVALUATE_MODULE_NAMES = (
    "RelativeAlignment",
    "Retrieval",
    "WeightedF1",
    "available_metrics",
    "load",
)
__all__ = [
    *_EVALUATE_MODULE_NAMES,
    "accuracy",
    "mean_reciprocal_rank",
    "normalized_mse",
    "recall_at_k",
    "retrieval_metrics",
    "retrieval_ranks",
    "rr_std",
    "weighted_f1",
]

ArrayLike = Tensor | np.ndarray | Sequence[Any]


# ------------------------------------------------------------------------- conversion


def _as_matrix(values: ArrayLike, name: str) -> Tensor:
    """``values`` as a finite 2-D floating tensor (float32 at least, keeping float64)."""
    if isinstance(values, Tensor):
        t = values.detach()
    else:
        try:
            arr = np.asarray(values)
            t = torch.as_tensor(arr if arr.flags.writeable else arr.copy())
        except (ValueError, TypeError) as err:
            raise ValueError(
                f"{name} must be a rectangular [n, m] array of numbers (every row the same "
                f"length): {err}"
            ) from None
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D [n, m], got shape {tuple(t.shape)}.")
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)}); pass at least one row.")
    if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64, torch.bool)):
        raise ValueError(f"{name} must hold numbers, got dtype {t.dtype}.")
    t = t.to(torch.promote_types(t.dtype, torch.float32))
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or infinite values; clean them before scoring.")
    return t


def _as_pair(a: ArrayLike, b: ArrayLike, name_a: str, name_b: str) -> tuple[Tensor, Tensor]:
    """Both as tensors on one device: two tensors must share theirs; an array joins the
    tensor's."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        check_same_device(**{name_a: a, name_b: b})
    ta, tb = _as_matrix(a, name_a), _as_matrix(b, name_b)
    if ta.shape != tb.shape:
        raise ValueError(
            f"{name_a} has shape {tuple(ta.shape)} but {name_b} has shape {tuple(tb.shape)}; "
            "row i of both must describe the same sample with the same anchors."
        )
    dtype = torch.promote_types(ta.dtype, tb.dtype)
    device = a.device if isinstance(a, Tensor) else tb.device
    return ta.to(device=device, dtype=dtype), tb.to(device=device, dtype=dtype)


def _as_ranks(ranks: ArrayLike) -> Tensor:
    t = torch.as_tensor(ranks.detach() if isinstance(ranks, Tensor) else np.asarray(ranks))
    if t.ndim != 1 or t.numel() == 0:
        raise ValueError(f"ranks must be a non-empty 1-D sequence, got shape {tuple(t.shape)}.")
    if (t < 1).any():
        raise ValueError("ranks are 1-based and must all be >= 1.")
    return t


def _as_labels(values: ArrayLike, name: str) -> np.ndarray:
    arr = values.detach().cpu().numpy() if isinstance(values, Tensor) else np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of labels, got shape {arr.shape}.")
    return arr


def _as_label_pair(predictions: ArrayLike, references: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    pred, ref = _as_labels(predictions, "predictions"), _as_labels(references, "references")
    if pred.shape != ref.shape:
        raise ValueError(
            f"Got {len(pred)} predictions but {len(ref)} references; pass one prediction per "
            "reference."
        )
    if len(ref) == 0:
        raise ValueError("predictions and references are empty; pass at least one example.")
    return pred, ref


# -------------------------------------------------------------------------- retrieval


def retrieval_ranks(queries: ArrayLike, keys: ArrayLike, *, chunk_size: int = 4096) -> Tensor:
    """1-based rank of key i among all keys for query i, by cosine similarity.

    Ties are counted pessimistically: ``rank_i = 1 + #{j != i : cos(q_i, k_j) >= cos(q_i, k_i)}``,
    so a duplicated key never helps. Queries are scored ``chunk_size`` at a time (memory
    O(chunk_size * n)). All-zero vectors have cosine 0 with everything.
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}.")
    q, k = _as_pair(queries, keys, "queries", "keys")
    q, k = F.normalize(q, dim=1), F.normalize(k, dim=1)
    n = q.shape[0]
    ranks = torch.empty(n, dtype=torch.long, device=q.device)
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        sims = q[start:stop] @ k.T
        rows = torch.arange(stop - start, device=q.device)
        true = sims[rows, rows + start]
        # The true key is one of the ">=" hits, so the count already is 1 + (other ties).
        ranks[start:stop] = (sims >= true[:, None]).sum(dim=1)
    return ranks


def recall_at_k(ranks: ArrayLike, k: int) -> float:
    """Fraction of queries whose true key ranks in the top ``k``."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}.")
    t = _as_ranks(ranks)
    return (t <= k).double().mean().item()


def mean_reciprocal_rank(ranks: ArrayLike) -> float:
    """Mean of ``1 / rank`` over queries (1 when every true key ranks first)."""
    return (1.0 / _as_ranks(ranks).double()).mean().item()


def retrieval_metrics(
    queries: ArrayLike, keys: ArrayLike, ks: Iterable[int] = (1, 5), *, chunk_size: int = 4096
) -> dict[str, float]:
    """``{"recall@k": ... for k in ks, "mrr": ...}`` for cross-space retrieval of row i by row i."""
    ks = list(ks)
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"ks must hold positive ints, got {k!r}.")
    ranks = retrieval_ranks(queries, keys, chunk_size=chunk_size)
    out = {f"recall@{int(k)}": recall_at_k(ranks, k) for k in ks}
    out["mrr"] = mean_reciprocal_rank(ranks)
    return out


# -------------------------------------------------------------------------- alignment


def normalized_mse(relative_a: ArrayLike, relative_b: ArrayLike) -> float:
    """MSE between two relative spaces over the variance of the reference space ``relative_b``.

    ``mean_{i,r} (a_ir - b_ir)^2 / mean_r Var_i(b_ir)`` (population variance over samples,
    per anchor feature, then averaged over features), which is ``1 - R^2`` with
    variance-weighted outputs: 0 is perfect agreement, 1 is no better than predicting the
    reference's per-anchor mean, and the score does not change if both spaces are scaled
    by the same factor (so cosine and WIP spaces compare).
    """
    a, b = _as_pair(relative_a, relative_b, "relative_a", "relative_b")
    a, b = a.double(), b.double()
    variance = b.var(dim=0, correction=0).mean()
    if variance.item() == 0.0:
        raise ValueError(
            "relative_b (the reference) is constant across samples, so its variance is 0 and "
            "the normalised MSE is undefined; pass at least two different reference rows."
        )
    return ((a - b).pow(2).mean() / variance).item()


def rr_std(relative: ArrayLike) -> float:
    """Spread of relative features: the per-feature standard deviation over samples,
    averaged over the m anchor features (population std, ``mean_r Std_i(x_ir)``).

    A coordinate that barely varies across inputs carries no information, whatever its
    offset; per-feature std measures exactly that, and does not reward constant
    anchor-to-anchor offsets as the std of all entries would.
    """
    t = _as_matrix(relative, "relative").double()
    return t.std(dim=0, correction=0).mean().item()


# ---------------------------------------------------------------------- classification


def accuracy(predictions: ArrayLike, references: ArrayLike) -> float:
    """Fraction of predictions equal to their reference label."""
    pred, ref = _as_label_pair(predictions, references)
    return float(np.mean(pred == ref))


def weighted_f1(predictions: ArrayLike, references: ArrayLike) -> float:
    """Support-weighted mean of per-class F1 (sklearn's ``f1_score(average="weighted")``).

    Classes are the labels seen in either input; a class never predicted has F1 0, a
    class absent from the references has weight 0.
    """
    pred, ref = _as_label_pair(predictions, references)
    classes, inverse = np.unique(np.concatenate([ref, pred]), return_inverse=True)
    ref_idx, pred_idx = inverse[: len(ref)], inverse[len(ref) :]
    c = len(classes)
    support = np.bincount(ref_idx, minlength=c).astype(np.float64)
    predicted = np.bincount(pred_idx, minlength=c).astype(np.float64)
    true_pos = np.bincount(ref_idx[ref_idx == pred_idx], minlength=c).astype(np.float64)
    # F1 = 2 tp / (2 tp + fp + fn) = 2 tp / (#predicted + #support); every class here has
    # #predicted + #support >= 1, so the division is safe.
    f1 = 2.0 * true_pos / (predicted + support)
    return float(np.dot(f1, support) / support.sum())


# the evaluate modules over these functions (relrep_hf.functional.metric_modules), imported on
# first use: `evaluate` imports transformers' pipelines, seconds that every program computing a
# Recall@k (a migration, a training run) would otherwise pay at import
_LAZY = {name: "relrep_hf.functional.metric_modules" for name in _EVALUATE_MODULE_NAMES}
__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
