"""The methods a run's report puts beside its own anchor set, fitted as the run's was.

Beside PARAM anchors: the shared linear closed form as the quality benchmark's winner fits it;
beside the closed form (the default): the paper's PARAM-WIP. Both on the same training encoders
and rows, and kept out of the run folder (the run's anchor set is the one it publishes).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from torch import Tensor

from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.training.param_trainer import ParamTrainer, ParamTrainingArguments
from relrep_hf.training.zero_shot import build_projectors


def closed_form_projectors(
    anchor_set: AnchorSet,
    spaces: dict[str, Tensor],
    training: Sequence[str],
    train_rows: Tensor,
) -> dict[str, RelativeProjector]:
    """Every encoder's projector from the shared linear closed form as the quality benchmark's
    winner fits it (every training row as support, shrinkage chosen from the data), on the same
    training encoders and number of anchors as ``anchor_set``: seconds to fit, beside PARAM."""
    fit_embeddings = {n: spaces[n][train_rows] for n in training}
    closed_form = AnchorSet.shared_linear(
        [{"index": int(i)} for i in train_rows],
        fit_embeddings,
        anchor_set.num_anchors,
        support_rows=torch.arange(len(train_rows)),
        eps=anchor_set.eps,
    )
    return build_projectors(
        closed_form, spaces, support_rows=train_rows, statistics_rows=train_rows
    )


def param_projectors(
    args: ParamTrainingArguments,
    spaces: dict[str, Tensor],
    training: Sequence[str],
    train_rows: Tensor,
) -> dict[str, RelativeProjector]:
    """Every encoder's projector from PARAM anchors trained on the same training encoders and
    rows (kept out of the run folder: the run's anchor set is the other method's)."""
    with tempfile.TemporaryDirectory() as folder:
        trainer = ParamTrainer(
            replace(args, output_dir=str(Path(folder) / "anchor_set")),
            {n: spaces[n][train_rows] for n in training},
        )
        anchor_set = trainer.train()
    return build_projectors(
        anchor_set,
        spaces,
        support_rows=train_rows[trainer.support_indices],
        statistics_rows=train_rows,
    )
