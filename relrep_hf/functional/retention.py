"""Retention@k: how much of a reference search's top-k a served search keeps (Drift-Adapter's
measure of a migrated or bridged corpus against the corpus re-embedded by the new encoder), and
the cosine top-k neighbours it counts."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from relrep_hf.functional.metrics import ArrayLike, _as_matrix

__all__ = [
    "bootstrap_interval",
    "retention_at_k",
    "retention_of_neighbours",
    "retention_per_query",
    "top_k_neighbours",
    "wilson_interval",
]


def top_k_neighbours(
    queries: ArrayLike, keys: ArrayLike, k: int, *, exclude_own: bool = False
) -> Tensor:
    """``[n_queries, k]`` indices of each query's ``k`` nearest keys by cosine similarity, the
    nearest first; ``exclude_own``: key i is left out for query i (paired rows, where Recall@1
    measures it)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}.")
    q, keys_ = _as_matrix(queries, "queries"), _as_matrix(keys, "keys")
    if q.shape[1] != keys_.shape[1]:
        raise ValueError(
            f"queries are {q.shape[1]}-d but keys are {keys_.shape[1]}-d: search keys of the "
            "queries' space."
        )
    available = keys_.shape[0] - int(exclude_own)
    if k > available or (exclude_own and q.shape[0] != keys_.shape[0]):
        raise ValueError(
            f"Need more than k={k} keys ({keys_.shape[0]} given"
            + (", one row per query: exclude_own pairs query i with key i)" if exclude_own else ")")
            + "; lower k or pass more keys."
        )
    dtype = torch.promote_types(q.dtype, keys_.dtype)
    q, keys_ = F.normalize(q.to(dtype), dim=1), F.normalize(keys_.to(dtype), dim=1)
    out = torch.empty(q.shape[0], k, dtype=torch.long, device=q.device)
    for start in range(0, q.shape[0], 4096):
        sims = q[start : start + 4096] @ keys_.T  # [chunk, n_keys]
        if exclude_own:
            rows = torch.arange(sims.shape[0], device=q.device)
            sims[rows, rows + start] = -torch.inf
        out[start : start + 4096] = sims.topk(k, dim=1).indices
    return out


def retention_at_k(
    queries: ArrayLike,
    keys: ArrayLike,
    reference_queries: ArrayLike,
    reference_keys: ArrayLike,
    k: int = 10,
    *,
    exclude_own: bool = False,
) -> float:
    """The share of the reference search's top-``k`` keys that the served search also returns,
    averaged over queries (Drift-Adapter's retention@k): key j of the served corpus stands for
    key j of the reference one (the same document), e.g. a migrated corpus searched by
    new-encoder queries against the corpus re-embedded by the new encoder. 1.0: the same
    top-``k`` sets (in any order). ``exclude_own``: see `top_k_neighbours`."""
    served = top_k_neighbours(queries, keys, k, exclude_own=exclude_own)
    reference = top_k_neighbours(reference_queries, reference_keys, k, exclude_own=exclude_own)
    if served.shape[0] != reference.shape[0] or _rows(keys) != _rows(reference_keys):
        raise ValueError(
            f"The served search has {served.shape[0]} queries over {_rows(keys)} keys, the "
            f"reference {reference.shape[0]} over {_rows(reference_keys)}: pass the same "
            "queries and documents, in order, in both spaces."
        )
    return retention_of_neighbours(served, reference.to(served.device))


def retention_of_neighbours(served: Tensor, reference: Tensor) -> float:
    """`retention_at_k` from the two ``[n, k]`` neighbour index tensors."""
    return retention_per_query(served, reference).mean().item()


def retention_per_query(served: Tensor, reference: Tensor) -> Tensor:
    """``[n]`` float64: each query's share of its reference top-k kept by the served search
    (from the two ``[n, k]`` neighbour index tensors)."""
    hits = (served[:, :, None] == reference[:, None, :]).any(dim=2)  # [n, k]
    return hits.double().mean(dim=1)


Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: two-sided 95% intervals


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (95% by default): unlike
    p +- z sqrt(p(1-p)/n), it stays inside [0, 1] and is honest at p = 1 and small n
    (3 of 3: [0.44, 1.0])."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"Need 0 <= successes <= n and n >= 1, got {successes} of {n}.")
    p, z2 = successes / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if successes == 0 else max(0.0, float(centre - half))  # exact at the ends:
    high = 1.0 if successes == n else min(1.0, float(centre + half))  # no rounding past p
    return low, high


def bootstrap_interval(
    values: Tensor, *, resamples: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values [n]`` (float64, computed on
    their device; a fixed ``seed``: the same values give the same interval)."""
    values = values.double()
    generator = torch.Generator(device=values.device).manual_seed(seed)
    picks = torch.randint(
        len(values), (resamples, len(values)), generator=generator, device=values.device
    )  # [resamples, n]
    means = values[picks].mean(dim=1)
    tail = (1 - level) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64,
                                                    device=values.device))  # fmt: skip
    return low.item(), high.item()


def _rows(values: ArrayLike) -> int:
    return int(values.shape[0]) if hasattr(values, "shape") else len(values)
