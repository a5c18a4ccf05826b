"""Writing cards into folders: ``README.md`` (and an anchor set's heatmap) beside the artifact.

`write_folder_card` reads the facts of the artifact saved in a folder (``anchor_set.json`` and
``support.jsonl``, or ``config.json`` through ``transformers.AutoConfig``, and a head's
``metrics.json``, or ``migration_map.safetensors``); it is what an artifact's ``save_pretrained`` reaches through
`relrep_hf.utils.publishing_hooks`, and what every push runs. It never touches the network.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from relrep_hf.publishing.cards import sections
from relrep_hf.publishing.cards.anchor_set_card import (
    anchor_set_card,
    anchor_set_facts,
    encoder_names,
)
from relrep_hf.publishing.cards.classifier_card import classifier_card
from relrep_hf.publishing.cards.head_card import HEAD_METRICS_NAME, head_card
from relrep_hf.publishing.cards.heatmap import HEATMAP_NAME, write_heatmap
from relrep_hf.publishing.cards.migration_map_card import (
    MIGRATION_MAP_FILE,
    migration_map_card,
    read_migration_map_facts,
)
from relrep_hf.publishing.cards.projector_card import projector_card
from relrep_hf.publishing.cards.templates import MARKER
from relrep_hf.utils.file_checks import read_json_file

__all__ = [
    "README_NAME",
    "is_generated_card",
    "read_anchor_set_facts",
    "write_card",
    "write_folder_card",
]

README_NAME = "README.md"


def write_card(
    artifact: Any,
    folder: str | os.PathLike,
    *,
    repo_id: str | None = None,
    metrics: Mapping[str, Any] | None = None,
) -> Path:
    """Write the card of ``artifact`` (an anchor set or its facts, a projector, a head, or a
    config) as README.md.

    For an anchor set with cross-encoder retrieval, ``stitching_heatmap.png`` is written too
    (skipped, with a warning, when matplotlib is missing). ``metrics`` are a head's evaluation.
    Returns the README's path.
    """
    folder = Path(folder)
    model_type = getattr(getattr(artifact, "config", artifact), "model_type", None)
    if model_type == "relative_projector":
        card = projector_card(artifact, repo_id=repo_id)
    elif model_type == "relative_head":
        card = head_card(artifact, repo_id=repo_id, metrics=metrics)
    elif model_type == "relative_classifier":
        card = classifier_card(artifact, repo_id=repo_id)
    elif isinstance(artifact, Mapping) or hasattr(artifact, "support"):
        facts = anchor_set_facts(artifact)
        heatmap = _write_heatmap(facts, folder)
        card = anchor_set_card(facts, repo_id=repo_id, heatmap=heatmap)
    else:
        raise ValueError(
            f"No model card for {type(artifact).__name__} (model_type {model_type!r}): cards "
            "exist for AnchorSet, RelativeProjector and RelativeHeadForClassification."
        )
    path = folder / README_NAME
    card.save(path)
    return path


def _write_heatmap(facts: Mapping[str, Any], folder: Path) -> str | None:
    """The heatmap of an anchor set's retrieval beside its card; its file name, or None."""
    retrieval = facts["metrics"].get("retrieval")
    if not sections.parse_pairs(retrieval):
        return None
    try:
        write_heatmap(retrieval, folder / HEATMAP_NAME, encoders=encoder_names(facts))
    except ImportError:
        warnings.warn(
            "matplotlib is not installed: the anchor set's card has no stitching heatmap (pip "
            "install matplotlib).",
            UserWarning,
            stacklevel=3,
        )
        return None
    return HEATMAP_NAME


def write_folder_card(folder: str | os.PathLike, *, repo_id: str | None = None) -> Path | None:
    """Write the card of the artifact saved in ``folder``, read from its files (no network).

    A README.md that relrep_hf did not generate (its marker line removed) is kept as it is.
    Returns the README's path, or ``None`` when the folder holds no artifact or the README
    was kept.
    """
    folder = Path(folder)
    readme = folder / README_NAME
    if readme.is_file() and not is_generated_card(readme.read_text(encoding="utf-8")):
        return None
    if (folder / "anchor_set.json").is_file():
        return write_card(read_anchor_set_facts(folder), folder, repo_id=repo_id)
    if (folder / MIGRATION_MAP_FILE).is_file():
        migration_map_card(read_migration_map_facts(folder), repo_id=repo_id).save(readme)
        return readme
    if not (folder / "config.json").is_file():
        return None
    model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    if model_type not in ("relative_projector", "relative_head", "relative_classifier"):
        return None
    from transformers import AutoConfig  # here: an anchor set's or a map's card needs none

    config = AutoConfig.from_pretrained(folder)  # the saved fields, with the class's defaults
    metrics_path = folder / HEAD_METRICS_NAME
    metrics = None
    if model_type == "relative_head" and metrics_path.is_file():
        metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    return write_card(config, folder, repo_id=repo_id, metrics=metrics)


def read_anchor_set_facts(folder: Path) -> dict[str, Any]:
    """The facts an anchor set's card shows, from ``anchor_set.json`` and ``support.jsonl``."""
    source = str(folder)
    description = read_json_file(folder / "anchor_set.json", what="anchor set", source=source)
    support = []
    with open(folder / "support.jsonl", encoding="utf-8") as file:
        for line in file:
            if line.strip():
                row = json.loads(line)
                support.append(row["text"] if set(row) == {"text"} else row)
    return anchor_set_facts({**description, "support": support})


def is_generated_card(text: str) -> bool:
    """Whether a README.md was generated by relrep_hf (and may be regenerated)."""
    return MARKER in text
