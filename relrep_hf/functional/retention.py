"""Retention@k: how much of a reference search's top-k a served search keeps (Drift-Adapter's
measure of a migrated or bridged corpus against the corpus re-embedded by the new encoder), and
the cosine top-k neighbours it counts."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from relrep_hf.functional.metrics import ArrayLike, _as_matrix

__all__ = ["retention_at_k", "retention_of_neighbours", "top_k_neighbours"]


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
    hits = (served[:, :, None] == reference[:, None, :]).any(dim=2)  # [n, k]
    return hits.double().mean().item()


def _rows(values: ArrayLike) -> int:
    return int(values.shape[0]) if hasattr(values, "shape") else len(values)
