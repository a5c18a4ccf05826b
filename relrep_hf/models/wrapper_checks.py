"""Whether an encoder, its preprocessor and a `RelativeProjector` belong together.

`RelativeWrapper` runs these checks when it composes its parts: the preprocessor reads the
encoder's modality, the projector takes the encoder's embedding size, the pooling and layer
are the ones the projector was built on, and the encoder is the one (id and revision) it
records. A wrong embedding size is always an error; the other mismatches are errors unless
``strict=False``, which makes them warnings.
"""

from __future__ import annotations

import warnings
from typing import Any

from torch import nn
from transformers import PreTrainedConfig, PreTrainedTokenizerBase
from transformers.image_processing_utils import BaseImageProcessor

from relrep_hf.encoding import InputModality, Pooling, embedding_config, validate_pooling
from relrep_hf.utils.hub_files import is_commit_hash

__all__ = [
    "check_encoder_identity",
    "check_hidden_size",
    "check_preprocessor",
    "mismatch",
    "resolve_pooling_and_layer",
]


def check_preprocessor(encoder: nn.Module, preprocessor: Any, modality: InputModality) -> None:
    """A tokenizer for a text model, an image processor for an image model."""
    name = type(encoder).__name__
    if modality == "image" and not isinstance(preprocessor, BaseImageProcessor):
        raise ValueError(
            f"{name} reads images, so it needs an image processor, got "
            f"{type(preprocessor).__name__}. Pass image_processor=AutoImageProcessor"
            f".from_pretrained(...) (or save one beside the model)."
        )
    if modality == "text" and not isinstance(preprocessor, PreTrainedTokenizerBase):
        raise ValueError(
            f"{name} reads text, so it needs a tokenizer, got {type(preprocessor).__name__}. "
            f"Pass tokenizer=AutoTokenizer.from_pretrained(...)."
        )


def check_hidden_size(
    encoder: nn.Module, projector_config: PreTrainedConfig, modality: InputModality
) -> None:
    """The projector takes the size of the embeddings the encoder pools (always an error)."""
    size = getattr(embedding_config(encoder, modality), "hidden_size", None)
    expected = projector_config.hidden_size
    if isinstance(size, int) and size != expected:
        raise ValueError(
            f"The projector takes {expected}-dimensional embeddings but "
            f"{type(encoder).__name__} pools {size}-dimensional ones: the projector was built "
            f"for another encoder. Load the projector of this encoder (or build one with "
            f"RelativeProjector.from_anchor_set)."
        )


def resolve_pooling_and_layer(
    encoder: nn.Module,
    projector_config: PreTrainedConfig,
    pooling: Pooling | None,
    layer: int | None,
    modality: InputModality,
    strict: bool,
) -> tuple[Pooling, int]:
    """The pooling and layer to run: the requested ones, checked against the projector's."""
    recorded_pooling = projector_config.pooling
    recorded_layer = projector_config.layer
    if pooling is None:
        if not recorded_pooling:
            raise ValueError(
                "The projector does not record the pooling its statistics were computed with: "
                "pass pooling='mean', 'cls' or 'last' (the one used to build it)."
            )
        pooling = recorded_pooling
    validate_pooling(pooling)
    if recorded_pooling and pooling != recorded_pooling:
        mismatch(
            f"The projector was built on {recorded_pooling!r}-pooled embeddings, but pooling="
            f"{pooling!r} was requested: its statistics and anchors do not describe them.",
            strict,
        )
    if layer is None:
        layer = recorded_layer
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise ValueError(f"layer must be an int (e.g. -1 for the last), got {layer!r}.")
    if not _same_layer(layer, recorded_layer, _layer_count(encoder, modality)):
        mismatch(
            f"The projector was built on the hidden states of layer {recorded_layer}, but "
            f"layer={layer} was requested: its statistics and anchors do not describe them.",
            strict,
        )
    return pooling, layer


def check_encoder_identity(
    projector_config: PreTrainedConfig, encoder_id: str, encoder_revision: str, strict: bool
) -> None:
    """The encoder the projector records, against the one given, where both are known."""
    recorded_id = projector_config.encoder_id
    if recorded_id and encoder_id and recorded_id != encoder_id:
        mismatch(
            f"The projector was built for encoder {recorded_id!r}, but the encoder is "
            f"{encoder_id!r}. Load the projector of this encoder.",
            strict,
        )
        return
    recorded = projector_config.encoder_revision
    # A branch name and a commit cannot be compared; two commits (or two names) can.
    comparable = is_commit_hash(recorded) == is_commit_hash(encoder_revision or "")
    if recorded and encoder_revision and comparable and recorded != encoder_revision:
        mismatch(
            f"The projector was built for revision {recorded!r} of {recorded_id or 'its encoder'}, "
            f"but revision {encoder_revision!r} was loaded. Load the encoder with "
            f"revision={recorded!r}.",
            strict,
        )


def mismatch(message: str, strict: bool) -> None:
    """An error naming ``strict=False``, or with ``strict=False`` a warning."""
    if strict:
        raise ValueError(f"{message} Pass strict=False to override it on purpose.")
    warnings.warn(message, UserWarning, stacklevel=4)


def _layer_count(encoder: nn.Module, modality: InputModality) -> int | None:
    """Entries of the encoder's ``hidden_states`` tuple (embeddings + layers), if known."""
    layers = getattr(embedding_config(encoder, modality), "num_hidden_layers", None)
    return layers + 1 if isinstance(layers, int) and not isinstance(layers, bool) else None


def _same_layer(a: int, b: int, count: int | None) -> bool:
    if count is not None and -count <= a < count and -count <= b < count:
        return a % count == b % count
    return a == b
