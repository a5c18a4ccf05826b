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

from relrep_hf.functional.tables import markdown_table
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


def migration_map_card(facts: Mapping[str, Any], *, repo_id: str | None = None) -> ModelCard:
    """The card of a migration map, from `read_migration_map_facts`' facts. Written here rather
    than from a ``model_cards/`` template: it is one table and a snippet."""
    info = facts["info"]
    source = info.get("source") or "the old encoder"
    target = info.get("target") or "the new encoder"
    chosen = info.get("chosen", "?")
    candidates = [
        [f"{name}{' (chosen)' if name == chosen else ''}", f"{recall:.4f}"]
        for name, recall in (info.get("cv_recall") or {}).items()
    ]
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
        f"fold cross-validated Recall@1: **{chosen}**.",
        "",
        markdown_table(["candidate", "cross-validated Recall@1"], candidates),
    ]
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
