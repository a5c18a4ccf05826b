"""K-means anchors: each the centroid (a uniform mixture) of one cluster of the support rows.

Its arguments are every method's (`relrep_hf.anchors.arguments.FitArguments`); its math is
`relrep_hf.functional.anchor_strategies.kmeans_mixture` (layer 1, pure: k-means over the
training encoders' jointly whitened support rows), which its sampler calls; `AnchorSet.kmeans`
reaches the sampler through the registration. Registered by `relrep_hf.anchors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import AnchorMethod, FitData, fit_sampled
from relrep_hf.anchors.arguments import FitArguments

if TYPE_CHECKING:
    from collections.abc import Sequence

    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_kmeans_anchors", "sample_kmeans_mixture"]


def fit_kmeans_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """`AnchorSet.kmeans` anchors over ``support_size`` rows drawn with ``seed``."""
    from relrep_hf.models.anchor_set import AnchorSet

    def build(support: list, embeddings: list) -> AnchorSet:
        return AnchorSet.kmeans(support, embeddings, args.num_anchors, seed=args.seed)

    return fit_sampled(args, data, build)


def sample_kmeans_mixture(
    support_size: int,
    support_embeddings: Tensor | Sequence[Tensor],
    num_anchors: int,
    *,
    seed: int = 0,
    iterations: int = 50,
) -> Tensor:
    """Its sampler: k-means over the support embeddings (`kmeans_mixture`)."""
    from relrep_hf.functional.anchor_strategies import kmeans_mixture

    return kmeans_mixture(support_embeddings, num_anchors, seed=seed, iterations=iterations)


METHOD = AnchorMethod(
    "kmeans",
    "KMeans-WIP",
    "k-means anchors",
    "the centroid (uniform mixture) of a k-means cluster",
    FitArguments,
    fit_kmeans_anchors,
    "stochastic",
    sampler=sample_kmeans_mixture,
)
