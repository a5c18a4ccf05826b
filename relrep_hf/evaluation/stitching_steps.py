"""The steps of zero-shot stitching, each a plain function on tensors.

Every encoder's projector from one anchor set (`build_projectors`, no gradient step), PARAM
anchors fitted in memory (`train_param_anchors`), a linear head on features
(`train_classifier`) and its weighted F1 (`head_f1`), absolute features standardized with the
training rows' statistics (`standardize`), and how well relative spaces line up without any
classifier (`retrieval_matrix`, the paper's Table 3). `zero_shot.ZeroShotStitching` composes
them into Algorithm 1; the pipeline, benchmarks and scripts call them directly.

Two spaces that differ by an invertible affine map line up exactly under WIP with no shrinkage:

>>> import torch
>>> from relrep_hf import AnchorSet
>>> _ = torch.manual_seed(0)
>>> a = torch.randn(40, 3, dtype=torch.float64)
>>> spaces = {"a": a, "b": a @ torch.randn(3, 3, dtype=torch.float64) + 5.0}
>>> anchors = AnchorSet.full_support([{"row": i} for i in range(20)], shrinkage=0.0, eps=0.0)
>>> projectors = build_projectors(anchors, spaces, support_rows=range(20), statistics_rows=range(40))
>>> retrieval_matrix({n: p(spaces[n]) for n, p in projectors.items()})["a->b"]["recall@1"]
1.0
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from relrep_hf.anchors.param.arguments import ParamTrainingArguments
from relrep_hf.anchors.param.trainer import ParamTrainer
from relrep_hf.functional.metrics import retrieval_metrics, weighted_f1
from relrep_hf.functional.statistics import Statistics
from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.training.head_trainer import train_in_memory
from relrep_hf.utils.defaults import DEFAULT_HEAD_EPOCHS

__all__ = [
    "build_projectors",
    "head_f1",
    "retrieval_matrix",
    "standardize",
    "train_classifier",
    "train_param_anchors",
]


def build_projectors(
    anchor_set: AnchorSet,
    embeddings: Mapping[str, Tensor],
    *,
    support_rows: Tensor | Sequence[int],
    statistics_rows: Tensor | Sequence[int],
    similarity: str | None = "wip",
    provenance: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, RelativeProjector]:
    """Every encoder's projector from one anchor set: no gradient step.

    ``support_rows`` index the anchor set's support inputs in ``embeddings``; statistics come
    from ``statistics_rows`` (never from the rows that will be evaluated); ``provenance`` gives
    each encoder's projector its encoder id, revision, pooling and layer.
    """
    provenance = provenance or {}
    support_rows, statistics_rows = torch.as_tensor(support_rows), torch.as_tensor(statistics_rows)
    return {
        name: RelativeProjector.from_anchor_set(
            anchor_set,
            space[support_rows],
            Statistics.from_embeddings(space[statistics_rows]),
            similarity=similarity,
            **dict(provenance.get(name, {})),
        )
        for name, space in embeddings.items()
    }


def retrieval_matrix(
    relatives: Mapping[str, Tensor], *, ks: Sequence[int] = (1, 5)
) -> dict[str, dict[str, float]]:
    """``{"a->b": {"recall@1", "recall@5", "mrr"}}`` for every ordered pair of encoders: row i of
    a's relative features retrieves row i of b's by cosine (ties counted pessimistically)."""
    return {
        f"{a}->{b}": retrieval_metrics(relatives[a], relatives[b], ks=tuple(ks))
        for a in relatives
        for b in relatives
        if a != b
    }


def train_classifier(
    features: Tensor,
    labels: Tensor,
    *,
    num_labels: int,
    seed: int = 0,
    epochs: int = DEFAULT_HEAD_EPOCHS,
    **config: Any,
) -> RelativeHeadForClassification:
    """A linear head (LayerNorm + Linear) on features, trained with `HeadTrainer`."""
    torch.manual_seed(seed)
    head = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=features.shape[1], num_labels=num_labels, **config)
    )
    return train_in_memory(
        head,
        features,
        labels,
        num_train_epochs=epochs,
        learning_rate=3e-3,
        per_device_train_batch_size=128,
        seed=seed,
    )


def standardize(train: Tensor, *others: Tensor) -> tuple[Tensor, ...]:
    """Z-score features with the training rows' per-feature mean and std (absolute spaces
    carry large shifts that a per-row LayerNorm would turn into noise)."""
    mean, std = train.mean(dim=0), train.std(dim=0).clamp_min(1e-8)
    return tuple((x - mean) / std for x in (train, *others))


@torch.no_grad()
def head_f1(head: RelativeHeadForClassification, features: Tensor, labels: Tensor) -> float:
    """Weighted F1 of ``head``'s predictions on ``features``."""
    return weighted_f1(head(features).logits.argmax(dim=-1), labels)


def train_param_anchors(
    args: ParamTrainingArguments, spaces: Mapping[str, Tensor], support: Tensor
) -> AnchorSet:
    """PARAM anchors on the parallel ``spaces`` with the given support rows (one encoder:
    single-space losses only, the paper's PARAM Single), in memory: not saved (checkpoints, if
    ``args`` asks for them, go to a temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="relrep-param-") as folder:
        trainer = ParamTrainer(
            replace(args, output_dir=folder), dict(spaces), support_indices=support
        )
        return trainer.train(save=False)
