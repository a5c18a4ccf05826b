"""The model card of a relative head: what it classifies, on which features, and how well.

Made from the head's config (a `RelativeHeadConfig`, or anything with its fields, such as the
head, whose ``config`` is read) and its evaluation, ``metrics.json`` beside its weights::

    {"dataset": {"id": "org/data", "split": "test"},
     "results": {"<encoder id or name>": {"accuracy": .., "f1": ..}, ...},
     "source_encoder": "<key of the head's own encoder>"}            # optional

The row of the head's source encoder (``source_encoder``, else the config's
``source_encoder_id``) is its in-distribution score; the others are zero-shot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from huggingface_hub import EvalResult, ModelCard

from relrep_hf.models.artifact_types import HEAD_METRICS_NAME
from relrep_hf.publishing.cards import sections
from relrep_hf.publishing.cards.anchor_set_card import TAGS
from relrep_hf.publishing.cards.templates import card_data, render

__all__ = ["HEAD_METRICS_NAME", "head_card"]


def head_card(
    head: Any,
    *,
    metrics: Mapping[str, Any] | None = None,
    repo_id: str | None = None,
    license: str = "unknown",
) -> ModelCard:
    """The model card of a `RelativeHeadForClassification` (or of its config).

    Args:
        head: the head or its `RelativeHeadConfig`.
        metrics: its evaluation (the ``metrics.json`` format in the module docstring).
        repo_id: its Hub repo (for the title and snippets).
        license: a Hub license id (``"unknown"`` unless told).
    """
    config = getattr(head, "config", head)
    metrics = dict(metrics or {})
    results = {
        str(encoder): dict(values)
        for encoder, values in (metrics.get("results") or {}).items()
        if isinstance(values, Mapping)
    }
    dataset = sections.dataset_record(
        metrics.get("dataset"), {"type": "custom", "name": "evaluation data"}
    )
    source = str(metrics.get("source_encoder") or config.source_encoder_id or "")
    sources = {name.strip() for name in source.split(",")}  # a swappable head: several
    id2label = {int(k): v for k, v in (config.id2label or {}).items()}
    data = card_data(
        repo_id or "relative-head",
        tags=[*TAGS, "relative-head", "text-classification"],
        license=license,
        datasets=sections.hub_datasets(dataset),
        eval_results=_eval_results(results, sources, dataset),
    )
    fields = {
        "title": sections.card_title(repo_id, "Relative head"),
        "head_description": _head_description(config),
        "source_encoder_link": sections.repo_link(
            source, config.source_encoder_revision, "an encoder"
        ),
        "anchor_set_link": sections.repo_link(
            config.anchor_set_id, config.anchor_set_revision, "(unrecorded)"
        ),
        "similarity": config.similarity or "unrecorded",
        "usage_snippet": _usage_snippet(repo_id or "path/to/this/head"),
        "labels_table": sections.markdown_table(
            ["id", "label"], [[str(i), str(id2label[i])] for i in sorted(id2label)]
        )
        if id2label
        else "No labels recorded.",
        "metrics_section": _metrics_section(results, sources, dataset),
        "config_table": _config_table(config, source),
    }
    return render("head.md", data, fields)


def _setting(encoder: str, sources: set[str]) -> str:
    return "trained on" if encoder in sources else "zero-shot"


def _eval_results(
    results: dict[str, dict[str, Any]], sources: set[str], dataset: dict[str, Any]
) -> list[EvalResult]:
    """The card's ``model-index``: each encoder's scores, its own as classification, the
    others' as zero-shot stitching."""
    return [
        EvalResult(
            task_type="text-classification",
            task_name="Zero-shot stitching" if encoder not in sources else "Classification",
            metric_type=sections.metric_type(name),
            metric_name=f"{sections.metric_label(name)} ({encoder}, {_setting(encoder, sources)})",
            metric_value=values[name],
            metric_args=sections.metric_args(name),
            **sections.dataset_fields(dataset),
        )
        for encoder, values in results.items()
        for name in sections.metric_names([values])
    ]


def _head_description(config: Any) -> str:
    """The head's layers and what it reads, in words."""
    hidden = list(config.hidden_sizes)
    description = (f"an MLP with hidden sizes {hidden}" if hidden else "a linear probe") + (
        ", after a LayerNorm of the features" if config.normalize_input else ""
    )
    return description + _directions_text(config)


def _usage_snippet(repo: str) -> str:
    return (
        "from relrep_hf import RelativeWrapper\n\n"
        "# any encoder with a projector of the same anchor set\n"
        'wrapper = RelativeWrapper.from_pretrained("org/encoder-projector")  # its encoder too\n'
        f"classifier = wrapper.with_head({json.dumps(repo)})\n"
        'classifier.predict(["A first sentence.", "A second one."])\n\n'
        "# in transformers.pipeline:\n"
        "from relrep_hf import RelativeModelForSequenceClassification\n"
        "from transformers import pipeline\n\n"
        "model = RelativeModelForSequenceClassification.from_wrapper(\n"
        f"    wrapper, {json.dumps(repo)}\n"
        ")\n"
        'pipeline("text-classification", model=model, tokenizer=wrapper.tokenizer)\n\n'
        "# the head alone, with transformers only (relative features in, logits out):\n"
        "from transformers import AutoModelForSequenceClassification\n\n"
        f"head = AutoModelForSequenceClassification.from_pretrained({json.dumps(repo)}, "
        "trust_remote_code=True)"
    )


def _metrics_section(
    results: dict[str, dict[str, Any]], sources: set[str], dataset: dict[str, Any]
) -> str:
    """A table of each encoder's scores, or a line saying none was recorded."""
    if not results:
        return f"No evaluation was recorded with this head (`{HEAD_METRICS_NAME}`)."
    names = sections.metric_names(results.values())
    rows = [
        [
            f"`{encoder}`",
            _setting(encoder, sources),
            *(sections.number_cell(values.get(n)) for n in names),
        ]
        for encoder, values in results.items()
    ]
    header = ["encoder", "setting", *(sections.metric_label(n) for n in names)]
    return f"On {sections.dataset_text(dataset)}:\n\n{sections.markdown_table(header, rows)}"


def _config_table(config: Any, source: str) -> str:
    hidden = list(config.hidden_sizes)
    return sections.key_value_table(
        {
            "anchors m": config.num_anchors,
            "features read": getattr(config, "num_directions", None) or "all m",
            "labels": config.num_labels,
            "hidden sizes": hidden or "none (linear probe)",
            "activation": config.activation,
            "dropout": config.dropout,
            "input LayerNorm": config.normalize_input,
            "similarity": config.similarity or "(unrecorded)",
            "anchor set": config.anchor_set_id or "(unrecorded)",
            "anchor set revision": config.anchor_set_revision or "(unrecorded)",
            "source encoder": source or "(unrecorded)",
            "source encoder revision": config.source_encoder_revision or "(unrecorded)",
        },
        "",
    )


def _directions_text(config: Any) -> str:
    """What the head reads of the m features, and why (its ``direction_selection``)."""
    read = getattr(config, "num_directions", None)
    if not read or (
        read == config.num_anchors and not getattr(config, "direction_selection", None)
    ):
        return ""
    text = f"; it reads the first {read} of the {config.num_anchors} relative features"
    selection = getattr(config, "direction_selection", None) or {}
    scores = selection.get("held_out_weighted_f1") or {}
    if scores:
        tried = ", ".join(f"{r}: {float(f1):.3f}" for r, f1 in scores.items())
        encoders = ", ".join(f"`{n}`" for n in selection.get("encoders", []))
        text += (
            f" (the shared linear closed form orders them, most shared first), chosen by "
            f"leave-one-encoder-out transfer among {encoders}: a head on the others' rows, "
            f"weighted F1 on the held-out encoder's {selection.get('validation_rows', '')} "
            f"held rows, mean over encoders, for each number tried ({tried})"
        )
        if selection.get("tolerance"):
            text += (
                f"; the most directions scoring within {selection['tolerance']} of the best kept"
            )
    return text
