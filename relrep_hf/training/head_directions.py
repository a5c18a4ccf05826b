"""How many of the shared directions a head reads, chosen by leave-one-encoder-out transfer.

The shared linear closed form orders its m directions, most shared first; the later ones are
shared less, and a head that leans on them transfers worse to an encoder it never saw. Given
several encoders' relative features of the same labelled rows, `choose_num_directions` trains
the head on every encoder but one (on 80% of the rows), scores it on the held-out encoder's
other 20% (weighted F1), and keeps the number of leading features whose mean score over the
held-out encoders is highest. The number applies to any anchor set: for one whose features
are not ordered it is a number of anchors, chosen the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import mean
from typing import Any

import torch
from torch import Tensor, nn

from relrep_hf.functional.metrics import weighted_f1
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.utils.validation import check_same_device

__all__ = [
    "DIRECTION_CANDIDATES",
    "DIRECTION_TOLERANCE",
    "VALIDATION_FRACTION",
    "choose_num_directions",
]

DIRECTION_CANDIDATES: tuple[int, ...] = (16, 32, 48, 64, 96, 128, 192, 256)  # and m itself
# the most directions scoring within this (weighted F1) of the best: with two training encoders
# the score is one leave-one-out pair, and the best alone chose too few (docs/heads.md: the
# three-encoder fold 0.968 -> 1.018 of Abs at K = 4,000; every floor met on every run measured)
DIRECTION_TOLERANCE = 0.005
VALIDATION_FRACTION = 0.2  # rows scored on the held-out encoder, never trained on


def candidates_for(num_anchors: int, grid: Sequence[int] = DIRECTION_CANDIDATES) -> list[int]:
    """The grid's numbers below ``num_anchors``, and ``num_anchors`` itself."""
    return sorted({*(c for c in grid if c < num_anchors), num_anchors})


def choose_num_directions(
    config: RelativeHeadConfig,
    features: Mapping[str, Tensor],
    labels: Tensor,
    *,
    training: Mapping[str, Any],
    grid: Sequence[int] = DIRECTION_CANDIDATES,
    seed: int = 0,
    tolerance: float = DIRECTION_TOLERANCE,
) -> tuple[int, dict[str, Any]]:
    """``(number of directions, record)`` chosen by leave-one-encoder-out head transfer.

    Args:
        config: the head's config (its layers, dropout and labels; ``num_directions`` ignored).
        features: ``{encoder: [N, m]}`` relative features of the same N labelled rows (>= 2).
        labels: class indices ``[N]``.
        training: ``learning_rate``, ``weight_decay``, ``num_train_epochs``,
            ``per_device_train_batch_size`` and ``max_grad_norm`` of the head's training.
        grid: candidate numbers (those below m are tried, and m).
        seed: the row split and the heads' initialisation.
        tolerance: keep the most directions whose score is within this of the best
            (`DIRECTION_TOLERANCE`; 0: the best score, ties to the fewer directions).

    The record holds the candidates, each one's mean held-out weighted F1 and the encoders.
    """
    names = list(features)
    if len(names) < 2:
        raise ValueError(
            f"Choosing the number of directions needs the features of 2 or more encoders, got "
            f"{len(names)}: pass {{encoder: features}} of the same labelled rows."
        )
    check_same_device(labels=labels, **{f"{name!r} features": features[name] for name in names})
    n = len(labels)
    generator = torch.Generator().manual_seed(seed)  # on the CPU: the same split on any device
    order = torch.randperm(n, generator=generator).to(labels.device)
    held_rows = order[: max(1, round(VALIDATION_FRACTION * n))]
    fit_rows = order[len(held_rows) :]
    if len(fit_rows) == 0:
        raise ValueError(f"Choosing the number of directions needs 2 or more rows, got {n}.")
    scores: dict[int, float] = {}
    for r in candidates_for(config.num_anchors, grid):
        per_encoder = []
        for held_out in names:
            sources = [features[name][fit_rows] for name in names if name != held_out]
            head = _fit_head(config, r, torch.cat(sources), labels[fit_rows].repeat(len(sources)),
                             training, seed)  # fmt: skip
            with torch.no_grad():
                predicted = head.logits_of(features[held_out][held_rows]).argmax(dim=-1)
            per_encoder.append(weighted_f1(predicted, labels[held_rows]))
        scores[r] = mean(per_encoder)
    chosen = max(scores, key=lambda r: (scores[r], -r))  # ties: the fewer directions
    if tolerance > 0:
        chosen = max(r for r, score in scores.items() if score >= scores[chosen] - tolerance)
    record = {
        "chosen": chosen,
        "held_out_weighted_f1": {str(r): round(s, 6) for r, s in scores.items()},
        "encoders": names,
        "validation_rows": len(held_rows),
        "rule": "leave one encoder out: head on the others' rows, weighted F1 on its held rows",
        "tolerance": tolerance,  # the most directions scoring within it of the best are kept
    }
    return chosen, record


def _fit_head(
    config: RelativeHeadConfig,
    num_directions: int,
    features: Tensor,
    labels: Tensor,
    training: Mapping[str, Any],
    seed: int,
) -> RelativeHeadForClassification:
    """A head reading ``num_directions`` features, trained as `HeadTrainer` trains it (AdamW,
    linear decay, decay on the Linear weights only) in a plain loop, for speed."""
    torch.manual_seed(seed)
    kwargs = {**config.to_dict(), "num_directions": num_directions, "direction_selection": None}
    head = RelativeHeadForClassification(RelativeHeadConfig(**_config_fields(kwargs)))
    head.to(features.device)  # trained where the features are
    decay = [p for name, p in head.named_parameters() if name.endswith("weight") and p.ndim == 2]
    rest = [
        p for name, p in head.named_parameters() if not (name.endswith("weight") and p.ndim == 2)
    ]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": training["weight_decay"]},
         {"params": rest, "weight_decay": 0.0}],
        lr=training["learning_rate"],
    )  # fmt: skip
    batch = training["per_device_train_batch_size"]
    steps = training["num_train_epochs"] * -(-len(labels) // batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / steps)
    generator = torch.Generator().manual_seed(seed)
    head.train()
    for _ in range(training["num_train_epochs"]):
        # drawn on the CPU, where the seeded generator is: the same batches on every device
        order = torch.randperm(len(labels), generator=generator).to(features.device)
        for rows in order.split(batch):
            loss = nn.functional.cross_entropy(head.logits_of(features[rows]), labels[rows])
            optimizer.zero_grad()
            loss.backward()
            if training.get("max_grad_norm"):
                nn.utils.clip_grad_norm_(head.parameters(), training["max_grad_norm"])
            optimizer.step()
            schedule.step()
    return head.eval()


def _config_fields(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A config dict without what `PreTrainedConfig.to_dict` adds and the constructor rejects."""
    return {k: v for k, v in kwargs.items() if k not in ("model_type", "transformers_version")}
