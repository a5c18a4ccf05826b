"""Farthest-point anchors: support inputs picked by farthest-point sampling (one-hot mixtures).

Its arguments are every method's (`relrep_hf.anchors.arguments.FitArguments`); its math is
`relrep_hf.functional.anchor_strategies.farthest_point_mixture` (layer 1, pure), which its
sampler calls; `AnchorSet.farthest_point` reaches the sampler through the registration.
Registered by `relrep_hf.anchors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import AnchorMethod, FitData, fit_sampled
from relrep_hf.anchors.arguments import FitArguments

if TYPE_CHECKING:
    from collections.abc import Sequence

    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_farthest_point_anchors", "sample_farthest_point_mixture"]


def fit_farthest_point_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """`AnchorSet.farthest_point` anchors over ``support_size`` rows drawn with ``seed``."""
    from relrep_hf.models.anchor_set import AnchorSet

    def build(support: list, embeddings: list) -> AnchorSet:
        return AnchorSet.farthest_point(support, embeddings, args.num_anchors, seed=args.seed)

    return fit_sampled(args, data, build)


def sample_farthest_point_mixture(
    support_size: int,
    support_embeddings: Tensor | Sequence[Tensor],
    num_anchors: int,
    *,
    seed: int = 0,
) -> Tensor:
    """Its sampler: farthest-point sampling of the support embeddings
    (`farthest_point_mixture`)."""
    from relrep_hf.functional.anchor_strategies import farthest_point_mixture

    return farthest_point_mixture(support_embeddings, num_anchors, seed=seed)


METHOD = AnchorMethod(
    "farthest_point",
    "FPS-WIP",
    "farthest-point anchors",
    "one input picked by farthest-point sampling",
    FitArguments,
    fit_farthest_point_anchors,
    "one_hot",
    sampler=sample_farthest_point_mixture,
)
