"""The model card of an anchor set: its encoders, retrieval and stitching scores, onboarding.

It is made from the anchor set's facts (the fields of ``anchor_set.json`` and the support
inputs), so it never needs the `AnchorSet` class; an `AnchorSet` object serves as well.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from huggingface_hub import ModelCard

from relrep_hf.anchors import ANCHOR_METHODS
from relrep_hf.publishing.cards import sections
from relrep_hf.publishing.cards.templates import card_data, render

__all__ = ["ANCHOR_SET_FACTS", "TAGS", "anchor_set_card", "anchor_set_facts", "encoder_names"]

TAGS = ["relrep_hf", "relative-representations", "zero-shot-stitching"]
ANCHOR_SET_FACTS = (
    "num_anchors",
    "support_size",
    "strategy",
    "encoders",
    "training",
    "metrics",
    "support_reference",
    "support",
    "repo_id",
)
"""What an anchor set's card reads: its ``anchor_set.json`` fields, support inputs and repo id."""


def anchor_set_facts(anchor_set: Any) -> dict[str, Any]:
    """``ANCHOR_SET_FACTS`` of an `AnchorSet` (read off its attributes) or of a mapping."""
    if isinstance(anchor_set, Mapping):
        facts = dict(anchor_set)
    else:
        facts = {key: getattr(anchor_set, key, None) for key in ANCHOR_SET_FACTS}
    for key in ("encoders", "support"):
        facts[key] = list(facts.get(key) or [])
    for key in ("training", "metrics"):
        facts[key] = dict(facts.get(key) or {})
    facts.setdefault("support_reference", None)
    facts["strategy"] = facts.get("strategy") or "param"
    return facts


def anchor_set_card(
    anchor_set: Any,
    *,
    repo_id: str | None = None,
    license: str = "unknown",
    heatmap: str | None = None,
) -> ModelCard:
    """The model card of an anchor set, from its encoders, training and metrics.

    Args:
        anchor_set: the anchor set's facts: an `AnchorSet`, or a mapping with the fields of its
            ``anchor_set.json`` and its ``support`` inputs (see `anchor_set_facts`).
        repo_id: its Hub repo (for the title and snippets); default its ``repo_id``.
        license: a Hub license id (``"unknown"`` unless told).
        heatmap: file name of the stitching heatmap committed beside the card (see
            `write_heatmap`); ``None`` shows no image.
    """
    facts = anchor_set_facts(anchor_set)
    repo_id = repo_id or facts.get("repo_id") or None
    metrics = facts["metrics"] or {}
    text_support = all(isinstance(item, str) for item in facts["support"])
    fallback = sections.support_dataset(facts["support_reference"], metrics.get("retrieval_rows"))
    order = encoder_names(facts)  # tables follow the encoders' order, not the JSON's
    retrieval = sections.parse_pairs(metrics.get("retrieval"), order)
    zero_shot = sections.parse_pairs(metrics.get("zero_shot"), order)
    retrieval_dataset = sections.dataset_record(
        metrics.get("retrieval_dataset") or metrics.get("dataset"), fallback
    )
    zero_shot_dataset = sections.dataset_record(
        metrics.get("zero_shot_dataset") or metrics.get("dataset"), fallback
    )
    task = "text-classification" if text_support else "image-classification"
    eval_results = [
        *sections.eval_results(
            retrieval, "feature-extraction", "Cross-encoder retrieval", retrieval_dataset
        ),
        *sections.eval_results(zero_shot, task, "Zero-shot stitching", zero_shot_dataset),
    ]
    encoder_ids = [
        _recorded(e, "encoder_id", "id") for e in facts["encoders"] if isinstance(e, dict)
    ]
    hub_encoders = [i for i in encoder_ids if sections.is_linkable_hub_id(i)]
    strategy = facts["strategy"]
    method = ANCHOR_METHODS.get(strategy)
    strategy_name = method.title if method else f"{strategy} anchors"
    anchor_description = method.anchor_description if method else "a mixture"
    tags = [*TAGS, "anchor-set", f"{strategy.replace('_', '-')}-anchors"]
    tags += method.tags if method else ()
    data = card_data(
        repo_id or "anchor-set",
        base_model=hub_encoders or None,
        tags=tags,
        datasets=sections.hub_datasets(retrieval_dataset, zero_shot_dataset, fallback),
        license=license,
        eval_results=eval_results,
    )
    fields = {
        "title": sections.card_title(repo_id, "Anchor set"),
        "strategy_name": strategy_name,
        "anchor_description": anchor_description,
        "num_anchors": str(facts["num_anchors"]),
        "support_size": str(facts["support_size"]),
        "encoders_table": _encoders_table(facts["encoders"]),
        "retrieval_section": _retrieval_section(retrieval, retrieval_dataset, heatmap),
        "zero_shot_section": _zero_shot_section(zero_shot, zero_shot_dataset),
        "onboarding_snippet": _onboarding_snippet(facts, repo_id, text_support),
        "support_section": _support_section(facts, text_support),
        "training_table": sections.key_value_table(
            {"strategy": strategy, **_training_rows(facts["training"])},
            "No training hyperparameters recorded.",
            header=("hyperparameter", "value"),
        ),
    }
    return render("anchor_set.md", data, fields)


def _retrieval_section(
    retrieval: dict[str, Any], dataset: dict[str, Any], heatmap: str | None
) -> str:
    """The cross-encoder retrieval table, and the heatmap below it when one was committed."""
    section = sections.pairs_section(
        retrieval,
        dataset,
        query="Queries embedded by",
        key="retrieved among",
        empty="No cross-encoder retrieval was measured (the anchor set was trained on fewer than "
        "two encoders).",
        note="Row i of one encoder's relative features retrieves row i of the other's among all "
        "rows.",
    )
    if retrieval and heatmap:
        label = sections.metric_label(sections.heatmap_metric(retrieval))
        section += f"\n\n![Retrieval between the encoders, {label}]({heatmap})"
    return section


def _zero_shot_section(zero_shot: dict[str, Any], dataset: dict[str, Any]) -> str:
    return sections.pairs_section(
        zero_shot,
        dataset,
        query="Head trained on",
        key="evaluated on",
        empty="No zero-shot stitching score was recorded with this anchor set.",
        note="A head trained on one encoder's relative features classifies another's, with no "
        "retraining.",
    )


def _training_rows(training: Mapping[str, Any]) -> dict[str, Any]:
    """The training hyperparameters, sorted; how the whitening's shrinkage was chosen as one
    readable row ("0.3, chosen by cross-validation among 0, 0.01, ...")."""
    rows = dict(sorted(training.items()))
    selection = rows.pop("shrinkage_selection", None)
    if isinstance(selection, Mapping):
        chosen, method = selection.get("chosen"), selection.get("method", "")
        candidates = ", ".join(sorted(selection.get("scores", {}), key=float))
        rows["whitening shrinkage"] = (
            f"{chosen}, chosen from the fit rows by {method} among {candidates}"
            if candidates
            else f"{chosen} ({method})"
        )
    return rows


def _recorded(encoder: Mapping[str, Any], key: str, old_key: str) -> str:
    """An encoder's recorded field: ``anchor_set.json`` writes the projector's names
    (``encoder_id``, ``encoder_revision``); files of older versions wrote ``id``, ``revision``."""
    return str(encoder.get(key) or encoder.get(old_key) or "")


def _encoders_table(encoders: Sequence[Any]) -> str:
    rows = []
    for encoder in encoders:
        if not isinstance(encoder, Mapping):
            continue
        encoder_id = _recorded(encoder, "encoder_id", "id")
        revision = _recorded(encoder, "encoder_revision", "revision")
        rows.append(
            [
                f"`{encoder.get('name', '')}`",
                sections.repo_link(encoder_id, "", "(unrecorded)"),
                f"`{revision}`" if revision else "",
                str(encoder.get("pooling") or ""),
                str(encoder.get("layer", "")),
                str(encoder.get("dim", "")),
            ]
        )
    if not rows:
        return "No encoders were recorded."
    return sections.markdown_table(["name", "encoder", "revision", "pooling", "layer", "dim"], rows)


def encoder_names(facts: Mapping[str, Any]) -> list[str]:
    return [str(e["name"]) for e in facts["encoders"] if isinstance(e, Mapping) and e.get("name")]


def _onboarding_snippet(facts: Mapping[str, Any], repo_id: str | None, text_support: bool) -> str:
    repo = repo_id or "path/to/this/anchor_set"
    pooling = next(
        (
            str(e["pooling"])
            for e in facts["encoders"]
            if isinstance(e, Mapping) and e.get("pooling")
        ),
        "mean",
    )
    lines = [
        "import datasets",
        "from transformers import AutoModel, "
        + ("AutoTokenizer" if text_support else "AutoImageProcessor"),
        "from relrep_hf import AnchorSet, RelativeProjector",
        "from relrep_hf.encoding.extraction import embeddings_tensor, extract_embeddings",
        "",
        f"anchor_set = AnchorSet.from_pretrained({json.dumps(repo)})",
        'encoder = AutoModel.from_pretrained("your-org/your-encoder")',
    ]
    if text_support:
        lines += [
            'tokenizer = AutoTokenizer.from_pretrained("your-org/your-encoder")',
            'support = datasets.Dataset.from_dict({"text": anchor_set.support})',
            f'support = extract_embeddings(encoder, tokenizer, support, pooling="{pooling}")',
        ]
    else:
        reference = facts["support_reference"] or {}
        column = reference.get("column", "image")
        lines += [
            'processor = AutoImageProcessor.from_pretrained("your-org/your-encoder")',
            f"rows = datasets.load_dataset({json.dumps(reference.get('dataset_id', 'org/dataset'))}, "
            f"split={json.dumps(reference.get('split', 'train'))}, "
            f"revision={sections.python_literal(reference.get('revision'))})",
            'support = rows.select([item["index"] for item in anchor_set.support])',
            f"support = extract_embeddings(encoder, processor, support, column={json.dumps(column)}, "
            f'pooling="{pooling}")',
        ]
    lines += [
        "support_embeddings = embeddings_tensor(support)",
        "# Whitening statistics: embed as many in-domain inputs as you can (here: the support).",
        "projector = RelativeProjector.from_anchor_set(anchor_set, support_embeddings, "
        f'support_embeddings, encoder_id="your-org/your-encoder", pooling="{pooling}")',
    ]
    return "\n".join(lines)


def _support_section(facts: Mapping[str, Any], text_support: bool) -> str:
    k = facts["support_size"]
    if text_support:
        examples = "\n".join(f"- {sections.shorten(str(t))}" for t in facts["support"][:3])
        return f'{k} texts, in `support.jsonl` (one `{{"text": ...}}` per line). The first:\n\n{examples}'
    reference = facts["support_reference"] or {}
    if reference.get("dataset_id"):
        details = ", ".join(
            f"{key} `{reference[key]}`"
            for key in ("split", "column", "revision")
            if reference.get(key)
        )
        return (
            f"{k} rows of the dataset `{reference['dataset_id']}` ({details}), referenced by "
            "index in `support.jsonl`."
        )
    return f"{k} inputs, referenced in `support.jsonl`."
