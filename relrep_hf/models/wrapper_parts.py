"""A `RelativeWrapper`'s parts in and out: loaded with their provenance, saved with it.

`RelativeWrapper.from_pretrained` takes each part (encoder, preprocessor, projector) as a Hub
id, a local folder (for the encoder, also a GGUF file in it) or a loaded object;
`load_wrapper_parts` turns them into loaded parts, with what the wrapper cannot read off a
loaded model: the encoder's commit (from the Hub cache) and, for a GGUF file, its name and
quantisation. Whether the parts belong together is `wrapper_checks`' question, asked when the
wrapper composes them. On saving, `projector_with_provenance` writes what the wrapper knows (pooling,
encoder id and commit, GGUF file) into the projector's config where it records nothing yet.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, PreTrainedTokenizerBase
from transformers.image_processing_utils import BaseImageProcessor

from relrep_hf.encoding import Pooling
from relrep_hf.encoding.encoders import cached_commit, load_preprocessor
from relrep_hf.encoding.gguf_encoders import gguf_provenance, load_gguf_tokenizer
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.utils.local_paths import check_local_path

__all__ = ["LoadOptions", "load_wrapper_parts", "projector_with_provenance"]


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
