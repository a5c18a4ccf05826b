"""Shared linear compression of full-support relative features: the closed form.

With every support input as an anchor (full support, m = K), encoder i's WIP relative
features of rows ``X_i`` are ``R_i = whiten_i(X_i) @ whiten_i(X_sub_i).T`` ([N, K]). A map
``U [K, m]`` shared by every encoder compresses them to ``R_i @ U``. The ``U`` that keeps the
most energy common to the training encoders is the top-m eigenvectors of
``sum_i R_i.T @ R_i`` (multi-view PCA), found from the training encoders only. A held-out
encoder needs no fitting: its projector applies ``U`` to its own full-support features,
which folds into one ``addmm`` (see ``AnchorSet.anchors``).

Normalisations change only how much each encoder and each row weighs in the
eigenproblem (onboarding is unchanged):

- ``"none"``: ``R_i`` as they are;
- ``"encoder"``: each ``R_i`` divided by its root-mean-square entry, so that no encoder
  dominates by the scale of its features;
- ``"row"``: each row of ``R_i`` divided by its norm (retrieval compares rows by cosine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor

from relrep_hf.functional.regularization import (
    CovarianceBasis,
    cross_validated_shrinkage,
    supported_rank,
    top_eigenpairs,
)
from relrep_hf.functional.statistics import (
    DEFAULT_EPS,
    DEFAULT_SHRINKAGE,
    Statistics,
    check_invertible,
    warn_if_thin,
    whiten,
    whitening_matrix,
)
from relrep_hf.utils.defaults import check_count, is_shrinkage
from relrep_hf.utils.validation import check_distinct_names, check_embeddings, check_same_device

Normalization = Literal["none", "encoder", "row"]
NORMALIZATIONS: tuple[str, ...] = ("none", "encoder", "row")


def full_support_features(
    embeddings: Tensor,
    support_embeddings: Tensor,
    statistics: Statistics,
    *,
    shrinkage: float = DEFAULT_SHRINKAGE,
    eps: float = DEFAULT_EPS,
) -> Tensor:
    """WIP features ``[N, K]`` of ``embeddings`` against every support input, in float64."""
    whitening, s = whitened_support(embeddings, support_embeddings, statistics, shrinkage, eps)
    x = whiten(embeddings.to(torch.float64), mean=statistics.mean, whitening=whitening)
    return x @ s.T


def whitened_support(
    embeddings: Tensor,
    support_embeddings: Tensor,
    statistics: Statistics,
    shrinkage: float,
    eps: float,
) -> tuple[Tensor, Tensor]:
    """The whitening ``L [d, d]`` of ``statistics`` and the whitened support ``S [K, d]``
    (float64), once both sets of embeddings are checked against the statistics' dimension."""
    check_embeddings(embeddings, dim=statistics.dim, name="embeddings")
    check_embeddings(support_embeddings, dim=statistics.dim, name="support embeddings")
    whitening = whitening_matrix(statistics, shrinkage=shrinkage, eps=eps)
    s = whiten(support_embeddings.to(torch.float64), mean=statistics.mean, whitening=whitening)
    return whitening, s


def normalize_features(features: Tensor, normalization: Normalization) -> Tensor:
    """One encoder's ``[N, K]`` features as they enter the eigenproblem."""
    if normalization == "none":
        return features
    if normalization == "encoder":
        return features / features.square().mean().sqrt().clamp_min(1e-300)
    if normalization == "row":
        return features / features.norm(dim=1, keepdim=True).clamp_min(1e-300)
    raise ValueError(
        f"Invalid normalization {normalization!r}. Valid: {', '.join(map(repr, NORMALIZATIONS))}."
    )


def feature_factor(
    embeddings: Tensor,
    support_embeddings: Tensor,
    statistics: Statistics,
    *,
    shrinkage: float = DEFAULT_SHRINKAGE,
    eps: float = DEFAULT_EPS,
    normalization: Normalization = "none",
) -> Tensor:
    """``F [K, d]`` (float64) with ``F @ F.T == R.T @ R``, the features' Gram matrix.

    ``R.T @ R = S (L G L) S.T`` with ``S`` the whitened support and ``G`` the scatter of the
    rows about the statistics' mean (the statistics may come from other rows), so ``F = S (L G L)^(1/2)``: the closed form is then one SVD
    of the encoders' factors side by side (``[K, sum d_i]``), whatever K, never a ``[K, K]``
    eigenproblem. Row normalisation has no such factor (use `shared_linear_map` on the
    features).
    """
    if normalization not in ("none", "encoder"):
        normalize_features(embeddings[:0], normalization)  # raises for unknown names
        raise ValueError(
            "Row normalisation has no d-column factor: use shared_linear_map on the features."
        )
    whitening, s = whitened_support(embeddings, support_embeddings, statistics, shrinkage, eps)
    centred = embeddings.to(torch.float64) - statistics.mean  # O(N d^2): any statistics
    inner = whitening @ (centred.T @ centred) @ whitening
    eigenvalues, eigenvectors = torch.linalg.eigh((inner + inner.T) / 2)
    factor = s @ (eigenvectors * eigenvalues.clamp_min(0.0).sqrt())
    if normalization == "encoder":  # ||R||_F^2 / (N K) is the mean square entry
        mean_square = factor.square().sum() / (len(embeddings) * len(support_embeddings))
        factor = factor / mean_square.sqrt().clamp_min(1e-300)
    return factor


def own_rows_factor(
    embeddings: Tensor,
    support_embeddings: Tensor,
    *,
    shrinkage: float = DEFAULT_SHRINKAGE,
    eps: float = DEFAULT_EPS,
) -> Tensor:
    """`feature_factor` with the statistics of ``embeddings`` themselves (the closed form's
    fit), from one eigendecomposition instead of two: in the covariance eigenbasis the whitening
    and the scatter share eigenvectors (`regularization.CovarianceBasis.factor_scale`). Same
    ``F @ F.T``, same checks and warnings."""
    check_embeddings(embeddings, name="embeddings")
    check_embeddings(support_embeddings, dim=embeddings.shape[-1], name="support embeddings")
    statistics = Statistics.from_embeddings(embeddings)
    warn_if_thin(statistics, shrinkage)
    basis = CovarianceBasis.from_statistics(statistics)
    check_invertible(basis.shrunk(shrinkage, eps))
    rotated = (support_embeddings.to(torch.float64) - basis.mean) @ basis.vectors
    return rotated * basis.factor_scale(shrinkage, eps)


def check_finite_features(features: Tensor) -> None:
    if not bool(torch.isfinite(features).all()):
        raise ValueError(
            "The relative features of a training encoder are not finite (NaN or inf in its "
            "embeddings): clean or drop those rows before fitting."
        )


def shared_linear_map(
    features: Sequence[Tensor],
    num_anchors: int,
    *,
    normalization: Normalization = "none",
    rank_tolerance: float = 1e-10,
) -> tuple[Tensor, Tensor]:
    """``(U [K, m], eigenvalues [m])``: the top-m eigenvectors of ``sum_i R_i.T @ R_i``.

    ``features`` holds each training encoder's full-support features ``R_i [N_i, K]``.
    """
    grams = [features_gram(r, normalization) for r in features]
    return top_eigenvectors(grams, num_anchors, rank_tolerance=rank_tolerance)


def features_gram(features: Tensor, normalization: Normalization) -> Tensor:
    """``R.T @ R`` ([K, K], float64) of one encoder's ``[N, K]`` features once normalised."""
    r = normalize_features(features.to(torch.float64), normalization)
    check_finite_features(r)
    return r.T @ r


def top_singular_vectors(
    factors: Sequence[Tensor],
    num_anchors: int,
    *,
    rank_tolerance: float = 1e-10,
    cap: bool = False,
) -> tuple[Tensor, Tensor]:
    """`top_eigenvectors` of ``sum_i F_i @ F_i.T`` from the factors ``F_i [K, d_i]``
    (`feature_factor`): the left singular vectors of ``[F_1, ..., F_n]``, same checks, signs
    and eigenvalues (the squared singular values). ``cap=True`` returns at most as many
    columns as the rank the factors support instead of raising (the caller says so)."""
    requested = _requested([f.shape[0] for f in factors], num_anchors, cap)
    stacked = torch.cat([f.to(torch.float64) for f in factors], dim=1)
    if stacked.shape[0] > stacked.shape[1]:  # K > sum d_i: the [D, D] eigh beats the SVD
        eigenvalues, vectors = top_eigenpairs(stacked.T @ stacked, requested)
        eigenvalues = eigenvalues.clamp_min(0.0)
        rank = supported_rank(eigenvalues, rank_tolerance)
        u = stacked @ (vectors[:, :rank] / eigenvalues[:rank].sqrt())
    else:
        u, singular, _ = torch.linalg.svd(stacked, full_matrices=False)
        eigenvalues = singular.square()
    return _top(u, eigenvalues, requested, rank_tolerance, cap)


def check_encoders_and_size(sizes: Sequence[int], encoders: int, num_anchors: int) -> int:
    """The support size K, after checking there are two encoders or more and ``m <= K``."""
    if encoders < 2:
        raise ValueError(
            f"The shared linear map needs at least 2 training encoders, got {encoders}: "
            "with one encoder nothing is shared. Fit on two or more encoders' embeddings."
        )
    if len(set(sizes)) != 1:
        raise ValueError(f"Every encoder's features must have K columns; got {sorted(set(sizes))}.")
    k = sizes[0]
    if not 1 <= check_count(num_anchors, "num_anchors", minimum=0) <= k:
        raise ValueError(
            f"num_anchors must be between 1 and the support size K={k}, got {num_anchors}: "
            "ask for fewer anchors or use a larger support set."
        )
    return k


def top_eigenvectors(
    grams: Sequence[Tensor],
    num_anchors: int,
    *,
    rank_tolerance: float = 1e-10,
    cap: bool = False,
) -> tuple[Tensor, Tensor]:
    """``(U [K, m], eigenvalues [m])``: the top-m eigenvectors of the sum of the encoders'
    feature Gram matrices ``R_i.T @ R_i`` ([K, K] each); ``cap`` as `top_singular_vectors`.

    At least two encoders are needed (with one, nothing is shared), ``m <= K``, and the sum
    must have rank ``>= m`` (an eigenvector of a zero eigenvalue is arbitrary). The sign of
    each column is fixed (largest entry positive), so the result is deterministic.
    """
    requested = _requested([g.shape[1] for g in grams], num_anchors, cap)
    total = sum(g.to(torch.float64) for g in grams)
    eigenvalues, eigenvectors = torch.linalg.eigh((total + total.T) / 2)
    eigenvalues, eigenvectors = eigenvalues.flip(0), eigenvectors.flip(1)
    return _top(eigenvectors, eigenvalues, requested, rank_tolerance, cap)


def _requested(sizes: Sequence[int], num_anchors: int, cap: bool) -> int:
    """How many columns to return before the rank is known: ``num_anchors``, at most K with
    ``cap``; after `check_encoders_and_size` (one size per encoder)."""
    requested = min(num_anchors, sizes[0]) if cap and sizes else num_anchors
    check_encoders_and_size(sizes, len(sizes), requested)
    return requested


def _top(
    vectors: Tensor, eigenvalues: Tensor, num_anchors: int, rank_tolerance: float, cap: bool
) -> tuple[Tensor, Tensor]:
    """The first ``num_anchors`` of eigenvectors sorted by decreasing eigenvalue (with ``cap``,
    at most the supported rank), after the rank check, each column's sign fixed (largest entry
    positive)."""
    rank = supported_rank(eigenvalues, rank_tolerance)
    if cap:
        num_anchors = max(min(num_anchors, rank), 1)
    if rank < num_anchors:
        raise ValueError(
            f"The training encoders' full-support features have rank {rank} < num_anchors="
            f"{num_anchors} (the rank is at most the sum of the encoders' dimensions and the "
            "number of fit rows): ask for at most that many anchors, or fit on more rows/encoders."
        )
    u = vectors[:, :num_anchors]
    signs = torch.sign(u.gather(0, u.abs().argmax(dim=0, keepdim=True)))
    return u * signs, eigenvalues[:num_anchors]


@dataclass(frozen=True)
class SharedLinearFit:
    """What `fit_shared_linear` found: the mixing ``M = U.T`` and how it was chosen."""

    mixture: Tensor  # [m, K] float32, m <= the requested number (capped at the rank)
    explained_energy: float
    shrinkage: float
    selection: dict[str, Any] = field(default_factory=dict)  # how the shrinkage was chosen


def check_shared_linear_shrinkage(shrinkage: float | str) -> None:
    """``"auto"`` (chosen from the data) or a number in [0, 1]; raises ValueError otherwise."""
    if shrinkage == "auto":
        return
    if (
        isinstance(shrinkage, bool)
        or not isinstance(shrinkage, (int, float))
        or not is_shrinkage(shrinkage)
    ):
        raise ValueError(
            f"shrinkage must be 'auto' (chosen from the fit rows) or a number in [0, 1], got "
            f"{shrinkage!r}."
        )


def support_positions(support_rows: Tensor, fit_rows: Tensor | None) -> Tensor | None:
    """Where each support row is among the fit rows (None when some support row is not a fit
    row: the shrinkage's cross-validation then takes every fit row as support)."""
    if fit_rows is None:
        return support_rows
    position = {int(row): i for i, row in enumerate(fit_rows)}
    found = [position.get(int(row)) for row in support_rows]
    return None if None in found else torch.tensor(found, device=support_rows.device)


def fit_shared_linear(
    fit_spaces: Mapping[str, Tensor],
    support_spaces: Mapping[str, Tensor],
    num_anchors: int,
    *,
    support_positions: Tensor | None,
    shrinkage: float | str,
    eps: float,
    normalization: Normalization = "none",
) -> SharedLinearFit:
    """The closed form from each training encoder's fit rows ``[N, d_i]`` (row-aligned) and
    support embeddings ``[K, d_i]``. ``shrinkage="auto"`` chooses it by
    `relrep_hf.functional.regularization.cross_validated_shrinkage` (``support_positions``: the support
    rows among the fit rows); the number of anchors is capped at the rank the data supports
    (at most K and the sum of the encoders' dimensions). Computed on the embeddings' device
    (one for every encoder); the mixture comes back there."""
    check_distinct_names(fit_spaces, what="training encoders")
    check_same_device(
        **{f"{n!r} fit embeddings": x for n, x in fit_spaces.items()},
        **{f"{n!r} support embeddings": x for n, x in support_spaces.items()},
    )
    names = list(fit_spaces)
    sizes = [len(support_spaces[name]) for name in names]
    check_count(num_anchors, "num_anchors", minimum=0)  # the range: check_encoders_and_size
    check_encoders_and_size(sizes, len(names), min(num_anchors, sizes[0]) if sizes else 1)
    selection: dict[str, Any] = {"method": "fixed", "chosen": shrinkage}
    if shrinkage == "auto":
        n = len(fit_spaces[names[0]])
        device = fit_spaces[names[0]].device
        positions = (
            torch.arange(n, device=device) if support_positions is None else support_positions
        )
        chosen = cross_validated_shrinkage(
            [fit_spaces[name] for name in names], positions, num_anchors, eps=eps
        )
        shrinkage, selection = chosen.shrinkage, chosen.to_dict()
    if normalization == "none":
        parts = [
            own_rows_factor(fit_spaces[n], support_spaces[n], shrinkage=shrinkage, eps=eps)
            for n in names
        ]
    else:
        parts = []
        for n in names:
            spaces = (fit_spaces[n], support_spaces[n], Statistics.from_embeddings(fit_spaces[n]))
            if normalization == "row":  # no d-column factor: the [K, K] Gram matrices
                features = full_support_features(*spaces, shrinkage=shrinkage, eps=eps)
                parts.append(features_gram(features, "row"))
            else:
                parts.append(
                    feature_factor(
                        *spaces, shrinkage=shrinkage, eps=eps, normalization=normalization
                    )
                )
    if normalization == "row":
        u, eigenvalues = top_eigenvectors(parts, num_anchors, cap=True)
        total_energy = float(sum(g.trace() for g in parts))
    else:
        u, eigenvalues = top_singular_vectors(parts, num_anchors, cap=True)
        total_energy = float(sum(f.square().sum() for f in parts))
    return SharedLinearFit(
        u.T.float().contiguous(),
        float(eigenvalues.sum()) / total_energy,
        float(shrinkage),
        selection,
    )
