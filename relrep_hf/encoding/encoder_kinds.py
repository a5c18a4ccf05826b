"""The registry of encoder kinds: how a spec is read, embedded, described and listed in --help.

Like `relrep_hf.anchors`: each kind of encoder a run can take is declared once,
here, as an `EncoderKind`, and `parse_encoder`, the pipeline's embed and onboard steps and the
``--encoder`` help read the registry instead of branching on kinds. A new kind is one entry
(`register_encoder_kind`). This module is light to import (``relrep-hf --help`` reads the help
lines); torch and transformers come with a parse or an embedding.

Any spec may end in ``#COLUMN``: the dataset column this encoder reads (e.g. one language of a
parallel corpus: ``py:relrep_hf.encoding.packaged_encoders:use_multilingual#de``).

>>> [kind.name for kind in ENCODER_KINDS.values()]
['transformers', 'gguf', 'sentence-transformers', 'callable', 'precomputed']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relrep_hf.utils.defaults import DEFAULT_EMBED_BATCH_SIZE
from relrep_hf.utils.registry import Registry

if TYPE_CHECKING:
    import datasets

__all__ = [
    "ENCODER_KINDS",
    "ENCODER_KINDS_HELP",
    "EmbedRequest",
    "Embedded",
    "EncoderKind",
    "embed_encoders",
    "encoder_kind",
    "encoder_kinds_help",
    "parse_encoder",
    "register_encoder_kind",
    "unregister_encoder_kind",
]

logger = logging.getLogger(__name__)

# name -> kind, in the order `--encoder` help lists them; the package's own kinds are
# registered at the bottom of this module
ENCODER_KINDS: Registry[EncoderKind] = Registry("encoder kind")


@dataclass(frozen=True)
class EmbedRequest:
    """What every kind embeds: the run's rows, the cache folder, texts per call, a progress bar,
    and where a transformers or GGUF model runs (``device``; None: where it loads, the CPU)."""

    data: datasets.Dataset
    cache_dir: Path
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE
    show_progress: bool | None = None
    device: str | None = None


@dataclass(frozen=True)
class Embedded:
    """One encoder's embeddings: its spec (pooling decided), ``data`` with an Arrow-backed
    ``embedding`` column, its provenance, and what else its run.json record holds."""

    spec: Any
    dataset: datasets.Dataset
    provenance: dict[str, str]
    extra: dict[str, Any] = field(default_factory=dict)


# the specs of one load with the column each reads -> one `Embedded` each, in order
Embed = Callable[[Sequence[tuple[Any, str]], EmbedRequest], list[Embedded]]


@dataclass(frozen=True)
class EncoderKind:
    """One kind of encoder.

    Attributes:
        name: the ``encoder_kind`` its specs have (``spec.kind``) and runs, projectors and cards
            record.
        help: its phrase in ``--encoder`` help and in the errors of `parse_encoder`.
        parse: a spec's text (without ``#COLUMN``) -> a spec object with ``kind``, ``name``
            (folder-safe) and ``str()`` (the spec again); a ValueError says what is wrong.
        embed: the specs of one load and their columns -> their `Embedded`.
        prefix: specs ``PREFIX:...`` are this kind's; else ``matches`` tells; a kind with
            neither takes every spec no other kind claims.
        shared_load: specs with the same key share one load (``None``: each its own).
        describe: the provenance its records start with (`Embedded.provenance` adds to it).
        uses_device: its embedding runs a model on `EmbedRequest.device` (False: it reads no
            device, and a Ray encoder actor of it starts without importing torch to find one).
    """

    name: str
    help: str
    parse: Callable[[str], Any]
    embed: Embed
    prefix: str | None = None
    matches: Callable[[str], bool] | None = None
    shared_load: Callable[[Any], Hashable] | None = None
    describe: Callable[[Any], dict[str, str]] = lambda spec: {
        "encoder_kind": spec.kind,
        "encoder_source": str(spec),
    }
    uses_device: bool = True


def encoder_kinds_help() -> str:
    """The kinds a spec may name, for ``--encoder`` help and errors, from the registry."""
    phrases = [kind.help for kind in ENCODER_KINDS.values()]
    listed = f"{', '.join(phrases[:-1])}, or {phrases[-1]}" if len(phrases) > 1 else phrases[0]
    return f"{listed}; any of them + '#COLUMN' to read another dataset column"


def encoder_kind(name: str) -> EncoderKind:
    """The registered kind ``name``; a ValueError lists the registered names."""
    return ENCODER_KINDS.lookup(name)


def register_encoder_kind(kind: EncoderKind) -> EncoderKind:
    """Add ``kind`` to the registry: `parse_encoder`, the pipeline and the help then take it.
    A ValueError if its name or its prefix is taken."""
    return ENCODER_KINDS.register(kind, prefix=kind.prefix)


def unregister_encoder_kind(name: str) -> EncoderKind:
    """Take kind ``name`` out of the registry (a ValueError if it is not registered)."""
    return ENCODER_KINDS.unregister(name)


def parse_encoder(spec: str) -> tuple[Any, str | None]:
    """Any encoder spec (see the registry) and the column it reads (``None``: the run's
    column). Raises ValueError naming the kinds accepted."""
    text, hash_sign, column = spec.strip().partition("#")
    if hash_sign and not column:
        raise ValueError(f"Invalid encoder spec {spec!r}: nothing after '#'. Expected SPEC#COLUMN.")
    return _kind_of(text).parse(text), column or None


def _kind_of(text: str) -> EncoderKind:
    """The kind a spec's text names: by its prefix, else the first that matches, else the one
    that takes the rest."""
    kinds = list(ENCODER_KINDS.values())
    prefix = text.partition(":")[0]
    by_prefix = [k for k in kinds if k.prefix is not None and k.prefix == prefix]
    matching = [k for k in kinds if k.prefix is None and k.matches and k.matches(text)]
    rest = [k for k in kinds if k.prefix is None and k.matches is None]
    candidates = [*by_prefix, *matching, *rest]
    if not candidates:
        raise ValueError(f"Invalid encoder spec {text!r}. Accepted kinds: {encoder_kinds_help()}.")
    return candidates[0]


def embed_encoders(
    specs: Sequence[Any], columns: Sequence[str], request: EmbedRequest
) -> list[Embedded]:
    """Each spec's `Embedded`, in order, each reading its column of ``request.data``; specs of
    one model (several layers / poolings) share one load and one forward pass per column."""
    loads: dict[Hashable, list[int]] = {}
    for i, spec in enumerate(specs):
        kind = encoder_kind(spec.kind)
        key = (kind.name, kind.shared_load(spec)) if kind.shared_load else (kind.name, i)
        loads.setdefault(key, []).append(i)
    results: dict[int, Embedded] = {}
    for (name, _), indices in loads.items():
        kind = encoder_kind(name)
        embedded = kind.embed([(specs[i], columns[i]) for i in indices], request)
        for i, one in zip(indices, embedded, strict=True):
            provenance = {**kind.describe(specs[i]), **one.provenance}
            results[i] = Embedded(one.spec, one.dataset, provenance, one.extra)
    return [results[i] for i in range(len(specs))]


# ---------------------------------------------------------------------------------------------
# The kinds of the package
# ---------------------------------------------------------------------------------------------


def _parse_model(text: str) -> Any:
    from relrep_hf.encoding.encoders import EncoderSpec

    try:
        return EncoderSpec.parse(text)
    except ValueError as error:
        if str(error).startswith("Invalid encoder spec"):
            raise ValueError(f"{error} Accepted kinds: {encoder_kinds_help()}.") from error
        raise


def _names_gguf(text: str) -> bool:
    """A GGUF file, or ``smollm2`` (`encoders.BUNDLED_SMOLLM2`, not imported: this module is light)."""
    model_id = re.split(r"[@:]", text, maxsplit=1)[0]
    return "=" not in model_id and (model_id.lower().endswith(".gguf") or model_id == "smollm2")


def _embed_model(group: Sequence[tuple[Any, str]], request: EmbedRequest) -> list[Embedded]:
    """One load of the model, one forward pass per column for all its layers and poolings; a
    GGUF encoder whose views are all cached is not loaded at all (`view_index`)."""
    from relrep_hf.encoding.encoders import gguf_file_path
    from relrep_hf.encoding.extraction_writer import cache_root
    from relrep_hf.encoding.view_index import index_views, load_identity, view_record

    if not group[0][0].gguf_file:
        return _load_and_embed(group, request)
    root = cache_root(request.cache_dir)
    identity = load_identity(group, request.data, gguf_file_path(group[0][0]))
    found = _indexed(root, identity, group, request)
    if found is not None:
        return found
    results = _load_and_embed(group, request)
    records = [
        view_record(one.spec, _folder(one.dataset), one.provenance, one.extra) for one in results
    ]
    index_views(root, identity, records)
    return results


def _indexed(
    root: Path, identity: str, group: Sequence[tuple[Any, str]], request: EmbedRequest
) -> list[Embedded] | None:
    """The views an earlier load of the same identity wrote, read back; None on a miss."""
    from relrep_hf.encoding.encoders import EncoderSpec
    from relrep_hf.encoding.extraction import read_extracted
    from relrep_hf.encoding.view_index import indexed_views

    records = indexed_views(root, identity)
    if records is None or len(records) != len(group):
        return None
    return [
        Embedded(
            EncoderSpec(*record["spec"]),
            read_extracted(root / record["folder"], request.data),
            record["provenance"],
            record["extra"],
        )
        for record in records
    ]


def _folder(embedded: datasets.Dataset) -> Path:
    """The cache folder an extracted dataset's ``embedding`` column was read from."""
    files = [f["filename"] for f in embedded.cache_files]
    return Path(next(f for f in files if f.endswith("embeddings.arrow"))).parent


def _load_and_embed(group: Sequence[tuple[Any, str]], request: EmbedRequest) -> list[Embedded]:
    """One load of the model, one forward pass per column for all its layers and poolings."""
    from relrep_hf.encoding.encoders import (
        architecture,
        extraction_id,
        load_encoder,
        resolve_pooling,
    )
    from relrep_hf.encoding.extraction import extract_embedding_views

    model, tokenizer, provenance = load_encoder(group[0][0], request.cache_dir)
    if request.device is not None:
        model = model.to(request.device)
    specs = [resolve_pooling(spec, model) for spec, _ in group]
    results: dict[int, Embedded] = {}
    for read in dict.fromkeys(column for _, column in group):
        members = [i for i, (_, column) in enumerate(group) if column == read]
        logger.info(
            "Embedding %d rows with %s", len(request.data), [str(specs[i]) for i in members]
        )
        views = extract_embedding_views(
            model,
            tokenizer,
            request.data,
            views=[(specs[i].pooling, specs[i].layer) for i in members],
            column=read,
            batch_size=request.batch_size,
            cache_dir=request.cache_dir,
            encoder_id=extraction_id(specs[members[0]], provenance),
            encoder_revision=provenance["encoder_revision"],
            show_progress=request.show_progress,
        )
        for i, embedded in zip(members, views, strict=True):
            results[i] = Embedded(
                specs[i], embedded, provenance, {"architecture": architecture(model)}
            )
    return [results[i] for i in range(len(group))]


def _model_load(spec: Any) -> Hashable:
    return (spec.model_id, spec.revision, spec.gguf_file)


def _array_kind(name: str, prefix: str, help: str, pattern: str) -> EncoderKind:
    """A kind of `ArraySpec` named ``PREFIX:SOURCE``, its source matching ``pattern``."""

    def parse(text: str) -> Any:
        from relrep_hf.encoding.encoders import ArraySpec

        rest = text.partition(":")[2]
        if not re.fullmatch(pattern, rest):
            raise ValueError(
                f"Invalid encoder spec {text!r}: expected 'st:FOLDER_OR_ID' or "
                f"'py:module:function'. Accepted kinds: {encoder_kinds_help()}."
            )
        return ArraySpec(name, rest)

    return EncoderKind(
        name=name, help=help, parse=parse, embed=_embed_arrays, prefix=prefix, uses_device=False
    )


def _parse_precomputed(text: str) -> Any:
    from relrep_hf.encoding.encoders import ArraySpec

    label, _, path = text.partition("=")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", label) or not path:
        raise ValueError(
            f"Invalid precomputed embeddings {text!r}: expected NAME=PATH with a folder-safe "
            f"NAME (letters, digits, '_', '.', '-'). Accepted kinds: {encoder_kinds_help()}."
        )
    return ArraySpec("precomputed", path, label)


def _embed_arrays(group: Sequence[tuple[Any, str]], request: EmbedRequest) -> list[Embedded]:
    """`array_encoders.array_embeddings` of each spec."""
    from relrep_hf.encoding.array_encoders import array_embeddings

    results = []
    for spec, column in group:
        embedded, provenance = array_embeddings(
            spec,
            request.data,
            column=column,
            cache_dir=request.cache_dir,
            batch_size=request.batch_size,
            show_progress=request.show_progress,
        )
        results.append(Embedded(spec, embedded, provenance))
    return results


def _kind_only(spec: Any) -> dict[str, str]:
    return {"encoder_kind": spec.kind}


_PACKAGE_KINDS = (
    EncoderKind(
        name="transformers",
        help="a transformers model ID[@REVISION][:POOLING][:LAYER] ('minilm:mean', 'gpt2:last:6')",
        parse=_parse_model,
        embed=_embed_model,
        shared_load=_model_load,
        describe=_kind_only,
    ),
    EncoderKind(
        name="gguf",
        help="a GGUF file REPO_ID/FILE.gguf or path/to/FILE.gguf ('smollm2:last' is the "
        "packaged SmolLM2-135M)",
        parse=_parse_model,
        embed=_embed_model,
        matches=_names_gguf,
        shared_load=_model_load,
        describe=_kind_only,
    ),
    _array_kind(
        "sentence-transformers", "st", "a sentence-transformers model 'st:FOLDER_OR_ID'", r".+"
    ),
    _array_kind(
        "callable",
        "py",
        "a Python callable 'py:module:function' (texts -> [N, d] array)",
        r"[\w.]+:[\w.]+",
    ),
    EncoderKind(
        name="precomputed",
        help="precomputed embeddings NAME=FILE (.npy, .safetensors or a datasets folder; "
        "--embeddings)",
        parse=_parse_precomputed,
        embed=_embed_arrays,
        matches=lambda text: "=" in text,
        uses_device=False,
    ),
)
for _kind in _PACKAGE_KINDS:
    register_encoder_kind(_kind)
# what `relrep-hf embed --encoder` lists (the package's own kinds)
ENCODER_KINDS_HELP = encoder_kinds_help()
