"""PARAM training losses (paper, Appendix A), as pure functions over tensors.

Single-space terms act on the whitened embeddings ``x_w = L (x - mu)`` and whitened
anchors ``a_w = L (a - mu)`` of one encoder:

* :func:`coverage_loss` -- soft k-means distortion, pulls anchors onto the data;
* :func:`orthogonality_loss` -- mean squared cosine between distinct anchors;
* :func:`length_loss` -- keeps whitened anchors near unit norm.

The multi-space term, :func:`info_nce_loss` / :func:`multi_space_info_nce`, aligns
the relative representations of parallel samples across encoders. :func:`param_loss`
combines all of them with the weights of Table 5 (:class:`LossWeights`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor

from relrep_hf.functional.fused_losses import (
    AnchorRegularisers,
    MultiSpaceInfoNCE,
    SoftDistortion,
    distortion_pass,
    info_nce_pass,
    regulariser_pass,
)
from relrep_hf.utils.defaults import (
    DEFAULT_COVERAGE_CHUNK_SIZE,
    DEFAULT_COVERAGE_TEMPERATURE,
    DEFAULT_COVERAGE_WEIGHT,
    DEFAULT_INFO_NCE_TEMPERATURE,
    DEFAULT_INFO_NCE_WEIGHT,
    DEFAULT_LENGTH_WEIGHT,
    DEFAULT_ORTHOGONALITY_WEIGHT,
)

__all__ = [
    "LossWeights",
    "coverage_loss",
    "info_nce_loss",
    "length_loss",
    "multi_space_info_nce",
    "orthogonality_loss",
    "param_loss",
]

# --------------------------------------------------------------------------- validation


def _check_matrix(t: Tensor, name: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
    if t.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D tensor [rows, features], got shape {tuple(t.shape)}; "
            "reshape or stack your inputs first."
        )
    if not t.is_floating_point():
        raise ValueError(f"{name} must be floating point, got {t.dtype}; cast it with .float().")


def _check_positive(value: float, name: str) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")


def _check_same_device(a: Tensor, b: Tensor, name_a: str, name_b: str) -> None:
    if a.device != b.device:
        raise ValueError(
            f"{name_a} is on {a.device} but {name_b} is on {b.device}; move both to one device."
        )


def _check_chunk_size(value: int, name: str) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")


def _loss_dtype(*tensors: Tensor) -> torch.dtype:
    """At least float32: half precision cannot hold the distance expansion's cancellation
    or the log-sum-exp of the contrastive logits."""
    dtype = torch.float32
    for t in tensors:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


# ----------------------------------------------------------------------------- coverage


def _soft_distortion(
    x: Tensor, anchors: Tensor, cross: Tensor, temperature: float, chunk_size: int
) -> Tensor:
    """``mean_i sum_r q_ir ||x_i - a_r||^2`` given ``cross = x @ anchors.T``, which
    `param_loss` shares with the relative features."""
    # one pass over the rows, no [n, d] square
    x_sq = torch.linalg.vector_norm(x, dim=1).square()
    a_sq = torch.linalg.vector_norm(anchors, dim=1).square()
    if torch.is_grad_enabled() and any(t.requires_grad for t in (cross, x_sq, a_sq)):
        return SoftDistortion.apply(cross, x_sq, a_sq, float(temperature), chunk_size)
    return distortion_pass(cross, x_sq, a_sq, float(temperature), chunk_size, need_grad=False)[0]


def coverage_loss(
    whitened_x: Tensor,
    whitened_anchors: Tensor,
    *,
    temperature: float = DEFAULT_COVERAGE_TEMPERATURE,
    chunk_size: int = DEFAULT_COVERAGE_CHUNK_SIZE,
) -> Tensor:
    """Soft k-means distortion of ``whitened_x [n, d]`` around ``whitened_anchors [m, d]``.

    ``mean_x sum_r q_r(x) ||x_w - a_w,r||^2 / d`` with ``q(x) = softmax(-||x_w - a_w||^2 / tau)``
    (Appendix A). The soft assignments are computed ``chunk_size`` rows at a time, so beyond
    the [n, m] cross products nothing of size n x m is held; gradients reach both inputs
    (first order only: no double backward).
    """
    _check_matrix(whitened_x, "whitened_x")
    _check_matrix(whitened_anchors, "whitened_anchors")
    _check_same_device(whitened_x, whitened_anchors, "whitened_x", "whitened_anchors")
    _check_positive(temperature, "temperature")
    _check_chunk_size(chunk_size, "chunk_size")
    n, d = whitened_x.shape
    m, d_anchor = whitened_anchors.shape
    if d != d_anchor:
        raise ValueError(
            f"whitened_x has dimension {d} but whitened_anchors has dimension {d_anchor}; "
            "both must come from the same (whitened) embedding space."
        )
    if n == 0 or m == 0 or d == 0:
        raise ValueError(
            f"coverage_loss needs at least one row, one anchor and one dimension, got "
            f"whitened_x {tuple(whitened_x.shape)} and whitened_anchors {tuple(whitened_anchors.shape)}."
        )
    dtype = _loss_dtype(whitened_x, whitened_anchors)
    with torch.autocast(device_type=whitened_x.device.type, enabled=False):
        x, anchors = whitened_x.to(dtype), whitened_anchors.to(dtype)
        return _soft_distortion(x, anchors, x @ anchors.T, temperature, chunk_size) / d


# ------------------------------------------------------------------- anchor regularisers


def orthogonality_loss(whitened_anchors: Tensor) -> Tensor:
    """Mean squared cosine between distinct whitened anchors: ``(||G||_F^2 - m) / (m (m - 1))``.

    0 when the anchors are mutually orthogonal, 1 when they all point the same way.
    """
    _check_matrix(whitened_anchors, "whitened_anchors")
    m, d = whitened_anchors.shape
    if m < 2:
        raise ValueError(
            f"orthogonality_loss needs at least 2 anchors (it averages over anchor pairs), got {m}."
        )
    unit = F.normalize(whitened_anchors, dim=1)
    # ||U U^T||_F = ||U^T U||_F: use the smaller Gram matrix. Subtracting the diagonal
    # sum_r ||u_r||^4 (= m for unit rows) instead of m keeps zero anchors out of the sum.
    gram = unit.T @ unit if d < m else unit @ unit.T
    diagonal = unit.pow(2).sum(dim=1).pow(2).sum()
    return (gram.pow(2).sum() - diagonal) / (m * (m - 1))


def _regularisers(whitened_anchors: Tensor) -> tuple[Tensor, Tensor]:
    """`orthogonality_loss` and `length_loss` in one pass, for `param_loss`."""
    dtype = _loss_dtype(whitened_anchors)
    with torch.autocast(device_type=whitened_anchors.device.type, enabled=False):
        anchors = whitened_anchors.to(dtype)
        if torch.is_grad_enabled() and anchors.requires_grad:
            return AnchorRegularisers.apply(anchors)
        return regulariser_pass(anchors)[:2]


def length_loss(whitened_anchors: Tensor) -> Tensor:
    """Mean squared deviation of the whitened anchor norms from 1: ``mean_r (||a_w,r|| - 1)^2``."""
    _check_matrix(whitened_anchors, "whitened_anchors")
    if whitened_anchors.shape[0] == 0:
        raise ValueError("length_loss needs at least one anchor, got 0.")
    return (torch.linalg.vector_norm(whitened_anchors, dim=1) - 1.0).pow(2).mean()


# ---------------------------------------------------------------------------- InfoNCE


def _check_relatives(relatives: Sequence[Tensor]) -> None:
    for i, r in enumerate(relatives):
        _check_matrix(r, f"relatives[{i}]")
        if r.shape != relatives[0].shape:
            raise ValueError(
                f"relatives[{i}] has shape {tuple(r.shape)} but relatives[0] has shape "
                f"{tuple(relatives[0].shape)}; InfoNCE needs the same B parallel samples "
                "described by the same m anchors in every space."
            )
        _check_same_device(r, relatives[0], f"relatives[{i}]", "relatives[0]")
    if relatives[0].shape[0] == 0:
        raise ValueError("InfoNCE needs at least one sample per batch, got an empty batch.")


def info_nce_loss(
    relative_a: Tensor, relative_b: Tensor, *, temperature: float = DEFAULT_INFO_NCE_TEMPERATURE
) -> Tensor:
    """Symmetric InfoNCE between parallel relative batches ``[B, m]`` of two spaces.

    Cosine logits ``r_a_hat r_b_hat^T / tau``; the positive for row i is row i of the other
    space; ``0.5 * (CE(a -> b) + CE(b -> a))``.
    """
    return multi_space_info_nce([relative_a, relative_b], temperature=temperature)


def multi_space_info_nce(
    relatives: Sequence[Tensor], *, temperature: float = DEFAULT_INFO_NCE_TEMPERATURE
) -> Tensor:
    """:func:`info_nce_loss` averaged over all unordered pairs ``i < j`` of 2+ spaces."""
    _check_positive(temperature, "temperature")
    relatives = list(relatives)
    if len(relatives) < 2:
        raise ValueError(
            f"multi_space_info_nce needs relative features from at least 2 spaces, got "
            f"{len(relatives)}; with one encoder, train on the single-space losses only."
        )
    _check_relatives(relatives)
    dtype = _loss_dtype(*relatives)
    with torch.autocast(device_type=relatives[0].device.type, enabled=False):
        relatives = [r.to(dtype) for r in relatives]
        if torch.is_grad_enabled() and any(r.requires_grad for r in relatives):
            return MultiSpaceInfoNCE.apply(float(temperature), *relatives)
        return info_nce_pass(relatives, float(temperature), need_grad=False)[0]


# ---------------------------------------------------------------------------- combined


@dataclass(frozen=True)
class LossWeights:
    """Weights and temperatures of the PARAM objective; defaults from the paper's Table 5."""

    info_nce: float = DEFAULT_INFO_NCE_WEIGHT
    coverage: float = DEFAULT_COVERAGE_WEIGHT
    orthogonality: float = DEFAULT_ORTHOGONALITY_WEIGHT
    length: float = DEFAULT_LENGTH_WEIGHT
    info_nce_temperature: float = DEFAULT_INFO_NCE_TEMPERATURE
    coverage_temperature: float = DEFAULT_COVERAGE_TEMPERATURE

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("temperature"):
                _check_positive(value, f"LossWeights.{f.name}")
            elif not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"LossWeights.{f.name} must be a finite number >= 0 (0 switches the term "
                    f"off), got {value!r}."
                )


def _check_parallel_encoders(batches: list[Tensor], anchors: list[Tensor]) -> None:
    """One ``[B, d_i]`` batch and one ``[m, d_i]`` anchor matrix per encoder, on one device:
    the same B samples and the same m >= 2 anchors for every encoder."""
    for i, (x, a) in enumerate(zip(batches, anchors, strict=True)):
        _check_matrix(x, f"whitened_batches[{i}]")
        _check_matrix(a, f"whitened_anchors[{i}]")
        _check_same_device(x, batches[0], f"whitened_batches[{i}]", "whitened_batches[0]")
        _check_same_device(a, batches[0], f"whitened_anchors[{i}]", "whitened_batches[0]")
        if x.shape[1] != a.shape[1]:
            raise ValueError(
                f"Encoder {i}: batch dimension {x.shape[1]} != anchor dimension {a.shape[1]}; "
                "batch and anchors of one encoder must live in the same space."
            )
        if x.shape[0] != batches[0].shape[0]:
            raise ValueError(
                f"Encoder {i} has batch size {x.shape[0]} but encoder 0 has {batches[0].shape[0]}; "
                "the batches must hold the same parallel samples for every encoder."
            )
        if a.shape[0] != anchors[0].shape[0]:
            raise ValueError(
                f"Encoder {i} has {a.shape[0]} anchors but encoder 0 has {anchors[0].shape[0]}; "
                "every encoder needs the same anchors (the same mixture matrix P)."
            )
    if anchors[0].shape[0] < 2:
        raise ValueError(
            f"param_loss needs at least 2 anchors, got {anchors[0].shape[0]}; increase m."
        )


def param_loss(
    whitened_batches: Sequence[Tensor],
    whitened_anchors: Sequence[Tensor],
    weights: LossWeights | None = None,
    *,
    coverage_chunk_size: int = DEFAULT_COVERAGE_CHUNK_SIZE,
    gather: Callable[[Tensor], Tensor] | None = None,
) -> dict[str, Tensor]:
    """The PARAM objective (Eq. 3) for parallel batches of one or more encoders.

    ``whitened_batches[i]`` is ``[B, d_i]`` and ``whitened_anchors[i]`` is ``[m, d_i]`` for
    encoder i (the same B samples and m anchors everywhere, d_i may differ). Returns
    ``"coverage"``, ``"orthogonality"`` and ``"length"`` (each averaged over encoders),
    ``"info_nce"`` only when there are 2+ encoders (computed on the WIP relative features
    ``x_w @ a_w^T``; with one encoder the key is absent, as in the paper), and ``"loss"``,
    the weighted sum of the terms present. ``gather`` (differentiable) collects each
    encoder's relative features from every process before InfoNCE, so its negatives are
    the whole global batch, as in a single process.
    """
    weights = LossWeights() if weights is None else weights
    if not isinstance(weights, LossWeights):
        raise TypeError(f"weights must be a LossWeights, got {type(weights).__name__}.")
    batches, anchors = list(whitened_batches), list(whitened_anchors)
    if not batches:
        raise ValueError("param_loss needs at least one encoder, got no batches.")
    if len(batches) != len(anchors):
        raise ValueError(
            f"Got {len(batches)} whitened batches but {len(anchors)} anchor sets; pass one "
            "anchor set per encoder, in the same order."
        )
    _check_parallel_encoders(batches, anchors)
    _check_chunk_size(coverage_chunk_size, "coverage_chunk_size")

    def mean(values: list[Tensor]) -> Tensor:
        return torch.stack(values).mean() if len(values) > 1 else values[0]

    coverage, relatives = [], []
    for x, a in zip(batches, anchors, strict=True):
        dtype = _loss_dtype(x, a)
        with torch.autocast(device_type=x.device.type, enabled=False):
            x, a = x.to(dtype), a.to(dtype)
            cross = x @ a.T  # the WIP relative features and the coverage's cross term: one GEMM
            coverage.append(
                _soft_distortion(x, a, cross, weights.coverage_temperature, coverage_chunk_size)
                / x.shape[1]
            )
        relatives.append(cross if gather is None else gather(cross))
    regularisers = [_regularisers(a) for a in anchors]  # (orthogonality, length) per encoder
    terms = {
        "coverage": mean(coverage),
        "orthogonality": mean([o for o, _ in regularisers]),
        "length": mean([length for _, length in regularisers]),
    }
    total = (
        weights.coverage * terms["coverage"]
        + weights.orthogonality * terms["orthogonality"]
        + weights.length * terms["length"]
    )
    if len(batches) >= 2:
        terms["info_nce"] = multi_space_info_nce(
            relatives, temperature=weights.info_nce_temperature
        )
        total = total + weights.info_nce * terms["info_nce"]
    terms["loss"] = total
    return terms
