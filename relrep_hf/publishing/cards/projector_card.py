"""The model card of a relative projector: its encoder, anchor set, similarity, and usage.

Made from the projector's config (a `RelativeProjectorConfig`, or anything with its fields, such
as a `RelativeProjector`, whose ``config`` is read).
"""

from __future__ import annotations

import json
from typing import Any

from huggingface_hub import ModelCard

from relrep_hf.publishing.cards import sections
from relrep_hf.publishing.cards.anchor_set_card import TAGS
from relrep_hf.publishing.cards.templates import card_data, render

__all__ = ["projector_card"]

_SIMILARITIES = {
    "cosine": "cosine similarities",
    "inner": "inner products",
    "euclidean": "Euclidean distances",
    "l1": "L1 distances",
    "linf": "L-infinity distances",
}


def projector_card(
    projector: Any, *, repo_id: str | None = None, license: str = "unknown"
) -> ModelCard:
    """The model card of a `RelativeProjector` (or of its config).

    Args:
        projector: a `RelativeProjector` or `RelativeProjectorConfig`.
        repo_id: its Hub repo (for the title and snippets).
        license: a Hub license id (``"unknown"`` unless told).
    """
    config = getattr(projector, "config", projector)
    encoder_id = config.encoder_id or ""
    similarity = config.similarity
    tags = [*TAGS, "relative-projector"]
    tags.append("whitened-inner-product" if similarity == "wip" else f"{similarity}-similarity")
    data = card_data(
        repo_id or "relative-projector",
        base_model=encoder_id if sections.is_linkable_hub_id(encoder_id) else None,
        tags=tags,
        license=license,
        pipeline_tag="feature-extraction",
    )
    repo = repo_id or "path/to/this/projector"
    m, d = config.num_anchors, config.hidden_size
    # a projector built from the user's own embeddings records neither (`layer` keeps its
    # default): the card says so rather than claim the last layer
    layer_text = _layer(config, "hidden layer unrecorded", "last hidden layer", "hidden layer {}")
    from relrep_hf.encoding.pooling import POOLING_DESCRIPTIONS  # here: imports transformers

    pooling_text = POOLING_DESCRIPTIONS.get(config.pooling, config.pooling or "pooling unrecorded")
    fields = {
        "title": sections.card_title(
            repo_id, f"Relative projector of {encoder_id or 'an encoder'}"
        ),
        "encoder_link": sections.repo_link(encoder_id, config.encoder_revision, "the encoder"),
        "pooling_description": f"{pooling_text} ({layer_text})",
        "hidden_size": str(d),
        "num_anchors": str(m),
        "similarity_description": _similarity_description(config),
        "anchor_set_link": sections.repo_link(
            config.anchor_set_id, config.anchor_set_revision, "(unrecorded)"
        ),
        "wrapper_snippet": _wrapper_snippet(config, repo),
        "remote_code_snippet": (
            "from transformers import AutoModel\n\n"
            f"projector = AutoModel.from_pretrained({json.dumps(repo)}, trust_remote_code=True)\n"
            f"relative = projector(embeddings)  # [N, {d}] -> [N, {m}]"
        ),
        "config_table": _config_table(config),
    }
    return render("projector.md", data, fields)


def _similarity_description(config: Any) -> str:
    if config.similarity == "wip":
        return f"whitened inner products (WIP, shrinkage {config.shrinkage})"
    return _SIMILARITIES.get(config.similarity, f"{config.similarity} similarities")


def _wrapper_snippet(config: Any, repo: str) -> str:
    """Loading the encoder with this projector and encoding two sentences."""
    gguf_file = getattr(config, "encoder_gguf_file", "")
    gguf_argument = f", gguf_file={json.dumps(gguf_file)}" if gguf_file else ""
    encoder = json.dumps(_encoder_argument(config.encoder_id or ""))
    return (
        "from relrep_hf import RelativeWrapper\n\n"
        f"wrapper = RelativeWrapper.from_pretrained({encoder}, "
        f"{json.dumps(repo)}{gguf_argument})\n"
        f'relative = wrapper.encode(["A first sentence.", "A second one."])  # [2, {config.num_anchors}]'
    )


def _config_table(config: Any) -> str:
    """Every setting of the projector, the encoder's kind, source and GGUF file when known."""
    gguf_file = getattr(config, "encoder_gguf_file", "")
    return sections.key_value_table(
        {
            "encoder": config.encoder_id or "(unrecorded)",
            **(
                {"encoder kind": config.encoder_kind} if getattr(config, "encoder_kind", "") else {}
            ),
            **(
                {"encoder source": config.encoder_source}
                if getattr(config, "encoder_source", "")
                else {}
            ),
            "encoder revision": config.encoder_revision or "(unrecorded)",
            **(
                {
                    "encoder GGUF file": gguf_file,
                    "quantisation": config.encoder_quantization or "(unrecorded)",
                }
                if gguf_file
                else {}
            ),
            "pooling": config.pooling or "(unrecorded)",
            "hidden layer": _layer(config, "(unrecorded)", "-1 (last)", "{0} ({0})"),
            "embedding size d": config.hidden_size,
            "anchors m": config.num_anchors,
            "similarity": config.similarity,
            "shrinkage": config.shrinkage,
            "eps": config.eps,
            "statistics estimated on": f"{config.statistics_count} embeddings",
            "anchor set": config.anchor_set_id or "(unrecorded)",
            "anchor set revision": config.anchor_set_revision or "(unrecorded)",
        },
        "",
    )


def _layer(config: Any, unrecorded: str, last: str, other: str) -> str:
    """The hidden layer in words: ``unrecorded`` when the pooling is (the layer then is too)."""
    if not config.pooling:
        return unrecorded
    return last if config.layer == -1 else other.format(config.layer)


def _encoder_argument(encoder_id: str) -> str:
    if sections.is_linkable_hub_id(encoder_id):
        return encoder_id
    name = encoder_id.split(":", 1)[-1] if encoder_id else "encoder"
    return f"path/to/{name}"
