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


def top_eigenvectors(
    grams: Sequence[Tensor], num_anchors: int, *, rank_tolerance: float = 1e-10
) -> tuple[Tensor, Tensor]:
    """``(U [K, m], eigenvalues [m])``: the top-m eigenvectors of the sum of the encoders'
    feature Gram matrices ``R_i.T @ R_i`` ([K, K] each).

    At least two encoders are needed (with one, nothing is shared), ``m <= K``, and the sum
    must have rank ``>= m`` (an eigenvector of a zero eigenvalue is arbitrary). The sign of
    each column is fixed (largest entry positive), so the result is deterministic.
    """
    if len(grams) < 2:
        raise ValueError(
            f"The shared linear map needs at least 2 training encoders, got {len(grams)}: "
            "with one encoder nothing is shared. Fit on two or more encoders' embeddings."
        )
    sizes = {g.shape[1] for g in grams}
    if len(sizes) != 1:
        raise ValueError(f"Every encoder's features must have K columns; got {sorted(sizes)}.")
    k = sizes.pop()
    if not 1 <= num_anchors <= k:
        raise ValueError(
            f"num_anchors must be between 1 and the support size K={k}, got {num_anchors}: "
            "ask for fewer anchors or use a larger support set."
        )
    total = sum(g.to(torch.float64) for g in grams)
    eigenvalues, eigenvectors = torch.linalg.eigh((total + total.T) / 2)
    eigenvalues, eigenvectors = eigenvalues.flip(0), eigenvectors.flip(1)
    top = eigenvalues[0].clamp_min(0.0)
    rank = int((eigenvalues > top * rank_tolerance).sum()) if top > 0 else 0
    if rank < num_anchors:
        raise ValueError(
            f"The training encoders' full-support features have rank {rank} < num_anchors="
            f"{num_anchors} (the rank is at most the sum of the encoders' dimensions and the "
            "number of fit rows): ask for at most that many anchors, or fit on more rows/encoders."
        )
    u = eigenvectors[:, :num_anchors]
    signs = torch.sign(u.gather(0, u.abs().argmax(dim=0, keepdim=True)))
    return u * signs, eigenvalues[:num_anchors]
