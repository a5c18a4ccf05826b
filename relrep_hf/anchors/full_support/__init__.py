"""Full-support anchors: every support input is an anchor (the identity mixture).

Its arguments are every method's (`relrep_hf.anchors.arguments.FitArguments`, less
``num_anchors``, which it ignores); there is no math beyond `AnchorSet.full_support`.
Registered by `relrep_hf.anchors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import (
    AnchorMethod,
    FitData,
    first_rows,
    recorded,
    support_inputs,
)
from relrep_hf.anchors.arguments import FitArguments

if TYPE_CHECKING:
    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_full_support_anchors"]


def fit_full_support_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """Every support row an anchor (`AnchorSet.full_support`)."""
    from relrep_hf.models.anchor_set import AnchorSet

    rows = first_rows(args, data)
    anchor_set = AnchorSet.full_support(
        support_inputs(data, rows), shrinkage=args.shrinkage, eps=args.eps
    )
    return recorded(anchor_set, data), rows


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
