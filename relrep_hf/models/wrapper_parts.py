"""A `RelativeWrapper`'s parts: loaded with their provenance, checked, saved with it.

`RelativeWrapper.from_pretrained` takes each part (encoder, preprocessor, projector) as a Hub
id, a local folder (for the encoder, also a GGUF file in it) or a loaded object;
`load_wrapper_parts` turns them into loaded parts, with what the wrapper cannot read off a
loaded model: the encoder's commit (from the Hub cache) and, for a GGUF file, its name and
quantisation. Whether the parts belong together is asked when the wrapper composes them (the
checks below): the preprocessor reads the encoder's modality, the projector takes the encoder's
embedding size, the pooling and layer are the ones the projector was built on, and the encoder is
the one (id and revision) it records. A wrong embedding size is always an error; the other
mismatches are errors unless ``strict=False``, which makes them warnings. On saving, `projector_with_provenance` writes what the wrapper knows (pooling,
encoder id and commit, GGUF file) into the projector's config where it records nothing yet.
"""

from __future__ import annotations

import copy
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedConfig, PreTrainedTokenizerBase
from transformers.image_processing_utils import BaseImageProcessor

from relrep_hf.encoding import Pooling
from relrep_hf.encoding.encoders import cached_commit, load_preprocessor
from relrep_hf.encoding.gguf_encoders import gguf_provenance, load_gguf_tokenizer
from relrep_hf.encoding.models import InputModality, embedding_config
from relrep_hf.encoding.pooling import validate_pooling
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.utils.hub_files import LOCAL_PREFIX, is_commit_hash
from relrep_hf.utils.local_paths import check_local_path

__all__ = [
    "LoadOptions",
    "check_encoder_identity",
    "check_hidden_size",
    "check_preprocessor",
    "load_wrapper_parts",
    "mismatch",
    "projector_and_recorded_encoder",
    "projector_with_provenance",
    "recorded_encoder",
    "resolve_pooling_and_layer",
]

# encoder kinds whose embeddings no transformers model gives (encoding/encoder_kinds.py)
_NOT_LOADABLE_KINDS = ("callable", "precomputed")


@dataclass(frozen=True)
class LoadOptions:
    """How `RelativeWrapper.from_pretrained` loads the parts it is given by id or folder (its
    docstring documents each option); ``hub_kwargs`` go with every download."""

    dtype: torch.dtype | str | None = None
    device: torch.device | str | None = None
    revision: str | None = None
    projector_revision: str | None = None
    tokenizer: PreTrainedTokenizerBase | None = None
    image_processor: BaseImageProcessor | None = None
    gguf_file: str | None = None
    hub_kwargs: dict[str, Any] = field(default_factory=dict)


def load_wrapper_parts(
    encoder: str | os.PathLike | nn.Module,
    projector: str | os.PathLike | RelativeProjector,
    options: LoadOptions,
) -> tuple[nn.Module, RelativeProjector, Any, str | None, dict[str, str]]:
    """The parts `RelativeWrapper.from_pretrained` composes, loaded (its docstring documents the
    arguments and errors).

    Returns:
        ``(encoder, projector, preprocessor, encoder_revision, encoder_gguf)``: the encoder's
        commit when it was loaded from the Hub (else ``None``), and its GGUF file and
        quantisation (``{}`` without a GGUF file).
    """
    revision, gguf_file, hub_kwargs = options.revision, options.gguf_file, options.hub_kwargs
    tokenizer = options.tokenizer
    encoder_revision, gguf = None, {}
    if gguf_file is not None and not isinstance(encoder, (str, os.PathLike)):
        raise ValueError("gguf_file names a file in the encoder's folder or Hub repo: pass the "
                         "encoder as that folder or repo id, not as a loaded model.")  # fmt: skip
    for path in (encoder, projector):
        check_local_path(path)  # "the folder does not exist", not a Hub id error
    if isinstance(encoder, (str, os.PathLike)):
        source = str(encoder)
        load_kwargs = {**hub_kwargs, **({"gguf_file": gguf_file} if gguf_file else {})}
        model = AutoModel.from_pretrained(
            source, revision=revision, dtype=options.dtype, **load_kwargs
        )
        encoder_revision = cached_commit(source, revision, hub_kwargs.get("cache_dir"))
        if gguf_file:
            gguf = gguf_provenance(source, gguf_file, revision, **hub_kwargs)
            encoder_revision = gguf.pop("encoder_revision", None) or encoder_revision
            if tokenizer is None:
                tokenizer = load_gguf_tokenizer(source, gguf_file, revision, **hub_kwargs)
    elif isinstance(encoder, nn.Module):
        source = str(getattr(getattr(encoder, "config", None), "name_or_path", "") or "")
        model = encoder if options.dtype in (None, "auto") else encoder.to(options.dtype)
    else:
        raise ValueError(
            f"encoder must be a Hub id, a local folder or a loaded model, got "
            f"{type(encoder).__name__}."
        )
    preprocessor = tokenizer if tokenizer is not None else options.image_processor
    if preprocessor is None:
        preprocessor = load_preprocessor(
            model,
            source,
            revision if isinstance(encoder, (str, os.PathLike)) else None,
            hub_kwargs,
        )
    if isinstance(projector, (str, os.PathLike)):
        projector = RelativeProjector.from_pretrained(
            projector, revision=options.projector_revision, **hub_kwargs
        )
    if options.device is not None:
        model.to(options.device)
        projector.to(options.device)
    return model, projector, preprocessor, encoder_revision, gguf


def projector_and_recorded_encoder(
    projector: str | os.PathLike | RelativeProjector,
    revision: str | None,
    gguf_file: str | None,
    projector_revision: str | None,
    hub_kwargs: dict[str, Any],
) -> tuple[RelativeProjector, str, str | None, str | None]:
    """``(projector, encoder_id, revision, gguf_file)`` for a projector given alone: loaded (if
    given by id or folder), and the encoder it records, where ``revision`` and ``gguf_file``
    given explicitly win over the recorded ones (see `recorded_encoder`)."""
    source = str(projector) if isinstance(projector, (str, os.PathLike)) else "the projector"
    if isinstance(projector, (str, os.PathLike)):
        check_local_path(projector)
        projector = RelativeProjector.from_pretrained(
            projector, revision=projector_revision, **hub_kwargs
        )
    if not isinstance(projector, RelativeProjector):
        raise ValueError(
            f"Given one argument, RelativeWrapper.from_pretrained takes a projector (a Hub id, "
            f"a folder or a RelativeProjector), got {type(projector).__name__}. To pass an "
            "encoder, pass its projector too: RelativeWrapper.from_pretrained(encoder, projector)."
        )
    encoder_id, recorded_revision, recorded_gguf = recorded_encoder(projector.config, source)
    return (
        projector,
        encoder_id,
        revision or recorded_revision or None,
        gguf_file or recorded_gguf or None,
    )


def recorded_encoder(
    config: PreTrainedConfig, source: str, *, what: str = "projector", fix: str = ""
) -> tuple[str, str, str]:
    """``(encoder_id, revision, gguf_file)`` of the encoder a projector (or a text classifier)
    records, to load it from that artifact alone (as ``AutoPeftModel`` reads its base model from
    the adapter's config).

    Raises:
        ValueError: it records no loadable encoder (built from embeddings the user supplied, a
            local folder, a callable); the message ends with ``fix`` (default: the wrapper's
            two-argument form).
    """
    encoder_id = str(getattr(config, "encoder_id", "") or "")
    kind = str(getattr(config, "encoder_kind", "") or "")
    fix = fix or (
        f"Pass the encoder it was built on: RelativeWrapper.from_pretrained(encoder, {source!r}) "
        "(a Hub id, a local folder or a loaded model)."
    )
    if kind in _NOT_LOADABLE_KINDS:
        raise ValueError(
            f"The {what} at {source!r} was built on a {kind} encoder "
            f"({getattr(config, 'encoder_source', '') or 'unnamed'}), which no transformers "
            f"model gives. {fix}"
        )
    if not encoder_id:
        raise ValueError(
            f"The {what} at {source!r} records no encoder (it was built from embeddings you "
            f"supplied, or from a local model), so it cannot load one. {fix}"
        )
    if encoder_id.startswith(LOCAL_PREFIX):  # a local folder's record (publishing.provenance)
        raise ValueError(
            f"The {what} at {source!r} records the local folder {encoder_id!r} as its encoder, "
            f"not a Hub id, so it cannot load it. {fix}"
        )
    revision = str(getattr(config, "encoder_revision", "") or "")
    gguf_file = str(getattr(config, "encoder_gguf_file", "") or "")
    return encoder_id, revision, gguf_file


def projector_with_provenance(
    projector: RelativeProjector,
    *,
    pooling: Pooling,
    encoder_id: str | None,
    encoder_revision: str | None,
    encoder_gguf: dict[str, str],
) -> RelativeProjector:
    """The projector, or a shallow copy of it whose config also records what the wrapper knows
    (its pooling, the encoder's Hub id and commit, its GGUF file) where it records nothing."""
    config = projector.config
    fill = {}
    if not config.encoder_gguf_file and encoder_gguf:
        fill.update(encoder_gguf)
    if not config.pooling:
        fill["pooling"] = pooling
    if not config.encoder_id and encoder_id:
        fill["encoder_id"] = encoder_id
        if not config.encoder_revision and encoder_revision:
            fill["encoder_revision"] = encoder_revision
    if not fill:
        return projector
    projector = copy.copy(projector)  # shares the tensors, not the config
    projector.config = copy.deepcopy(config)
    for name, value in fill.items():
        setattr(projector.config, name, value)
    return projector


def saved_tokenizer(name_or_path: str | os.PathLike, kwargs: dict, hub_kwargs: dict) -> Any:
    """The tokenizer saved beside the classifier, or None when the folder has none."""
    folder = Path(name_or_path)
    if folder.is_dir() and not (folder / "tokenizer_config.json").is_file():
        return None
    try:
        return AutoTokenizer.from_pretrained(
            name_or_path, revision=kwargs.get("revision"), **hub_kwargs
        )
    except (OSError, ValueError, KeyError):
        return None


# ---- whether the parts belong together ------------------------------------------------------


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
