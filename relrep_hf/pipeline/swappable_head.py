"""The run's swappable head: one head on every training encoder's relative features.

`relrep_hf.pipeline.run_evaluation.evaluate` trains it with `HeadTrainer` at its defaults on the
training encoders' features of the train rows (``{encoder: features}``: rows stacked, the
number of directions chosen by leave-one-encoder-out transfer among them), saves it under
``heads/swappable`` (pushed as ``<repo>-head-swappable``) and scores it on every encoder's
test rows: on a held-out encoder the score is zero-shot, and is shown as a fraction of that
encoder's own absolute-space classifier (Abs.).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from relrep_hf.evaluation.stitching_steps import head_f1
from relrep_hf.evaluation.zero_shot import Method, ZeroShotStitching
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    write_head_metrics,
)
from relrep_hf.training.head_trainer import train_in_memory

SWAPPABLE = "swappable"  # its folder under heads/


def swappable_head(
    stitching: ZeroShotStitching,
    method: Method,
    training: Sequence[str],
    *,
    id2label: dict[int, str] | None,
    seed: int = 0,
) -> tuple[RelativeHeadForClassification, list[dict[str, Any]]]:
    """``(head, rows)``: the head trained on ``training``'s features under ``method``, and for
    every encoder ``{"encoder", "setting", "weighted F1", "Abs.", "of Abs."}``."""
    features = {n: stitching.features(method, n, source=n, target=n)[0] for n in training}
    labels = stitching.data[training[0]].train_labels
    projector = method.anchors[training[0]]
    torch.manual_seed(seed)
    config = RelativeHeadConfig.for_projector(
        projector, num_labels=stitching.num_labels, **({"id2label": id2label} if id2label else {})
    )
    head = RelativeHeadForClassification(config)
    train_in_memory(head, features, labels, seed=seed)
    rows = []
    for name in stitching.names:
        test = stitching.features(method, name, source=name, target=name)[1]
        f1 = head_f1(head, test, stitching.data[name].test_labels)
        own = stitching.absolute_f1(name)
        rows.append(
            {
                "encoder": name,
                "setting": "trained on" if name in training else "zero-shot",
                "weighted F1": f1,
                "Abs.": own,
                "of Abs.": f1 / own if own else float("nan"),
            }
        )
    return head, rows


def save_swappable_head(
    run_dir: Path,
    run: dict[str, Any],
    head: RelativeHeadForClassification,
    rows: list[dict[str, Any]],
    *,
    anchor_set_id: str,
    training: Sequence[str],
) -> Path:
    """Save the head under ``heads/swappable`` with its scores (``metrics.json``, its card)."""
    ids = {e["name"]: e.get("encoder_id") or e["name"] for e in run["encoders"]}
    head.config.anchor_set_id = anchor_set_id
    head.config.source_encoder_id = ", ".join(ids[n] for n in training)
    head.config.source_encoder_revision = ""
    folder = run_dir / "heads" / SWAPPABLE
    head.save_pretrained(folder)
    write_head_metrics(
        folder,
        {row["encoder"]: {"weighted_f1": row["weighted F1"]} for row in rows},
        dataset={
            "id": run["dataset"]["id"],
            "split": f"{run['dataset']['split']}, held-out test rows",
        },
        source_encoder=", ".join(n for n in training),
    )
    return folder


def publish_swappable_head(
    run_dir: Path,
    run: dict[str, Any],
    stitching: ZeroShotStitching,
    method: Method,
    training: Sequence[str],
    anchor_set: Any,
) -> list[dict[str, Any]]:
    """Train, score and save the run's swappable head (`swappable_head`, `save_swappable_head`);
    its rows for the report."""
    id2label = stitching.head_config.get("id2label")
    head, rows = swappable_head(
        stitching, method, training, id2label=id2label, seed=run.get("fit", {}).get("seed", 0)
    )
    save_swappable_head(
        run_dir, run, head, rows, anchor_set_id=anchor_set.repo_id, training=training
    )
    return rows
