"""PARAM anchors: learned convex mixtures of the support inputs (the paper's method).

The folder holds the whole method: its arguments (`arguments.ParamTrainingArguments`, Table 5),
its training (`trainer.ParamTrainer`, driven by accelerate), its sharded data (`data`) and its
checkpoints (`checkpoints`), and here its `METHOD` entry and fit. Its pure math, the paper's
losses and their fused gradients, stays in `relrep_hf.functional.losses` and
`relrep_hf.functional.fused_losses` (layer 1): `relrep_hf.functional` and the trainers of other
layers use them too, and they import nothing above the math. Registered by `relrep_hf.anchors`;
importing this folder loads no torch (the trainer is imported by the fit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import AnchorMethod, FitData
from relrep_hf.anchors.arguments import FitArguments
from relrep_hf.anchors.param.arguments import ParamTrainingArguments

if TYPE_CHECKING:
    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_param_anchors"]


def fit_param_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """PARAM anchors, trained as the paper does (`ParamTrainer`; saved to ``args.output_dir``)."""
    from relrep_hf.anchors.param.trainer import ParamTrainer

    if not isinstance(args, ParamTrainingArguments):
        args = ParamTrainingArguments(**args.to_dict())
    trainer = ParamTrainer(
        args,
        dict(data.training),
        inputs=list(data.inputs),
        support_reference=data.support_reference,
        encoders=data.encoders,
    )
    return trainer.train(), trainer.support_indices


METHOD = AnchorMethod(
    "param",
    "PARAM-WIP",
    "learned PARAM anchors",
    "a learned convex mixture",
    ParamTrainingArguments,
    fit_param_anchors,
    "stochastic",
    compared_with="shared_linear",
    tags=("whitened-inner-product",),
)
