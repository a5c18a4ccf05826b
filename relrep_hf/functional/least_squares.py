"""Affine maps fitted by least squares: the pure math of latent space translation.

`least_squares_operator` solves ``x @ matrix^T ~ r`` for rows x once, as one matrix (what the
inverse of a relative projection is); `AffineMap` is the common type of every affine
translator (an inverse composed with a projection, `fit_procrustes`, `fit_affine`), so they
compose, move devices and are scored alike. Every solve runs in float64.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from relrep_hf.utils.validation import check_embeddings, check_paired_rows, check_same_device

__all__ = [
    "AffineMap",
    "LeastSquaresOperator",
    "fit_affine",
    "fit_procrustes",
    "least_squares_operator",
    "least_squares_operators",
]


class AffineMap(nn.Module):
    """``x -> x @ weight + bias`` with frozen ``weight [d_in, d_out]`` and ``bias [d_out]``.

    The common type of every affine translator here (WIP/inner inverse composed with a
    projection, Procrustes, least squares), so they compose, move devices and score alike.
    """

    def __init__(self, weight: Tensor, bias: Tensor):
        super().__init__()
        if weight.ndim != 2 or bias.shape != (weight.shape[1],):
            raise ValueError(
                f"AffineMap needs weight [d_in, d_out] and bias [d_out], got "
                f"{tuple(weight.shape)} and {tuple(bias.shape)}."
            )
        self.register_buffer("weight", weight.detach())
        self.register_buffer("bias", bias.detach().to(weight.dtype))

    @property
    def in_features(self) -> int:
        return self.weight.shape[0]

    @property
    def out_features(self) -> int:
        return self.weight.shape[1]

    def forward(self, x: Tensor) -> Tensor:
        """``x [..., d_in] -> [..., d_out]``, computed in the map's dtype, on its device (where
        ``x`` must be)."""
        check_same_device(inputs=x, affine_map=self.weight)
        check_embeddings(x, dim=self.in_features, name="inputs of the affine map")
        rows = x.reshape(-1, self.in_features).to(self.weight.dtype)  # (N, d_in)
        out = torch.addmm(self.bias, rows, self.weight)  # (N, d_out)
        return out.reshape(*x.shape[:-1], self.out_features)

    def then(self, other: AffineMap) -> AffineMap:
        """The composite ``other(self(x))`` as one affine map (computed in float64)."""
        if other.in_features != self.out_features:
            raise ValueError(
                f"Cannot compose a map to {self.out_features} dimensions with a map from "
                f"{other.in_features}."
            )
        w1, b1, w2, b2 = (t.double() for t in (self.weight, self.bias, other.weight, other.bias))
        dtype = torch.promote_types(self.weight.dtype, other.weight.dtype)
        return AffineMap((w1 @ w2).to(dtype), (b1 @ w2 + b2).to(dtype))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


class LeastSquaresOperator:
    """``operator [m, d]`` with ``x = r @ operator`` solving ``x @ matrix^T ~ r`` for rows x.

    Also the spectrum that says how well: ``singular_values`` (all min(m, d) of them, in
    descending order), ``rank`` (how many the solve keeps) and ``condition_number`` (largest
    over smallest kept singular value: the most the solve amplifies an error in r).
    """

    __slots__ = ("condition_number", "operator", "rank", "singular_values")

    def __init__(self, operator: Tensor, singular_values: Tensor, rank: int):
        self.operator = operator
        self.singular_values = singular_values
        self.rank = rank
        if rank == 0:
            self.condition_number = math.inf
        else:
            self.condition_number = (singular_values[0] / singular_values[rank - 1]).item()


def least_squares_operator(
    matrix: Tensor, *, ridge: float = 0.0, rtol: float | None = None
) -> LeastSquaresOperator:
    """The regularised least-squares solver for ``x @ matrix^T = r``, as one matrix.

    ``matrix [m, d]`` (one anchor per row). With ``matrix = U S V^T`` (thin SVD, float64) the
    solution of ``min_x ||x matrix^T - r||^2 + ridge ||x||^2`` is
    ``r U diag(s / (s^2 + ridge)) V^T``. Singular values below ``rtol * s_max`` are treated as
    0 (default ``rtol``: ``max(m, d)`` float64 epsilons, as ``numpy.linalg.matrix_rank``):
    with ``ridge=0`` this is the pseudo-inverse, i.e. the exact solution when ``matrix`` has
    full column rank and the minimum-norm one (in the row space of ``matrix``) otherwise.
    """
    return least_squares_operators(matrix, ridges=(ridge,), rtol=rtol)[0]


def least_squares_operators(
    matrix: Tensor, *, ridges: tuple[float, ...], rtol: float | None = None
) -> list[LeastSquaresOperator]:
    """`least_squares_operator` for each ridge of ``ridges``, from one SVD of ``matrix`` (a
    path of ridges costs one decomposition, not one each)."""
    for ridge in ridges:
        if ridge < 0 or not math.isfinite(ridge):
            raise ValueError(
                f"ridge must be a finite number >= 0, got {ridge}: 0 gives the pseudo-inverse, "
                "a positive value regularises the solve."
            )
    matrix = matrix.detach().to(torch.float64)
    m, d = matrix.shape
    if rtol is None:
        rtol = max(m, d) * torch.finfo(torch.float64).eps
    u, s, vh = torch.linalg.svd(matrix, full_matrices=False)  # [m, k], [k], [k, d]; k = min(m, d)
    keep = s > rtol * s[0] if s.numel() else s > 0  # descending, so the kept ones come first
    rank = int(keep.sum())
    operators = []
    for ridge in ridges:
        gains = torch.where(keep, s / (s.square() + ridge).clamp_min(1e-300), 0.0)  # [k]
        operators.append(LeastSquaresOperator((u * gains) @ vh, s, rank))  # [m, d]
    return operators


def _parallel(source: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    check_same_device(source=source, target=target)
    check_paired_rows(
        source,
        target,
        names=("source support embeddings", "target support embeddings"),
        need="parallel support sets [K, d_s] and [K, d_t] (row i the same input)",
    )
    return source.detach().to(torch.float64), target.detach().to(torch.float64)


def fit_procrustes(source: Tensor, target: Tensor) -> AffineMap:
    """Orthogonal Procrustes with centering and scaling, fitted on parallel rows.

    Both sets are centered and scaled to unit Frobenius norm (scales ``s_s``, ``s_t``);
    ``R = U V^T`` from the SVD of ``Xs^T Xt``. Different widths are handled by zero-padding
    both to ``max(d_s, d_t)`` and cropping ``R`` to ``[d_s, d_t]``. The map is
    ``x -> ((x - mu_s) / s_s) R s_t + mu_t``.
    """
    xs, xt = _parallel(source, target)
    mu_s, mu_t = xs.mean(dim=0), xt.mean(dim=0)
    xs, xt = xs - mu_s, xt - mu_t
    s_s, s_t = xs.norm(), xt.norm()
    if s_s == 0 or s_t == 0:
        raise ValueError(
            "The support rows are all identical in one space; Procrustes needs spread."
        )
    xs, xt = xs / s_s, xt / s_t
    width = max(xs.shape[1], xt.shape[1])
    xs_pad = F.pad(xs, (0, width - xs.shape[1]))  # [K, D]
    xt_pad = F.pad(xt, (0, width - xt.shape[1]))  # [K, D]
    u, _, vh = torch.linalg.svd(xs_pad.T @ xt_pad)
    rotation = (u @ vh)[: source.shape[1], : target.shape[1]]  # [d_s, d_t]
    weight = rotation * (s_t / s_s)
    dtype = torch.promote_types(source.dtype, target.dtype)
    return AffineMap(weight.to(dtype), (mu_t - mu_s @ weight).to(dtype))


def fit_affine(source: Tensor, target: Tensor, *, ridge: float = 0.0) -> AffineMap:
    """Affine least squares ``min ||Xs W + b - Xt||^2 + ridge ||W||^2`` in float64.

    The bias is not penalised (both sets are centered first). With ``ridge=0`` the solve is
    an SVD-based lstsq, so rank-deficient supports (K <= d_s) give the minimum-norm W. That
    solver (LAPACK ``gelsd``) is the CPU's; on another device the pseudo-inverse gives the
    same minimum-norm W there. The map lives on the rows' device.
    """
    if ridge < 0 or not math.isfinite(ridge):
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge}.")
    xs, xt = _parallel(source, target)
    mu_s, mu_t = xs.mean(dim=0), xt.mean(dim=0)
    xs, xt = xs - mu_s, xt - mu_t
    if ridge == 0.0 and xs.device.type == "cpu":
        weight = torch.linalg.lstsq(xs, xt, driver="gelsd").solution  # [d_s, d_t]
    elif ridge == 0.0:  # gelsd exists on the CPU only
        weight = pseudo_inverse_solve(xs, xt)  # [d_s, d_t]
    else:
        gram = xs.T @ xs + ridge * torch.eye(xs.shape[1], dtype=torch.float64, device=xs.device)
        weight = torch.linalg.solve(gram, xs.T @ xt)
    dtype = torch.promote_types(source.dtype, target.dtype)
    return AffineMap(weight.to(dtype), (mu_t - mu_s @ weight).to(dtype))


def pseudo_inverse_solve(xs: Tensor, xt: Tensor) -> Tensor:
    """The minimum-norm ``W`` of ``min ||xs W - xt||`` by the pseudo-inverse, on any device:
    `fit_affine`'s solve where LAPACK's ``gelsd`` (CPU only) is missing."""
    return torch.linalg.pinv(xs) @ xt
