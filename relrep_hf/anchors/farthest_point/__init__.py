"""Farthest-point anchors: support inputs picked by farthest-point sampling (one-hot mixtures).

Its arguments are every method's (`relrep_hf.training.anchor_arguments.FitArguments`); its
math is `relrep_hf.functional.anchor_strategies.farthest_point_mixture` (layer 1, pure), reached through
`AnchorSet.farthest_point`. Registered by `relrep_hf.anchors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import AnchorMethod, FitData, fit_sampled
from relrep_hf.training.anchor_arguments import FitArguments

if TYPE_CHECKING:
    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_farthest_point_anchors"]


def fit_farthest_point_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """`AnchorSet.farthest_point` anchors over ``support_size`` rows drawn with ``seed``."""
    from relrep_hf.models.anchor_set import AnchorSet

    def build(support: list, embeddings: list) -> AnchorSet:
        return AnchorSet.farthest_point(support, embeddings, args.num_anchors, seed=args.seed)

    return fit_sampled(args, data, build)


METHOD = AnchorMethod(
    "farthest_point",
    "FPS-WIP",
    "farthest-point anchors",
    "one input picked by farthest-point sampling",
    FitArguments,
    fit_farthest_point_anchors,
    "one_hot",
)
