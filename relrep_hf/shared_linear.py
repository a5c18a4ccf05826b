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

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from relrep_hf.statistics import (
    DEFAULT_EPS,
    DEFAULT_SHRINKAGE,
    Statistics,
    whiten,
    whitening_matrix,
)
from relrep_hf.validation import check_embeddings

Normalization = Literal["none", "encoder", "row"]
# Exact whitening (eps only): measured best for the shared map (docs/quality.md; 0.593 against
# 0.251 R@1 at the paper's 0.15 on the small-LM group, K = every fit row), picked by a
# validation split of the fit rows alone. PARAM keeps the paper's 0.15.
SHARED_LINEAR_SHRINKAGE = 0.0
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
    check_embeddings(embeddings, dim=statistics.dim, name="embeddings")
    check_embeddings(support_embeddings, dim=statistics.dim, name="support embeddings")
    whitening = whitening_matrix(statistics, shrinkage=shrinkage, eps=eps)
    x = whiten(embeddings.to(torch.float64), mean=statistics.mean, whitening=whitening)
    s = whiten(support_embeddings.to(torch.float64), mean=statistics.mean, whitening=whitening)
    return x @ s.T


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


def feature_gram(
    embeddings: Tensor,
    support_embeddings: Tensor,
    statistics: Statistics,
    *,
    shrinkage: float = DEFAULT_SHRINKAGE,
    eps: float = DEFAULT_EPS,
    normalization: Normalization = "none",
) -> Tensor:
    """``R.T @ R`` ([K, K], float64) of one encoder's normalised full-support features.

    When ``statistics`` are those of ``embeddings`` and no row normalisation is asked for,
    ``R.T @ R = S (L scatter L) S.T`` with ``S`` the whitened support: ``O(K^2 d)`` instead of
    ``O(N K^2)``, and the rows never need to be held as ``[N, K]`` features.
    """
    if normalization == "row" or statistics.count != len(embeddings):
        r = normalize_features(
            full_support_features(
                embeddings, support_embeddings, statistics, shrinkage=shrinkage, eps=eps
            ),
            normalization,
        )
        check_finite_features(r)
        return r.T @ r
    check_embeddings(embeddings, dim=statistics.dim, name="embeddings")
    check_embeddings(support_embeddings, dim=statistics.dim, name="support embeddings")
    whitening = whitening_matrix(statistics, shrinkage=shrinkage, eps=eps)
    s = whiten(support_embeddings.to(torch.float64), mean=statistics.mean, whitening=whitening)
    gram = s @ (whitening @ statistics.scatter @ whitening) @ s.T
    if normalization == "encoder":  # ||R||_F^2 / (N K) is the mean square entry
        gram = gram / (gram.trace() / (statistics.count * gram.shape[0])).clamp_min(1e-300)
    elif normalization != "none":
        normalize_features(gram, normalization)  # raises, naming the valid ones
    return (gram + gram.T) / 2


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
    eigenproblem. Row normalisation has no such factor (use `feature_gram`).
    """
    if normalization not in ("none", "encoder"):
        normalize_features(embeddings[:0], normalization)  # raises for unknown names
        raise ValueError("Row normalisation has no d-column factor: use feature_gram.")
    check_embeddings(embeddings, dim=statistics.dim, name="embeddings")
    check_embeddings(support_embeddings, dim=statistics.dim, name="support embeddings")
    whitening = whitening_matrix(statistics, shrinkage=shrinkage, eps=eps)
    s = whiten(support_embeddings.to(torch.float64), mean=statistics.mean, whitening=whitening)
    centred = embeddings.to(torch.float64) - statistics.mean  # O(N d^2): any statistics
    inner = whitening @ (centred.T @ centred) @ whitening
    eigenvalues, eigenvectors = torch.linalg.eigh((inner + inner.T) / 2)
    factor = s @ (eigenvectors * eigenvalues.clamp_min(0.0).sqrt())
    if normalization == "encoder":  # ||R||_F^2 / (N K) is the mean square entry
        mean_square = factor.square().sum() / (len(embeddings) * len(support_embeddings))
        factor = factor / mean_square.sqrt().clamp_min(1e-300)
    return factor


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
    grams = []
    for r in features:
        r = normalize_features(r.to(torch.float64), normalization)
        check_finite_features(r)
        grams.append(r.T @ r)
    return top_eigenvectors(grams, num_anchors, rank_tolerance=rank_tolerance)


def top_singular_vectors(
    factors: Sequence[Tensor], num_anchors: int, *, rank_tolerance: float = 1e-10
) -> tuple[Tensor, Tensor]:
    """`top_eigenvectors` of ``sum_i F_i @ F_i.T`` from the factors ``F_i [K, d_i]``
    (`feature_factor`): the left singular vectors of ``[F_1, ..., F_n]``, same checks, signs
    and eigenvalues (the squared singular values)."""
    check_encoders_and_size([f.shape[0] for f in factors], len(factors), num_anchors)
    stacked = torch.cat([f.to(torch.float64) for f in factors], dim=1)
    u, singular, _ = torch.linalg.svd(stacked, full_matrices=False)
    return _top(u, singular.square(), num_anchors, rank_tolerance)


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
    if not 1 <= num_anchors <= k:
        raise ValueError(
            f"num_anchors must be between 1 and the support size K={k}, got {num_anchors}: "
            "ask for fewer anchors or use a larger support set."
        )
    return k


def top_eigenvectors(
    grams: Sequence[Tensor], num_anchors: int, *, rank_tolerance: float = 1e-10
) -> tuple[Tensor, Tensor]:
    """``(U [K, m], eigenvalues [m])``: the top-m eigenvectors of the sum of the encoders'
    feature Gram matrices ``R_i.T @ R_i`` ([K, K] each).

    At least two encoders are needed (with one, nothing is shared), ``m <= K``, and the sum
    must have rank ``>= m`` (an eigenvector of a zero eigenvalue is arbitrary). The sign of
    each column is fixed (largest entry positive), so the result is deterministic.
    """
    check_encoders_and_size([g.shape[1] for g in grams], len(grams), num_anchors)
    total = sum(g.to(torch.float64) for g in grams)
    eigenvalues, eigenvectors = torch.linalg.eigh((total + total.T) / 2)
    return _top(eigenvectors.flip(1), eigenvalues.flip(0), num_anchors, rank_tolerance)


def _top(
    vectors: Tensor, eigenvalues: Tensor, num_anchors: int, rank_tolerance: float
) -> tuple[Tensor, Tensor]:
    """The first ``num_anchors`` of eigenvectors sorted by decreasing eigenvalue, after the
    rank check, each column's sign fixed (largest entry positive)."""
    top = eigenvalues[0].clamp_min(0.0)
    rank = int((eigenvalues > top * rank_tolerance).sum()) if top > 0 else 0
    if rank < num_anchors:
        raise ValueError(
            f"The training encoders' full-support features have rank {rank} < num_anchors="
            f"{num_anchors} (the rank is at most the sum of the encoders' dimensions and the "
            "number of fit rows): ask for at most that many anchors, or fit on more rows/encoders."
        )
    u = vectors[:, :num_anchors]
    signs = torch.sign(u.gather(0, u.abs().argmax(dim=0, keepdim=True)))
    return u * signs, eigenvalues[:num_anchors]
