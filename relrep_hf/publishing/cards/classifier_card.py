"""The model card of a text classifier across encoders: the encoder it loads, its labels, the
anchor set its projector and head share, and how to run it in ``transformers.pipeline``.

Built from the saved ``config.json`` alone (through the config, read with ``AutoConfig``), like
every card here.
"""

from __future__ import annotations

import json
from typing import Any

from huggingface_hub import ModelCard

from relrep_hf.functional.markdown_tables import markdown_table
from relrep_hf.publishing.cards.templates import MARKER, card_data

__all__ = ["classifier_card"]

TAGS = ["relrep_hf", "relative-representations", "text-classification"]


def classifier_card(config: Any, *, repo_id: str | None = None) -> ModelCard:
    """The card of a `RelativeModelForSequenceClassification` (its config, or the model)."""
    config = getattr(config, "config", config)
    projector, head = config.projector, config.head
    encoder = config.encoder_id or "(unrecorded)"
    revision = f" at commit `{config.encoder_revision}`" if config.encoder_revision else ""
    anchor_set = config.anchor_set_id or "(unrecorded)"
    source = head.get("source_encoder_id") or "(unrecorded)"
    labels = [[str(i), str(name)] for i, name in sorted(config.id2label.items())]
    name = json.dumps(repo_id or "REPO_OR_FOLDER")
    base = {"base_model": config.encoder_id} if _is_hub_id(config.encoder_id) else {}
    lines = [
        "---",
        card_data(
            repo_id or "relative-classifier", tags=TAGS, pipeline_tag="text-classification", **base
        ).to_yaml(),
        "---",
        f"<!-- {MARKER}: pushes regenerate this card. Delete this line to keep your edits. -->",
        "",
        f"# Text classifier through {encoder}",
        "",
        f"Text goes through the encoder **{encoder}**{revision} (not stored here: it is loaded by "
        f"name), pooled by {projector.get('pooling') or '(unrecorded)'} at hidden layer "
        f"{projector.get('layer', -1)}, projected onto {projector.get('num_anchors')} anchors of "
        f"the anchor set {anchor_set} ({projector.get('similarity')} similarity), and classified "
        f"by a head trained on the relative features of {source}. The head speaks the anchor "
        "set, not the encoder: it was not retrained for this one (zero-shot stitching).",
        "",
        markdown_table(["id", "label"], labels),
        "",
        "```python",
        "from transformers import pipeline",
        "",
        f'classify = pipeline("text-classification", model={name}, trust_remote_code=True)',
        'classify(["A sentence to label."], top_k=None)',
        "```",
        "",
        "With relrep_hf installed, `trust_remote_code` is not needed after `import relrep_hf`, "
        f"and `RelativeModelForSequenceClassification.from_pretrained({name})` loads it too.",
        "",
    ]
    return ModelCard("\n".join(lines))


def _is_hub_id(value: str) -> bool:
    return bool(value) and not value.startswith("local:") and value.count("/") <= 1
