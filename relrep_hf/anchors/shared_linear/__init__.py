"""Shared linear anchors: the closed-form shared linear compression (MAXVAR generalised CCA).

The folder holds its arguments (`arguments.SharedLinearArguments`: shrinkage chosen from the
data), its InfoNCE fine-tuning (`trainer.fine_tune_shared_linear`), and here its `METHOD` entry
and fit. Its pure math, the closed form (`relrep_hf.functional.shared_linear`, layer 1), stays
below the artifacts: `AnchorSet.shared_linear` (layer 3) calls it, and an import from there up
into this folder would point up. Registered by `relrep_hf.anchors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import AnchorMethod, FitData, fit_closed_form
from relrep_hf.anchors.arguments import FitArguments
from relrep_hf.anchors.shared_linear.arguments import SharedLinearArguments

if TYPE_CHECKING:
    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_shared_linear_anchors"]


def fit_shared_linear_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """The shared linear closed form over every fit row (`AnchorSet.shared_linear`)."""
    from relrep_hf.models.anchor_set import AnchorSet

    def build(support: list, rows: Tensor) -> AnchorSet:
        return AnchorSet.shared_linear(
            support,
            data.training,
            args.num_anchors,
            support_rows=rows,
            shrinkage=args.shrinkage,
            eps=args.eps,
        )

    return fit_closed_form(args, data, build)


METHOD = AnchorMethod(
    "shared_linear",
    "Shared-Linear-WIP",
    "shared linear anchors",
    "a linear combination of the centred support inputs, fitted in closed form",
    SharedLinearArguments,
    fit_shared_linear_anchors,
    "linear",
    tags=("whitened-inner-product",),
)
