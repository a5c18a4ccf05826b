"""The way back: inverse relative projection and latent space translation.

A relative projector maps an encoder's embedding ``x [d]`` to its similarities with ``m``
anchors. For the affine similarities the map is linear in whitened coordinates::

    wip:    r = x_w @ A_w^T,   x_w = (x - mu) L,  A_w = (A - mu) L,  L = Sigma_lambda^{-1/2}
    inner:  r = x @ A^T

so ``x`` comes back from ``r`` by one (regularised) least-squares solve, done once for the
anchors and kept as an operator ``P [m, d]``: ``x_w = r P``, then ``x = x_w L^{-1} + mu``.
The solve is exact when ``m >= d`` and the anchors span the space; otherwise it returns the
minimum-norm solution (in whitened coordinates: the one closest to the mean, in Mahalanobis
distance) and warns. ``cosine`` features only carry directions: the inverse solves for the
unit direction and restores a norm taken from the target space (Maiorca et al., 2024,
"Latent Space Translation via Inverse Relative Projection", which assumes scale-invariant
decoders). Distances are not invertible this way.

Translation between two encoders that share one anchor set (row r of both projectors'
anchors is the same input) is projection with the source, inversion with the target:
``translate(x) = invert(target, source(x))``. For wip/inner this composite is itself an
affine map, as are the two baselines fitted on a parallel support set (orthogonal
Procrustes with scaling, affine least squares); all are :class:`AffineMap` s, and
:func:`evaluate_translation` scores any of them the same way.

Read top to bottom: the affine map type, the least-squares operator (pure math), the
inverse, translation, baselines, evaluation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from relrep_hf.metrics import accuracy, normalized_mse, retrieval_metrics
from relrep_hf.modeling_relative_projector import RelativeProjector
from relrep_hf.statistics import Statistics, symmetric_power
from relrep_hf.validation import check_embeddings

__all__ = [
    "INVERTIBLE_SIMILARITIES",
    "AffineMap",
    "IllConditionedInversionWarning",
    "InversionWarning",
    "LatentTranslator",
    "LeastSquaresOperator",
    "RelativeInverse",
    "UnderdeterminedInversionWarning",
    "check_same_anchor_set",
    "evaluate_translation",
    "fit_affine",
    "fit_procrustes",
    "invert",
    "least_squares_operator",
    "relative_inverse",
    "translate",
    "translation_map",
]

INVERTIBLE_SIMILARITIES = ("wip", "inner", "cosine")

# Above this condition number of the (whitened) anchors, a float32 round trip keeps fewer than
# 3 of its ~7 significant digits: the inverse amplifies errors in r by up to this factor.
DEFAULT_MAX_CONDITION = 1e4


class InversionWarning(UserWarning):
    """The relative features do not determine the absolute embedding well."""


class UnderdeterminedInversionWarning(InversionWarning):
    """Fewer independent anchors than dimensions: the inverse is the minimum-norm solution."""


class IllConditionedInversionWarning(InversionWarning):
    """The anchors are nearly linearly dependent: the inverse amplifies errors in r."""


# ------------------------------------------------------------------------- affine maps


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
        """``x [..., d_in] -> [..., d_out]``, computed in the map's dtype."""
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


# ---------------------------------------------------------- least squares (pure math)


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
    if ridge < 0 or not math.isfinite(ridge):
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge}.")
    matrix = matrix.detach().to(torch.float64)
    m, d = matrix.shape
    if rtol is None:
        rtol = max(m, d) * torch.finfo(torch.float64).eps
    u, s, vh = torch.linalg.svd(matrix, full_matrices=False)  # [m, k], [k], [k, d]; k = min(m, d)
    keep = s > rtol * s[0] if s.numel() else s > 0  # descending, so the kept ones come first
    rank = int(keep.sum())
    gains = torch.where(keep, s / (s.square() + ridge).clamp_min(1e-300), 0.0)  # [k]
    operator = (u * gains) @ vh  # [m, d]
    return LeastSquaresOperator(operator, s, rank)


# ---------------------------------------------------------------------------- inverse


class RelativeInverse(nn.Module):
    """The inverse of one :class:`RelativeProjector`: relative features ``[..., m]`` back to
    its encoder's absolute embeddings ``[..., d]``.

    For ``wip``/``inner`` this is the affine map ``r @ weight + bias`` (``weight [m, d]``,
    ``bias [d]``); for ``cosine`` it is ``target_norm * normalize(r @ weight)``. Build it with
    :func:`relative_inverse`; ``rank`` and ``condition_number`` describe the (whitened)
    anchors it inverts.
    """

    def __init__(
        self,
        weight: Tensor,
        bias: Tensor,
        *,
        similarity: str,
        rank: int,
        condition_number: float,
        target_norm: float | None = None,
        ridge: float = 0.0,
        anchor_set_id: str = "",
        anchor_set_revision: str = "",
    ):
        super().__init__()
        self.register_buffer("weight", weight.detach())
        self.register_buffer("bias", bias.detach().to(weight.dtype))
        self.similarity = similarity
        self.rank = rank
        self.condition_number = condition_number
        self.target_norm = target_norm
        self.ridge = ridge
        self.anchor_set_id = anchor_set_id
        self.anchor_set_revision = anchor_set_revision

    @property
    def num_anchors(self) -> int:
        return self.weight.shape[0]

    @property
    def hidden_size(self) -> int:
        return self.weight.shape[1]

    @property
    def affine(self) -> bool:
        return self.similarity != "cosine"

    @property
    def exact(self) -> bool:
        """Whether projecting then inverting gives back every embedding (up to round-off)."""
        return self.rank == self.hidden_size and self.ridge == 0.0

    def forward(self, relative: Tensor) -> Tensor:
        """Absolute embeddings ``[..., d]`` of relative features ``[..., m]``."""
        check_embeddings(
            relative,
            dim=self.num_anchors,
            name="relative features",
            dim_hint=" (the number of anchors of the projector being inverted); they come "
            "from a projector with another anchor set",
        )
        rows = relative.reshape(-1, self.num_anchors).to(self.weight.dtype)  # (N, m)
        out = torch.addmm(self.bias, rows, self.weight)  # (N, d)
        if self.similarity == "cosine":
            out = F.normalize(out, dim=-1) * self.target_norm
        return out.reshape(*relative.shape[:-1], self.hidden_size)

    def as_affine_map(self) -> AffineMap:
        """This inverse as an :class:`AffineMap` (``wip``/``inner`` only)."""
        if not self.affine:
            raise ValueError(
                "The cosine inverse normalises its output, so it is not an affine map; call "
                "the inverse itself, or use 'wip' or 'inner' for a fused affine translation."
            )
        return AffineMap(self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"similarity={self.similarity!r}, num_anchors={self.num_anchors}, "
            f"hidden_size={self.hidden_size}, rank={self.rank}, "
            f"condition_number={self.condition_number:.3g}"
        )


def _mean_norm(target_norm: float | Statistics | None, anchors: Tensor) -> float:
    """The norm the cosine inverse gives its outputs (see :func:`relative_inverse`)."""
    if target_norm is None:
        return anchors.norm(dim=-1).mean().item()
    if isinstance(target_norm, Statistics):
        if target_norm.dim != anchors.shape[-1] or target_norm.count < 1:
            raise ValueError(
                f"target_norm statistics have dimension {target_norm.dim} and {target_norm.count} "
                f"rows; pass non-empty statistics of the target encoder "
                f"(dimension {anchors.shape[-1]})."
            )
        # E||x||^2 = ||mu||^2 + tr(scatter) / N: the root-mean-square norm of the rows.
        squared = target_norm.mean.square().sum() + target_norm.scatter.trace() / target_norm.count
        return squared.sqrt().item()
    value = float(target_norm)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"target_norm must be a positive finite number, got {target_norm!r}.")
    return value


def relative_inverse(
    projector: RelativeProjector,
    *,
    ridge: float = 0.0,
    target_norm: float | Statistics | None = None,
    rtol: float | None = None,
    max_condition: float = DEFAULT_MAX_CONDITION,
    dtype: torch.dtype | None = None,
) -> RelativeInverse:
    """Precompute the inverse of ``projector`` (one SVD of its anchors, in float64).

    Args:
        projector: the projector whose relative features are to be inverted (the target
            encoder's, when translating).
        ridge: Tikhonov term added to ``A_w^T A_w`` (in squared-similarity units); 0 gives the
            pseudo-inverse. Use it when the anchors are ill-conditioned.
        target_norm: ``cosine`` only, the norm given to the recovered directions. ``None``:
            the mean norm of the projector's anchors (rows of the target space); a
            :class:`Statistics` of the target's embeddings: their root-mean-square norm
            ``sqrt(||mu||^2 + tr(scatter) / N)``; a number: that norm. ``wip`` and ``inner``
            recover the norm themselves and reject it.
        rtol: singular values of the (whitened) anchors below ``rtol`` times the largest count
            as 0. Default ``max(m, d)`` epsilons of the projector's dtype (float32 for half
            precision): the anchors are stored at that precision, so smaller singular values
            are round-off, and inverting them would amplify it.
        max_condition: warn (:class:`IllConditionedInversionWarning`) when the kept singular
            values span more than this ratio (and ``ridge`` is 0).
        dtype: of the stored operator; defaults to the projector's.

    Warns :class:`UnderdeterminedInversionWarning` when the anchors span fewer than ``d``
    dimensions (``m < d``, or rank-deficient at ``rtol``): the inverse is then exact only for
    embeddings in that span around the mean (as when the encoder's embeddings themselves lie
    in a subspace) and otherwise the minimum-norm solution (in whitened coordinates for wip).
    """
    if not isinstance(projector, RelativeProjector):
        raise TypeError(f"Expected a RelativeProjector, got {type(projector).__name__}.")
    similarity = projector.config.similarity
    if similarity not in INVERTIBLE_SIMILARITIES:
        raise ValueError(
            f"Relative features of similarity {similarity!r} are not invertible by this method; "
            "use 'wip', 'inner' or 'cosine' (distances to anchors are not linear in x)."
        )
    if target_norm is not None and similarity != "cosine":
        raise ValueError(
            f"target_norm only applies to 'cosine' (which loses the norm); {similarity!r} "
            "features determine the norm themselves. Leave target_norm=None."
        )
    anchors = projector.anchors.detach().to(torch.float64)  # [m, d]
    if similarity == "wip":
        mean = projector.mean.detach().to(torch.float64)
        whitening = projector.whitening.detach().to(torch.float64)
        matrix = (anchors - mean) @ whitening  # A_w [m, d]
        # De-whitening L^{-1} = Sigma_lambda^{1/2}, from the stored (symmetric) whitening.
        dewhitening = symmetric_power(whitening, -1.0, name="whitening matrix")
    elif similarity == "inner":
        matrix, mean, dewhitening = anchors, torch.zeros_like(anchors[0]), None
    else:  # cosine: directions against unit anchors
        matrix, mean, dewhitening = F.normalize(anchors, dim=-1), torch.zeros_like(anchors[0]), None
    m, d = matrix.shape
    if rtol is None:
        precision = torch.promote_types(projector.weight.dtype, torch.float32)
        rtol = max(m, d) * torch.finfo(precision).eps
    solve = least_squares_operator(matrix, ridge=ridge, rtol=rtol)
    weight = solve.operator if dewhitening is None else solve.operator @ dewhitening  # [m, d]
    norm = _mean_norm(target_norm, anchors) if similarity == "cosine" else None

    where = f"{similarity!r} projector with m={m} anchors in d={d} dimensions"
    if solve.rank < d:
        warnings.warn(
            f"The anchors of this {where} have rank {solve.rank} < d={d} (at rtol={rtol:.3g}; "
            f"condition number of the kept part {solve.condition_number:.3g}): inversion "
            "returns the minimum-norm solution in their span, exact only for embeddings in "
            "that span. Use at least d linearly independent anchors for an exact inverse.",
            UnderdeterminedInversionWarning,
            stacklevel=2,
        )
    if ridge == 0.0 and solve.condition_number > max_condition:
        warnings.warn(
            f"The anchors of this {where} are nearly linearly dependent: condition number "
            f"{solve.condition_number:.3g} > {max_condition:.3g}, so errors in the relative "
            "features are amplified up to that much. Pass ridge > 0, or use more diverse anchors.",
            IllConditionedInversionWarning,
            stacklevel=2,
        )
    return RelativeInverse(
        weight.to(dtype or projector.weight.dtype),
        mean.to(dtype or projector.weight.dtype),
        similarity=similarity,
        rank=solve.rank,
        condition_number=solve.condition_number,
        target_norm=norm,
        ridge=ridge,
        anchor_set_id=projector.config.anchor_set_id,
        anchor_set_revision=projector.config.anchor_set_revision,
    )


def invert(
    relative: Tensor,
    projector: RelativeProjector,
    *,
    ridge: float = 0.0,
    target_norm: float | Statistics | None = None,
    rtol: float | None = None,
    max_condition: float = DEFAULT_MAX_CONDITION,
) -> Tensor:
    """Absolute embeddings ``[..., d]`` of ``projector``'s relative features ``[..., m]``.

    Builds the inverse (see :func:`relative_inverse` for the options) on every call; keep a
    :func:`relative_inverse` for repeated use.
    """
    inverse = relative_inverse(
        projector, ridge=ridge, target_norm=target_norm, rtol=rtol, max_condition=max_condition
    )
    return inverse(relative)


# ------------------------------------------------------------------------ translation


def _anchor_provenance(model: RelativeProjector | RelativeInverse) -> tuple[str, str, int, str]:
    if isinstance(model, RelativeProjector):
        c = model.config
        return c.anchor_set_id, c.anchor_set_revision, c.num_anchors, c.similarity
    return model.anchor_set_id, model.anchor_set_revision, model.num_anchors, model.similarity


def check_same_anchor_set(
    source: RelativeProjector | RelativeInverse, target: RelativeProjector | RelativeInverse
) -> None:
    """Raise ``ValueError`` unless source and target can share relative features.

    They must have the same number of anchors and similarity, and, where both record an
    anchor set (``anchor_set_id`` / ``anchor_set_revision``), the same one. Unrecorded
    provenance ("") cannot be checked and is accepted.
    """
    s_id, s_rev, s_m, s_sim = _anchor_provenance(source)
    t_id, t_rev, t_m, t_sim = _anchor_provenance(target)
    if (s_id and t_id and s_id != t_id) or (s_rev and t_rev and s_rev != t_rev):
        raise ValueError(
            f"The source projector uses anchor set {s_id or '?'}@{s_rev or '?'} but the target "
            f"uses {t_id or '?'}@{t_rev or '?'}: relative features only translate between "
            "projectors built on the same anchor set (row r of both anchors is the same input)."
        )
    if s_m != t_m:
        raise ValueError(
            f"The source projector has {s_m} anchors but the target has {t_m}: they cannot "
            "share an anchor set. Build both from the same parallel anchors."
        )
    if s_sim != t_sim:
        raise ValueError(
            f"The source projector uses similarity {s_sim!r} but the target uses {t_sim!r}: "
            "their relative features are not comparable. Build both with the same similarity."
        )


def translate(
    x: Tensor,
    source: RelativeProjector,
    target: RelativeProjector | RelativeInverse,
    *,
    ridge: float = 0.0,
    target_norm: float | Statistics | None = None,
) -> Tensor:
    """Source embeddings ``x [..., d_s]`` mapped into the target space ``[..., d_t]``.

    ``target(inverse)(source(x))``: project onto the shared anchors with the source
    projector, invert with the target's. ``target`` may be a prebuilt inverse.
    """
    check_same_anchor_set(source, target)
    if isinstance(target, RelativeProjector):
        target = relative_inverse(target, ridge=ridge, target_norm=target_norm)
    return target(source(x))


def translation_map(
    source: RelativeProjector, target: RelativeProjector | RelativeInverse, *, ridge: float = 0.0
) -> AffineMap:
    """:func:`translate` for ``wip``/``inner`` fused into one ``[d_s, d_t]`` affine map:
    ``x -> x (W_src W_inv) + (b_src W_inv + b_inv)``."""
    check_same_anchor_set(source, target)
    if isinstance(target, RelativeProjector):
        target = relative_inverse(target, ridge=ridge)
    return AffineMap(source.weight, source.bias).then(target.as_affine_map())


class LatentTranslator(nn.Module):
    """Source encoder embeddings -> target encoder embeddings, through the shared anchors.

    Put it between a source encoder's pooled output and a head trained on the target
    encoder's absolute embeddings: ``nn.Sequential(LatentTranslator(src, tgt), head)``.
    """

    def __init__(
        self,
        source: RelativeProjector,
        target: RelativeProjector | RelativeInverse,
        *,
        ridge: float = 0.0,
        target_norm: float | Statistics | None = None,
    ):
        super().__init__()
        check_same_anchor_set(source, target)
        if isinstance(target, RelativeProjector):
            target = relative_inverse(target, ridge=ridge, target_norm=target_norm)
        self.source = source
        self.inverse = target

    def forward(self, x: Tensor) -> Tensor:
        """``x [..., d_s] -> [..., d_t]``."""
        return self.inverse(self.source(x))

    def fused(self) -> AffineMap:
        """The same translation as one affine map (``wip``/``inner``)."""
        return AffineMap(self.source.weight, self.source.bias).then(self.inverse.as_affine_map())


# -------------------------------------------------------------------------- baselines


def _parallel(source: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    check_embeddings(source, name="source support embeddings", min_rows=2)
    check_embeddings(target, name="target support embeddings", min_rows=2)
    if source.ndim != 2 or target.ndim != 2 or source.shape[0] != target.shape[0]:
        raise ValueError(
            f"Need parallel support sets [K, d_s] and [K, d_t] (row i the same input), got "
            f"{tuple(source.shape)} and {tuple(target.shape)}."
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
    an SVD-based lstsq, so rank-deficient supports (K <= d_s) give the minimum-norm W.
    """
    if ridge < 0 or not math.isfinite(ridge):
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge}.")
    xs, xt = _parallel(source, target)
    mu_s, mu_t = xs.mean(dim=0), xt.mean(dim=0)
    xs, xt = xs - mu_s, xt - mu_t
    if ridge == 0.0:
        weight = torch.linalg.lstsq(xs, xt, driver="gelsd").solution  # [d_s, d_t]
    else:
        gram = xs.T @ xs + ridge * torch.eye(xs.shape[1], dtype=torch.float64)
        weight = torch.linalg.solve(gram, xs.T @ xt)
    dtype = torch.promote_types(source.dtype, target.dtype)
    return AffineMap(weight.to(dtype), (mu_t - mu_s @ weight).to(dtype))


# ------------------------------------------------------------------------- evaluation


def _predict(head: Callable[[Tensor], Any], embeddings: Tensor) -> np.ndarray:
    logits = head(embeddings)
    logits = np.asarray(logits.detach().cpu() if isinstance(logits, Tensor) else logits)
    if logits.ndim == 1:  # a binary decision score
        return (logits > 0).astype(np.int64)
    if logits.ndim != 2 or logits.shape[0] != embeddings.shape[0]:
        raise ValueError(
            f"target_head must return logits [n, classes] for n={embeddings.shape[0]} rows, got "
            f"shape {logits.shape}."
        )
    return logits.argmax(axis=1)


def evaluate_translation(
    translated: Tensor,
    target: Tensor,
    *,
    target_head: Callable[[Tensor], Any] | None = None,
    labels: Sequence[int] | Tensor | np.ndarray | None = None,
    ks: Sequence[int] = (1, 5),
) -> dict[str, float]:
    """How close ``translated [n, d_t]`` is to the true target embeddings ``target [n, d_t]``.

    Returns ``cosine`` (mean row-wise cosine), ``mse`` (mean squared error per entry),
    ``normalized_mse`` (MSE over the target's per-dimension variance: 0 perfect, 1 no better
    than the target mean), ``recall@k`` and ``mrr`` of cosine retrieval of row i among all
    true target rows; with ``target_head`` (a callable giving logits ``[n, classes]``, trained
    on the target's absolute embeddings) and ``labels`` (class indices into those logits),
    also ``head_accuracy`` on the translated rows and ``head_accuracy_target`` on the true ones.
    """
    check_embeddings(translated, name="translated", min_rows=2)
    check_embeddings(target, name="target", min_rows=2)
    if translated.shape != target.shape or translated.ndim != 2:
        raise ValueError(
            f"translated {tuple(translated.shape)} and target {tuple(target.shape)} must both be "
            "[n, d_t], row i the same input."
        )
    if (target_head is None) != (labels is None):
        raise ValueError("Pass target_head and labels together to score the head, or neither.")
    a, b = translated.detach().double(), target.detach().double()
    scores = {
        "cosine": F.cosine_similarity(a, b, dim=-1).mean().item(),
        "mse": (a - b).square().mean().item(),
        "normalized_mse": normalized_mse(a, b),
        **retrieval_metrics(a, b, ks=ks),
    }
    if target_head is not None:
        dtype = target.dtype
        with torch.no_grad():
            scores["head_accuracy"] = accuracy(_predict(target_head, translated.to(dtype)), labels)
            scores["head_accuracy_target"] = accuracy(_predict(target_head, target), labels)
    return scores
