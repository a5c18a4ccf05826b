"""Whitening statistics: streamed, mergeable, float64.

The whitened inner product needs each encoder's mean and covariance. They are
estimated once, from a set of embeddings that is usually far larger than memory,
so the estimator keeps only ``count``, ``mean`` and the scatter matrix
``sum (x - mean)(x - mean)^T`` (O(d^2) memory whatever N is) and merges partial
results with Chan et al.'s parallel formula. Batches, dataset shards and processes
all combine the same way, and the result does not depend on how rows were split.
They live on the device of the rows they were estimated from (`Statistics.to` moves them).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from relrep_hf.utils.defaults import DEFAULT_EPS, DEFAULT_SHRINKAGE, check_similarity_settings
from relrep_hf.utils.validation import (
    EmbeddingsLike,
    as_embeddings,
    check_embeddings,
    check_same_device,
)


@dataclass(frozen=True)
class Statistics:
    """Count, mean and scatter of a set of d-dimensional embeddings, in float64."""

    count: int
    mean: Tensor  # [d] float64
    scatter: Tensor  # [d, d] float64, sum over rows of (x - mean)(x - mean)^T

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    @property
    def device(self) -> torch.device:
        return self.mean.device

    @classmethod
    def empty(cls, dim: int, device: torch.device | str | None = None) -> Statistics:
        """No rows yet (merging takes the other side's device: an empty one has no say)."""
        zeros = torch.zeros(dim, dtype=torch.float64, device=device)
        return cls(0, zeros, torch.zeros(dim, dim, dtype=torch.float64, device=device))

    def to(self, device: torch.device | str) -> Statistics:
        """These statistics on ``device`` (still float64), e.g. saved ones for a GPU's rows."""
        return Statistics(self.count, self.mean.to(device), self.scatter.to(device))

    @classmethod
    def from_embeddings(cls, embeddings: EmbeddingsLike, batch_size: int = 65536) -> Statistics:
        """Statistics of ``embeddings [N, d]`` (tensor, NumPy array or list of rows), streamed
        over row blocks of ``batch_size``, computed (float64) on the embeddings' device."""
        embeddings = as_embeddings(embeddings)
        check_embeddings(embeddings, name="embeddings")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}.")
        return accumulate(embeddings.split(batch_size), dim=embeddings.shape[-1])

    def update(self, batch: EmbeddingsLike) -> Statistics:
        """These statistics with the rows of ``batch [n, d]`` added (on the batch's device;
        statistics with rows already must be on it too)."""
        batch = as_embeddings(batch, name="batch")
        if self.count:
            check_same_device(statistics=self.mean, batch=batch)
        check_embeddings(batch, dim=self.dim, name="batch")
        rows = batch.detach().reshape(-1, self.dim)
        if rows.shape[0] == 0:
            return self
        centered = rows.to(torch.float64, copy=True)  # our own copy, centred in place
        batch_mean = centered.mean(dim=0)
        centered -= batch_mean
        scatter = symmetric_gram(centered)
        merged = self.merge(Statistics(rows.shape[0], batch_mean, scatter))
        if not bool(torch.isfinite(merged.scatter).all()):
            raise ValueError(
                f"The squares of these embeddings overflow float64 (largest |value| "
                f"{float(rows.abs().max()):.3g}): statistics cannot be estimated from them. "
                "Scale the embeddings down (e.g. divide by their largest norm) or drop the rows "
                "with huge values."
            )
        return merged

    def merge(self, other: Statistics) -> Statistics:
        """Chan's parallel combination of two disjoint sets of rows (one device for both,
        unless one side holds no rows)."""
        if other.dim != self.dim:
            raise ValueError(
                f"Cannot merge statistics of dimension {self.dim} with dimension {other.dim}: "
                "they come from different encoders or layers."
            )
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        check_same_device(statistics=self.mean, other_statistics=other.mean)
        count = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / count)
        scatter = (
            self.scatter
            + other.scatter
            + torch.outer(delta, delta) * (self.count * other.count / count)
        )
        return Statistics(count, mean, scatter)

    __add__ = merge

    def mean_squared_norm(self) -> float:
        """The mean of ``||x||^2`` over the rows: ``(tr(scatter) + count ||mean||^2) / count``.

        It is exactly 1 for L2-normalised rows, so a projector can tell from its statistics
        alone whether they came from normalised embeddings.
        """
        if self.count == 0:
            return 0.0
        total = self.scatter.diagonal().sum() + self.count * self.mean.dot(self.mean)
        return float(total / self.count)

    def covariance(self) -> Tensor:
        """Unbiased sample covariance ``scatter / (count - 1)`` (as ``numpy.cov``)."""
        if self.count < 2:
            raise ValueError(
                f"Covariance needs at least 2 embeddings, got {self.count}. "
                "Estimate statistics from more rows (the paper uses the full embedding set)."
            )
        return self.scatter / (self.count - 1)

    def to_dict(self) -> dict[str, Tensor]:
        """Tensors for safetensors (the count as a 0-d int64 tensor)."""
        return {
            "count": torch.tensor(self.count, dtype=torch.int64, device=self.device),
            "mean": self.mean.contiguous(),
            "scatter": self.scatter.contiguous(),
        }

    @classmethod
    def from_dict(cls, tensors: dict[str, Tensor]) -> Statistics:
        return cls(
            int(tensors["count"]),
            tensors["mean"].to(torch.float64),
            tensors["scatter"].to(torch.float64),
        )


def symmetric_gram(rows: Tensor, *, block: int = 384) -> Tensor:
    """``rows^T rows`` ([d, d]) for ``rows [n, d]``, exactly symmetric, at about half the cost
    of the full product.

    On the CPU, NumPy computes ``a.T @ a`` with BLAS ``syrk`` (one triangle, mirrored), which
    torch does not expose; the array shares ``rows``' memory. Elsewhere, one product per block
    of ``block`` columns computes that block's rows of the lower triangle (diagonal block
    included) and the upper triangle is their transpose.
    """
    if rows.device.type == "cpu" and not rows.requires_grad:
        array = rows.numpy()  # no copy
        return torch.from_numpy(array.T @ array)
    return blocked_gram(rows, block=block)


def blocked_gram(rows: Tensor, *, block: int = 384) -> Tensor:
    """``rows^T rows``, exactly symmetric, from the products of the lower triangle's block rows
    (torch only: any device)."""
    d = rows.shape[-1]
    gram = torch.empty(d, d, dtype=rows.dtype, device=rows.device)
    for start in range(0, d, block):
        stop = min(start + block, d)
        # [stop - start, n] @ [n, stop]: the block's rows, up to and including the diagonal
        torch.mm(rows[:, start:stop].T, rows[:, :stop], out=gram[start:stop, :stop])
    lower = gram.tril_()
    return lower + lower.tril(-1).T


def accumulate(batches: Iterable[Tensor], dim: int | None = None) -> Statistics:
    """Statistics of all rows of an iterable of ``[n, d]`` batches, in one pass."""
    stats = None if dim is None else Statistics.empty(dim)
    for batch in batches:
        if stats is None:
            stats = Statistics.empty(batch.shape[-1])
        stats = stats.update(batch)
    if stats is None:
        raise ValueError("No batches were given: statistics need at least 2 embeddings.")
    return stats


def all_reduce(stats: Statistics) -> Statistics:
    """Merge the statistics of every process of a ``torch.distributed`` group.

    Each rank contributes its own rows; every rank gets the statistics of all rows, on the
    device its own were on. A no-op when torch.distributed is not initialised.
    """
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return stats
    world = torch.distributed.get_world_size()
    # Gather on the backend's device (CPU for gloo), in float64.
    device = (
        torch.device("cuda") if torch.distributed.get_backend() == "nccl" else torch.device("cpu")
    )
    packed = torch.cat(
        [
            torch.tensor([float(stats.count)], dtype=torch.float64, device=stats.device),
            stats.mean,
            stats.scatter.flatten(),
        ]
    ).to(device)
    gathered = [torch.empty_like(packed) for _ in range(world)]
    torch.distributed.all_gather(gathered, packed)
    merged = Statistics.empty(stats.dim, stats.device)
    d = stats.dim
    for row in gathered:  # in rank order, so every rank computes the same float64 sums
        row = row.to(stats.device)
        merged = merged.merge(Statistics(int(row[0]), row[1 : d + 1], row[d + 1 :].view(d, d)))
    return merged


def shrunk_covariance(
    covariance: Tensor, *, shrinkage: float = DEFAULT_SHRINKAGE, eps: float = DEFAULT_EPS
) -> Tensor:
    """``(1 - lambda) S + lambda tr(S)/d I + eps I`` (paper, Appendix B), in float64."""
    check_similarity_settings(shrinkage, eps)
    covariance = covariance.to(torch.float64)
    d = covariance.shape[-1]
    isotropic = covariance.diagonal().sum() / d
    identity = torch.eye(d, dtype=torch.float64, device=covariance.device)
    return (1.0 - shrinkage) * covariance + (shrinkage * isotropic + eps) * identity


def check_invertible(eigenvalues: Tensor, *, name: str = "covariance") -> None:
    """Raises when a symmetric matrix of these ``eigenvalues`` is singular (or numerically so)
    and so cannot be inverted, naming the smallest eigenvalue and the way out."""
    largest = eigenvalues.max().clamp_min(0.0)
    smallest = eigenvalues.min()
    # Relative threshold: below it the inverse is dominated by round-off.
    if largest <= 0 or smallest <= largest * eigenvalues.shape[-1] * 1e-15:
        raise ValueError(
            f"The {name} is singular (smallest eigenvalue {smallest.item():.3g}, largest "
            f"{largest.item():.3g}): it cannot be whitened. Use shrinkage > 0 or eps > 0 "
            f"(defaults {DEFAULT_SHRINKAGE} and {DEFAULT_EPS}), or estimate statistics from more "
            "embeddings than dimensions."
        )


def symmetric_power(matrix: Tensor, power: float, *, name: str = "covariance") -> Tensor:
    """``matrix ** power`` for a symmetric positive definite matrix, via float64 eigh.

    Raises when the matrix is singular (or numerically so) for a negative power
    (`check_invertible`).
    """
    matrix = matrix.to(torch.float64)
    eigenvalues, eigenvectors = torch.linalg.eigh((matrix + matrix.T) / 2)
    if power < 0:
        check_invertible(eigenvalues, name=name)
    return (eigenvectors * eigenvalues.clamp_min(0.0).pow(power)) @ eigenvectors.T


def warn_if_thin(stats: Statistics, shrinkage: float, *, stacklevel: int = 3) -> None:
    """Warns when the statistics hold fewer rows than dimensions: the covariance is then of rank
    below d, and the whitening of the missing directions is set by the shrinkage alone."""
    if 2 <= stats.count <= stats.dim:
        warnings.warn(
            f"Whitening statistics estimated from {stats.count} embeddings of dimension "
            f"{stats.dim}: with no more rows than dimensions the covariance is singular and "
            f"the whitening of the unseen directions comes from shrinkage={shrinkage} alone. "
            "Estimate statistics from many more rows than dimensions (the paper uses the "
            "whole embedding set).",
            UserWarning,
            stacklevel=stacklevel,
        )


def whitening_matrix(
    stats: Statistics, *, shrinkage: float = DEFAULT_SHRINKAGE, eps: float = DEFAULT_EPS
) -> Tensor:
    """The symmetric whitening ``L = Sigma_lambda^{-1/2}`` ([d, d], float64); warns when the
    statistics are thin (`warn_if_thin`)."""
    warn_if_thin(stats, shrinkage)
    sigma = shrunk_covariance(stats.covariance(), shrinkage=shrinkage, eps=eps)
    return symmetric_power(sigma, -0.5)


def whiten(embeddings: Tensor, *, mean: Tensor, whitening: Tensor) -> Tensor:
    """``(x - mu) L`` for rows of ``embeddings [..., d]`` (L symmetric)."""
    return (embeddings - mean) @ whitening
