"""Baseline anchor strategies, each returning a row-stochastic mixture ``[m, K]``.

k-means and farthest-point sampling need a geometry: they run in the joint whitened
space of the given encoders (each encoder whitened with its own support statistics,
features concatenated), so no encoder dominates by scale. They run on the embeddings' device
and return the mixture there; their seeds drive CPU generators, so a seed picks the same
points on every device. Random anchors see no embeddings: their mixture is on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from relrep_hf.functional.statistics import Statistics, whiten, whitening_matrix
from relrep_hf.utils.defaults import check_count
from relrep_hf.utils.validation import as_embeddings, check_embeddings, check_same_device


def _check_sizes(support_size: int, num_anchors: int) -> None:
    check_count(num_anchors, "num_anchors")
    if support_size < num_anchors:
        raise ValueError(
            f"The support set has {support_size} inputs, fewer than the {num_anchors} anchors "
            "asked for: use a larger support set or fewer anchors."
        )


def _check_distinct(points: Tensor, num_anchors: int) -> None:
    """Refuse fewer distinct support points than anchors (some anchor would repeat another)."""
    distinct = torch.unique(points, dim=0).shape[0]
    if distinct < num_anchors:
        raise ValueError(
            f"The support set has only {distinct} distinct points (of {points.shape[0]}; the "
            f"rest are duplicates), fewer than the {num_anchors} anchors asked for: every "
            "anchor would not be a different point. Drop the duplicated support inputs, or ask "
            f"for at most {distinct} anchors."
        )


def joint_whitened(support_embeddings: Tensor | Sequence[Tensor]) -> Tensor:
    """Concatenate each encoder's support embeddings, whitened by their own statistics."""
    per_encoder = isinstance(support_embeddings, (list, tuple)) and all(
        isinstance(space, (Tensor, np.ndarray)) and space.ndim == 2 for space in support_embeddings
    )
    spaces = list(support_embeddings) if per_encoder else [support_embeddings]
    if not spaces or (isinstance(spaces[0], (list, tuple)) and not spaces[0]):
        raise ValueError("No support embeddings were given.")
    spaces = [as_embeddings(space, name="support embeddings") for space in spaces]
    check_same_device(**{f"encoder {i}'s support embeddings": x for i, x in enumerate(spaces)})
    for space in spaces:
        check_embeddings(space, name="support embeddings")
        if space.ndim != 2:
            raise ValueError(
                f"support embeddings must be a table [K, d] per encoder, got shape "
                f"{tuple(space.shape)}."
            )
    if len({space.shape[0] for space in spaces}) != 1:
        raise ValueError(
            "Every encoder's support embeddings must have one row per support input; got "
            f"{[space.shape[0] for space in spaces]} rows."
        )
    whitened = []
    for space in spaces:
        stats = Statistics.from_embeddings(space)
        whitened.append(whiten(space.double(), mean=stats.mean, whitening=whitening_matrix(stats)))
    return torch.cat(whitened, dim=1)


def sample_support_rows(num_rows: int, size: int | None, seed: int) -> Tensor:
    """The sorted rows (of ``num_rows`` parallel inputs) that form a support set of ``size``
    points drawn with ``seed``; every row for ``size=None`` or ``size >= num_rows``. Anchor sets
    that share a seed mix the same support inputs and differ only in how they mix them."""
    if size is None or size >= num_rows:
        return torch.arange(num_rows)
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(num_rows, generator=generator)[:size].sort().values


def random_mixture(support_size: int, num_anchors: int, *, seed: int = 0) -> Tensor:
    """One-hot rows on ``num_anchors`` distinct support points drawn at random."""
    _check_sizes(support_size, num_anchors)
    chosen = torch.randperm(support_size, generator=torch.Generator().manual_seed(seed))
    mixture = torch.zeros(num_anchors, support_size)
    mixture[torch.arange(num_anchors), chosen[:num_anchors]] = 1.0
    return mixture


def kmeans_mixture(
    support_embeddings: Tensor | Sequence[Tensor],
    num_anchors: int,
    *,
    seed: int = 0,
    iterations: int = 50,
) -> Tensor:
    """Lloyd's k-means (k-means++ start); row r is uniform over cluster r's members, so the
    anchor is exactly the centroid in every encoder's space."""
    points = joint_whitened(support_embeddings)  # [K, D]
    support_size = points.shape[0]
    _check_sizes(support_size, num_anchors)
    _check_distinct(points, num_anchors)
    generator = torch.Generator().manual_seed(seed)
    centroids = points[torch.randint(support_size, (1,), generator=generator).to(points.device)]
    for _ in range(1, num_anchors):  # k-means++
        distance = torch.cdist(points, centroids).min(dim=1).values.square()
        # drawn on the CPU, where the seeded generator is (the same draw on every device)
        chosen = torch.multinomial((distance / distance.sum()).cpu(), 1, generator=generator)
        centroids = torch.cat([centroids, points[chosen.to(points.device)]])
    for _ in range(iterations):
        assignment = torch.cdist(points, centroids).argmin(dim=1)
        counts = torch.bincount(assignment, minlength=num_anchors)
        sums = torch.zeros_like(centroids).index_add_(0, assignment, points)
        empty = counts == 0
        # An empty cluster restarts on the point farthest from its centroid.
        if bool(empty.any()):
            far = torch.cdist(points, centroids).min(dim=1).values.argsort(descending=True)
            sums[empty], counts[empty] = points[far[: int(empty.sum())]], 1
        new = sums / counts[:, None]
        if torch.equal(new, centroids):
            break
        centroids = new
    assignment = torch.cdist(points, centroids).argmin(dim=1)
    mixture = torch.zeros(num_anchors, support_size, dtype=torch.float64, device=points.device)
    mixture[assignment, torch.arange(support_size, device=points.device)] = 1.0
    counts = mixture.sum(dim=1, keepdim=True)
    if bool((counts == 0).any()):  # keep every row on the simplex: nearest point alone
        nearest = torch.cdist(centroids, points).argmin(dim=1)
        rows = (counts[:, 0] == 0).nonzero().flatten()
        mixture[rows, nearest[rows]] = 1.0
        counts = mixture.sum(dim=1, keepdim=True)
    return (mixture / counts).float()


def farthest_point_mixture(
    support_embeddings: Tensor | Sequence[Tensor], num_anchors: int, *, seed: int = 0
) -> Tensor:
    """Greedy farthest-point sampling from a random first point: one-hot rows."""
    points = joint_whitened(support_embeddings)
    support_size = points.shape[0]
    _check_sizes(support_size, num_anchors)
    _check_distinct(points, num_anchors)
    first = int(torch.randint(support_size, (1,), generator=torch.Generator().manual_seed(seed)))
    chosen = [first]
    distance = (points - points[first]).norm(dim=1)
    for _ in range(1, num_anchors):
        nxt = int(distance.argmax())
        chosen.append(nxt)
        distance = torch.minimum(distance, (points - points[nxt]).norm(dim=1))
    mixture = torch.zeros(num_anchors, support_size, device=points.device)
    rows = torch.arange(num_anchors, device=points.device)
    mixture[rows, torch.tensor(chosen, device=points.device)] = 1.0
    return mixture
