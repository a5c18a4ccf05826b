"""Similarities between embeddings and anchors, as pure functions and a registry.

Each similarity is split in two: ``prepare`` turns (anchors, statistics) into a
``weight [d, m]`` and ``bias [m]`` once, and ``apply`` maps rows ``x [n, d]`` with
them. For ``wip`` and ``inner`` the map is affine in x, so ``apply`` is ONE fused
``addmm``; ``cosine`` is one product of normalised rows; the distances use
``torch.cdist`` against the anchors. ``RelativeProjector`` stores the prepared
tensors, so nothing about the anchors is recomputed per call.

    wip(x, a)       = (x - mu)^T Sigma_lambda^-1 (a - mu)   invariant to affine maps
    cosine(x, a)    = <x, a> / (|x| |a|)                     the original relative representation
    inner(x, a)     = <x, a>
    euclidean/l1/linf(x, a) = ||x - a||_p                    used by product-of-invariances work
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from relrep_hf.utils.registry import Registry
from relrep_hf.utils.validation import as_embeddings, check_embeddings, check_same_device

SimilarityName = Literal["wip", "cosine", "inner", "euclidean", "l1", "linf"]

Prepare = Callable[..., tuple[Tensor, Tensor]]
Apply = Callable[[Tensor, Tensor, Tensor], Tensor]


class Similarity(NamedTuple):
    """A similarity: an anchor-side ``prepare`` and a row-wise ``apply``."""

    name: str
    prepare: (
        Prepare  # (anchors [m, d], *, mean [d] | None, whitening [d, d] | None) -> (weight, bias)
    )
    apply: Apply  # (x [n, d], weight [d, m], bias [m]) -> [n, m]; bias is 0 unless affine
    needs_statistics: bool
    affine: bool  # output affine in x (exactly invertible through least squares)


def _affine_apply(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    return torch.addmm(bias, x, weight)


def _wip_prepare(anchors: Tensor, *, mean: Tensor, whitening: Tensor) -> tuple[Tensor, Tensor]:
    # (x - mu) L L (a - mu)^T = x @ W + b  with  W = L @ whitened_anchors^T,  b = -mu @ W
    whitened_anchors = (anchors - mean) @ whitening  # [m, d]
    weight = whitening @ whitened_anchors.T  # [d, m]
    return weight, -(mean @ weight)


def _plain_prepare(anchors: Tensor, **_: Tensor | None) -> tuple[Tensor, Tensor]:
    return anchors.T, anchors.new_zeros(anchors.shape[0])


def _cosine_prepare(anchors: Tensor, **_: Tensor | None) -> tuple[Tensor, Tensor]:
    return F.normalize(anchors, dim=-1).T, anchors.new_zeros(anchors.shape[0])


def _cosine_apply(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    # normalize(x) @ W, with the division done on the (smaller) [n, m] output.
    return torch.mm(x, weight) / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _distance_apply(p: float) -> Apply:
    def apply(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        return torch.cdist(x, weight.T.contiguous(), p=p)

    return apply


# name -> similarity, the registry shape of every extension point (`relrep_hf.utils.registry`)
SIMILARITIES: Registry[Similarity] = Registry("similarity")


def register_similarity(similarity: Similarity) -> Similarity:
    """Add ``similarity``: projectors, anchor sets and the CLI's ``--similarity`` then take its
    name. A ValueError if the name is taken."""
    return SIMILARITIES.register(similarity)


def unregister_similarity(name: str) -> Similarity:
    """Take similarity ``name`` out (a ValueError if it is not registered)."""
    return SIMILARITIES.unregister(name)


register_similarity(Similarity("wip", _wip_prepare, _affine_apply, True, True))
register_similarity(Similarity("inner", _plain_prepare, _affine_apply, False, True))
register_similarity(Similarity("cosine", _cosine_prepare, _cosine_apply, False, False))
register_similarity(Similarity("euclidean", _plain_prepare, _distance_apply(2.0), False, False))
register_similarity(Similarity("l1", _plain_prepare, _distance_apply(1.0), False, False))
register_similarity(Similarity("linf", _plain_prepare, _distance_apply(float("inf")), False, False))


def get_similarity(name: str) -> Similarity:
    """The registered similarity called ``name``."""
    if name not in SIMILARITIES:
        raise ValueError(
            f"Invalid similarity {name!r}. Valid: {', '.join(map(repr, SIMILARITIES))}."
        )
    return SIMILARITIES[name]


def prepare_anchors(
    anchors: Tensor,
    *,
    similarity: str,
    mean: Tensor | None = None,
    whitening: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The ``(weight [d, m], bias [m])`` that ``similarity`` applies to rows."""
    spec = get_similarity(similarity)
    if spec.needs_statistics and (mean is None or whitening is None):
        raise ValueError(
            f"Similarity {similarity!r} needs the encoder's statistics: pass mean= and whitening= "
            "(see relrep_hf.functional.statistics.Statistics and whitening_matrix)."
        )
    return spec.prepare(anchors, mean=mean, whitening=whitening)


def relative_projection(
    embeddings: Tensor,
    anchors: Tensor,
    *,
    similarity: str = "wip",
    mean: Tensor | None = None,
    whitening: Tensor | None = None,
) -> Tensor:
    """Relative features ``[..., m]``: ``similarity`` of each row of ``embeddings [..., d]``
    to each anchor of ``anchors [m, d]`` (``mean``/``whitening`` for ``wip``). Embeddings and
    anchors may be tensors, NumPy arrays or lists of floats, of any float dtypes (computed in
    the wider), all on one device, where the features are computed; NaN / Inf are refused."""
    get_similarity(similarity)  # validates the name first
    anchors = as_embeddings(anchors, name="anchors")
    embeddings = as_embeddings(embeddings)
    device = check_same_device(
        embeddings=embeddings, anchors=anchors, mean=mean, whitening=whitening
    )
    check_embeddings(anchors, name="anchors", min_rows=1)
    if anchors.ndim != 2:
        raise ValueError(f"anchors must have shape [m, d], got {tuple(anchors.shape)}.")
    check_embeddings(embeddings, dim=anchors.shape[1], dim_hint=" (the anchors' dimension)")
    dtype = torch.promote_types(embeddings.dtype, anchors.dtype)  # float32 with float64: float64
    embeddings, anchors = embeddings.to(dtype), anchors.to(dtype)
    mean = None if mean is None else torch.as_tensor(mean, device=device).to(dtype)
    whitening = None if whitening is None else torch.as_tensor(whitening, device=device).to(dtype)
    weight, bias = prepare_anchors(anchors, similarity=similarity, mean=mean, whitening=whitening)
    features = apply_prepared(embeddings, weight, bias, similarity=similarity)
    if not bool(torch.isfinite(features).all()):
        raise ValueError(
            f"The {similarity!r} relative features overflow {features.dtype} (the embeddings' "
            "largest value is "
            f"{float(embeddings.abs().max()):.3g}): scale the embeddings and anchors down, or "
            "compute in float64."
        )
    return features


def apply_prepared(embeddings: Tensor, weight: Tensor, bias: Tensor, *, similarity: str) -> Tensor:
    """Apply prepared anchors to ``embeddings [..., d]`` -> ``[..., m]``."""
    if embeddings.ndim == 2:  # the common case, without the two reshapes
        return get_similarity(similarity).apply(embeddings, weight, bias)
    rows = embeddings.reshape(-1, embeddings.shape[-1])  # (N, d)
    out = get_similarity(similarity).apply(rows, weight, bias)  # (N, m)
    return out.reshape(*embeddings.shape[:-1], weight.shape[-1])


def _named(name: str) -> Callable[..., Tensor]:
    def similarity(
        embeddings: Tensor,
        anchors: Tensor,
        *,
        mean: Tensor | None = None,
        whitening: Tensor | None = None,
    ) -> Tensor:
        return relative_projection(
            embeddings, anchors, similarity=name, mean=mean, whitening=whitening
        )

    similarity.__name__ = similarity.__qualname__ = name
    similarity.__doc__ = f"The {name!r} relative projection of ``embeddings`` on ``anchors``."
    return similarity


wip = _named("wip")
cosine = _named("cosine")
inner = _named("inner")
euclidean = _named("euclidean")
l1 = _named("l1")
linf = _named("linf")
