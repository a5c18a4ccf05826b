"""Full-support anchors: every support input is an anchor (the identity mixture).

Its arguments are every method's (`relrep_hf.anchors.arguments.FitArguments`, less
``num_anchors``, which it ignores); there is no math beyond `AnchorSet.full_support`.
Registered by `relrep_hf.anchors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import AnchorMethod, FitData, fit_closed_form
from relrep_hf.anchors.arguments import FitArguments

if TYPE_CHECKING:
    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_full_support_anchors"]


def fit_full_support_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """Every support row an anchor (`AnchorSet.full_support`)."""
    from relrep_hf.models.anchor_set import AnchorSet

    def build(support: list, rows: Tensor) -> AnchorSet:
        return AnchorSet.full_support(support, shrinkage=args.shrinkage, eps=args.eps)

    return fit_closed_form(args, data, build)


METHOD = AnchorMethod(
    "full_support",
    "Full-Support-WIP",
    "full-support anchors",
    "one support input (every support input is an anchor)",
    FitArguments,
    fit_full_support_anchors,
    "identity",
    unused={"num_anchors": "every support input is an anchor (as many anchors as --support-size)"},
)
