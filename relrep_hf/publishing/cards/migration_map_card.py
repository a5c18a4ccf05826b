"""The model card of a migration map: what it moves, from which rows, every candidate's recall.

Built from the saved file alone (``migration_map.safetensors``: its tensors' shapes and the
``info`` in its metadata), like every card here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard
from safetensors import safe_open

from relrep_hf.functional.markdown_tables import markdown_table
from relrep_hf.publishing.cards.templates import MARKER, card_data

__all__ = ["migration_map_card", "read_migration_map_facts"]

MIGRATION_MAP_FILE = "migration_map.safetensors"
TAGS = ["relrep_hf", "embedding-migration"]


def read_migration_map_facts(folder: Path) -> dict[str, Any]:
    """``info`` (source, target, rows, folds, chosen, cv_recall, evaluation) and the map's
    ``in_features`` and ``out_features``, from ``folder/migration_map.safetensors``."""
    with safe_open(str(folder / MIGRATION_MAP_FILE), framework="numpy") as file:
        metadata = file.metadata() or {}
        in_features, out_features = file.get_slice("weight").get_shape()
    info = json.loads(metadata.get("info", "{}"))
    return {"info": info, "in_features": in_features, "out_features": out_features}


def _held_out_lines(info: Mapping[str, Any]) -> list[str]:
    """The held-out report (migrate, bridge, re-embed: Recall@1 and retention@10 against
    re-embedding) and its recommendation, where the map was fitted with one."""
    held_out, advice = info.get("held_out") or {}, info.get("recommendation") or {}
    rows = [
        [name, f"{v['recall@1']:.4f}", f"{v['retention@10']:.4f}"]
        for name, v in held_out.items()
        if isinstance(v, Mapping) and "recall@1" in v and "retention@10" in v
    ]
    lines = []
    if rows:
        lines += [
            "",
            "Measured on held-out rows, new-encoder queries (the re-embedded corpus is",
            "the reference; retention@10: the share of its top-10 neighbours found too):",
            "",
        ]
        lines += [markdown_table(["search", "Recall@1", "retention@10"], rows)]
    if advice.get("action"):
        lines += ["", f"**Recommendation: {advice['action']}** ({advice.get('reason', '')})."]
    return lines


def migration_map_card(facts: Mapping[str, Any], *, repo_id: str | None = None) -> ModelCard:
    """The card of a migration map, from `read_migration_map_facts`' facts. Written here rather
    than from a ``model_cards/`` template: it is one table and a snippet."""
    info = facts["info"]
    source = info.get("source") or "the old encoder"
    target = info.get("target") or "the new encoder"
    chosen = info.get("chosen", "?")
    retention = info.get("cv_retention@10") or {}
    candidates = [
        [f"{name}{' (chosen)' if name == chosen else ''}", f"{recall:.4f}"]
        + ([f"{retention[name]:.4f}" if name in retention else "-"] if retention else [])
        for name, recall in (info.get("cv_recall") or {}).items()
    ]
    columns = ["candidate", "cross-validated Recall@1"]
    columns += ["cross-validated retention@10"] if retention else []
    lines = [
        "---",
        card_data(repo_id or "migration-map", tags=TAGS).to_yaml(),
        "---",
        f"<!-- {MARKER}: pushes regenerate this card. Delete this line to keep your edits. -->",
        "",
        f"# Migration map: {source} -> {target}",
        "",
        f"One affine map from {source}'s {facts['in_features']}-d space into {target}'s "
        f"{facts['out_features']}-d space, so vectors stored with the old encoder join a corpus "
        "of the new one without re-embedding. Fitted with `relrep_hf.fit_migration` on "
        f"{info.get('rows', '?')} paired rows; the candidate chosen by {info.get('folds', '?')}-"
        f"fold cross-validation: **{chosen}**.",
        "",
        markdown_table(columns, candidates),
    ]
    lines += _held_out_lines(info)
    evaluation = info.get("evaluation")
    if evaluation:
        lines += [
            "",
            "Measured on held-out rows (Recall@1; the re-embedded corpus is the reference):",
            "",
            markdown_table(
                ["corpus", "Recall@1"], [[n, f"{v:.4f}"] for n, v in evaluation.items()]
            ),
        ]
    lines += [
        "",
        "```python",
        "from relrep_hf.migration.map import MigrationMap",
        "",
        f'migration_map = MigrationMap.from_pretrained("{repo_id or "REPO_OR_FOLDER"}")',
        "new_vectors = migration_map.apply(old_vectors)  # NumPy [N, d_old] -> [N, d_new]",
        "```",
        "",
        "Or stream a whole store: `relrep-hf migrate MAP --vectors OLD_STORE --out NEW_STORE`.",
        "",
    ]
    return ModelCard("\n".join(lines))
