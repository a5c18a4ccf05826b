"""The way back: the inverse of a relative projection, from relative features to embeddings.

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
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from relrep_hf.functional.least_squares import (
    AffineMap,
    LeastSquaresOperator,
    least_squares_operators,
)
from relrep_hf.functional.statistics import Statistics, symmetric_power
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.utils.validation import check_embeddings, check_same_device

__all__ = [
    "INVERTIBLE_SIMILARITIES",
    "IllConditionedInversionWarning",
    "InversionWarning",
    "RelativeInverse",
    "UnderdeterminedInversionWarning",
    "invert",
    "relative_inverse",
    "relative_inverses",
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
        anchor_set_fingerprint: str = "",
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
        self.anchor_set_fingerprint = anchor_set_fingerprint  # see `mixing.check_same_anchor_set`

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
        """Absolute embeddings ``[..., d]`` of relative features ``[..., m]`` (on the
        inverse's device: its projector's)."""
        check_same_device(relative_features=relative, inverse=self.weight)
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
    return relative_inverses(
        projector,
        ridges=(ridge,),
        target_norm=target_norm,
        rtol=rtol,
        max_condition=max_condition,
        dtype=dtype,
        stacklevel=4,
    )[0]


def relative_inverses(
    projector: RelativeProjector,
    *,
    ridges: tuple[float, ...],
    target_norm: float | Statistics | None = None,
    rtol: float | None = None,
    max_condition: float = DEFAULT_MAX_CONDITION,
    dtype: torch.dtype | None = None,
    stacklevel: int = 3,
) -> list[RelativeInverse]:
    """`relative_inverse` for each ridge of ``ridges``, from one de-whitening and one SVD of
    the anchors (a ridge path costs one decomposition, not one per ridge); ``stacklevel``: of
    the inversion warnings (3: the caller of this function)."""
    similarity = _invertible_similarity(projector, target_norm)
    anchors = projector.anchors.detach().to(torch.float64)  # [m, d]
    matrix, mean, dewhitening = _linear_system(projector, anchors)
    m, d = matrix.shape
    if rtol is None:
        precision = torch.promote_types(projector.weight.dtype, torch.float32)
        rtol = max(m, d) * torch.finfo(precision).eps
    norm = _mean_norm(target_norm, anchors) if similarity == "cosine" else None
    dtype = dtype or projector.weight.dtype
    inverses = []
    for ridge, solve in zip(
        ridges, least_squares_operators(matrix, ridges=ridges, rtol=rtol), strict=True
    ):
        weight = solve.operator if dewhitening is None else solve.operator @ dewhitening  # [m, d]
        _warn_if_unstable(
            solve,
            f"{similarity!r} projector with m={m} anchors in d={d} dimensions",
            d,
            rtol=rtol,
            ridge=ridge,
            max_condition=max_condition,
            stacklevel=stacklevel,
        )
        inverses.append(
            RelativeInverse(
                weight.to(dtype),
                mean.to(dtype),
                similarity=similarity,
                rank=solve.rank,
                condition_number=solve.condition_number,
                target_norm=norm,
                ridge=ridge,
                anchor_set_id=projector.config.anchor_set_id,
                anchor_set_revision=projector.config.anchor_set_revision,
                anchor_set_fingerprint=projector.config.anchor_set_fingerprint,
            )
        )
    return inverses


def _invertible_similarity(
    projector: RelativeProjector, target_norm: float | Statistics | None
) -> str:
    """The projector's similarity, once it is known to be invertible (with ``target_norm``
    only for cosine)."""
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
    return similarity


def _linear_system(
    projector: RelativeProjector, anchors: Tensor
) -> tuple[Tensor, Tensor, Tensor | None]:
    """``(matrix [m, d], mean [d], de-whitening or None)``: the relative features are
    ``matrix @ L (x - mean)`` with ``L`` the whitening (wip) or the identity."""
    if projector.config.similarity == "wip":
        mean = projector.mean.detach().to(torch.float64)
        whitening = projector.whitening.detach().to(torch.float64)
        matrix = (anchors - mean) @ whitening  # A_w [m, d]
        # De-whitening L^{-1} = Sigma_lambda^{1/2}, from the stored (symmetric) whitening.
        return matrix, mean, symmetric_power(whitening, -1.0, name="whitening matrix")
    if projector.config.similarity == "inner":
        return anchors, torch.zeros_like(anchors[0]), None
    # cosine: directions against unit anchors
    return F.normalize(anchors, dim=-1), torch.zeros_like(anchors[0]), None


def _warn_if_unstable(
    solve: LeastSquaresOperator,
    where: str,
    d: int,
    *,
    rtol: float,
    ridge: float,
    max_condition: float,
    stacklevel: int = 3,
) -> None:
    """Warnings, at the caller of `relative_inverse`, when the anchors span fewer than d
    dimensions or are nearly dependent."""
    if solve.rank < d:
        warnings.warn(
            f"The anchors of this {where} have rank {solve.rank} < d={d} (at rtol={rtol:.3g}; "
            f"condition number of the kept part {solve.condition_number:.3g}): inversion "
            "returns the minimum-norm solution in their span, exact only for embeddings in "
            "that span. Use at least d linearly independent anchors for an exact inverse.",
            UnderdeterminedInversionWarning,
            stacklevel=stacklevel,
        )
    if ridge == 0.0 and solve.condition_number > max_condition:
        warnings.warn(
            f"The anchors of this {where} are nearly linearly dependent: condition number "
            f"{solve.condition_number:.3g} > {max_condition:.3g}, so errors in the relative "
            "features are amplified up to that much. Pass ridge > 0, or use more diverse anchors.",
            IllConditionedInversionWarning,
            stacklevel=stacklevel,
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
