"""PARAM anchors: learned convex mixtures of the support inputs (the paper's method).

Its arguments are `relrep_hf.training.anchor_arguments.ParamTrainingArguments` (Table 5); its
math is `relrep_hf.functional.losses` and `relrep_hf.functional.fused_losses` (layer 1, pure);
its training, sharded data and checkpoints are `relrep_hf.training.param_trainer`,
`param_data` and `param_checkpoints`. Registered by `relrep_hf.anchors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.anchors.anchor_methods import AnchorMethod, FitData
from relrep_hf.training.anchor_arguments import FitArguments, ParamTrainingArguments

if TYPE_CHECKING:
    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet

__all__ = ["METHOD", "fit_param_anchors"]


def fit_param_anchors(args: FitArguments, data: FitData) -> tuple[AnchorSet, Tensor]:
    """PARAM anchors, trained as the paper does (`ParamTrainer`; saved to ``args.output_dir``)."""
    from relrep_hf.training.param_trainer import ParamTrainer

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
