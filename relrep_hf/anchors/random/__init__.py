"""Random anchors: each one support input drawn with the seed (a one-hot mixture).

Its arguments are every method's (`relrep_hf.anchors.arguments.FitArguments`); its math is
`relrep_hf.functional.anchor_strategies.random_mixture` (layer 1, pure), which its sampler
calls; `AnchorSet.random` reaches the sampler through the registration. Registered by
`relrep_hf.anchors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import AnchorMethod, FitData, fit_sampled
from relrep_hf.anchors.arguments import FitArguments

if TYPE_CHECKING:
    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_random_anchors", "sample_random_mixture"]


def fit_random_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """`AnchorSet.random` anchors over ``support_size`` rows drawn with ``seed``."""
    from relrep_hf.models.anchor_set import AnchorSet

    def build(support: list, embeddings: list) -> AnchorSet:
        return AnchorSet.random(support, args.num_anchors, seed=args.seed)

    return fit_sampled(args, data, build)


def sample_random_mixture(
    support_size: int, support_embeddings: object, num_anchors: int, *, seed: int = 0
) -> Tensor:
    """Its sampler: ``num_anchors`` of the ``support_size`` inputs drawn with ``seed`` (it
    reads no embeddings; `random_mixture`)."""
    from relrep_hf.functional.anchor_strategies import random_mixture

    return random_mixture(support_size, num_anchors, seed=seed)


METHOD = AnchorMethod(
    "random",
    "Random-WIP",
    "random anchors",
    "one randomly drawn input (a one-hot mixture)",
    FitArguments,
    fit_random_anchors,
    "one_hot",
    sampler=sample_random_mixture,
)
