"""GGUF encoders: small language models as llama.cpp users hold them, loaded by transformers.

transformers loads a GGUF file (``from_pretrained(folder_or_repo, gguf_file=FILE)``) by
dequantizing every tensor to float, for the architectures its GGUF integration maps (llama,
mistral, qwen2/3, gemma2/3, phi3, gpt2, t5, ...); the tokenizer is rebuilt from the file's
``tokenizer.ggml.*`` metadata where transformers can (sentencepiece and byte-level BPE
vocabularies), else it comes from the folder or repo beside the file.

An encoder spec names a GGUF file by its path: ``REPO_ID/FILE.gguf`` on the Hub (a file in a
subfolder: ``REPO_ID/SUBFOLDER/FILE.gguf``) or a local ``path/to/FILE.gguf``, followed as usual by
``[@REVISION][:POOLING][:LAYER]``, e.g. ``TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF/
tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf:last``. A projector built on a GGUF encoder records the file
and its quantisation (``encoder_gguf_file``, ``encoder_quantization``) beside the repo id and
revision: the same repo holds files of several quantisations, which embed differently.

transformers parses a GGUF file once for the config, once for the tokenizer and again for the
weights, and dequantizes every tensor (35 s of CPU for the packaged SmolLM2-135M, measured):
`load_gguf_encoder` parses it once for the three (`_one_parse_per_file`) and converts it once per
file version, saves the float model and its tokenizer as
an ordinary transformers folder in the library's cache (keyed by the file's path, size,
modification time and the transformers / gguf versions) and loads from there (0.7 s).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import struct
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import transformers
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedTokenizerBase
from transformers.utils import cached_file

from relrep_hf.utils.hub_files import snapshot_record

logger = logging.getLogger(__name__)

GGUF_SUFFIX = ".gguf"
CONVERTED_FOLDER = "gguf-converted"  # under the embedding cache root (`extraction_writer`)


def split_gguf_path(model_id: str) -> tuple[str, str | None]:
    """``(repo id or folder, GGUF file name or None)`` of an encoder id.

    ``path/to/model.gguf`` (an existing file) gives its folder and name; a Hub
    ``org/name/[sub/]model.gguf`` gives ``org/name`` and ``[sub/]model.gguf``. Ids that do not end
    in ``.gguf`` are returned as they are, with ``None``.
    """
    if not model_id.lower().endswith(GGUF_SUFFIX):
        return model_id, None
    if os.path.isfile(model_id):
        folder, name = os.path.split(os.path.abspath(model_id))
        return folder, name
    parts = model_id.strip("/").split("/")
    if len(parts) < 3 or os.path.exists(os.path.dirname(model_id) or "."):
        raise ValueError(
            f"GGUF encoder {model_id!r}: no such local file, and not a Hub path. Give a local "
            "path/to/FILE.gguf that exists, or REPO_ID/FILE.gguf (e.g. "
            "'TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF/tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf')."
        )
    return "/".join(parts[:2]), "/".join(parts[2:])


_CACHED_FILE_KWARGS = ("cache_dir", "force_download", "proxies", "token", "local_files_only")


def gguf_local_path(source: str, gguf_file: str, revision: str | None = None, **hub_kwargs) -> str:
    """The local path of ``gguf_file`` in folder or repo ``source`` (the Hub cache's copy)."""
    hub_kwargs = {k: v for k, v in hub_kwargs.items() if k in _CACHED_FILE_KWARGS}
    path = cached_file(source, gguf_file, revision=revision, **hub_kwargs)
    if path is None:
        raise ValueError(f"{source!r} has no file {gguf_file!r}.")
    return path


def gguf_quantization(path: str) -> str:
    """The quantisation of a GGUF file: its ``general.file_type`` (``Q4_K_M``, ``F16``, ...), or
    the most common type of its matrices when the file does not state one.

    The header is scanned up to that key (`gguf_metadata_value`): 0.3 ms for the SmolLM2-135M
    file, where gguf's reader parses every field, the whole vocabulary included (3.5-3.9 s,
    measured). Read once per file version in a process (keyed by path, size and modification
    time)."""
    stat = os.stat(path)
    return _quantization(os.path.realpath(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _quantization(path: str, size: int, modified_ns: int) -> str:
    import gguf  # an optional dependency: transformers needs it to load GGUF files at all

    value = gguf_metadata_value(path, "general.file_type")
    if value is not None:
        try:
            name = gguf.LlamaFileType(int(value)).name
        except ValueError:
            name = f"file_type {value}"
        return name.removeprefix("MOSTLY_").removeprefix("ALL_")
    reader = gguf.GGUFReader(path)
    types = Counter(t.tensor_type.name for t in reader.tensors if len(t.shape) >= 2)
    return types.most_common(1)[0][0] if types else ""


# GGUF metadata value types: struct formats of the scalars; 8 is a string, 9 an array
_SCALARS = dict(enumerate("BbHhIif?")) | {10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def gguf_metadata_value(path: str, key: str) -> Any:
    """The scalar or string value of metadata ``key`` in a GGUF file (``None`` if absent),
    read by scanning the header up to it: skipping an array of strings reads only each
    string's length, so no vocabulary is parsed (the GGUF format: ggml's docs/gguf.md)."""
    with open(path, "rb") as file:
        end = os.fstat(file.fileno()).st_size
        blob = file.read(24)
        if len(blob) < 24 or blob[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file (no GGUF magic number at its start).")
        order = "<" if struct.unpack_from("<I", blob, 4)[0] < 0x10000 else ">"
        count = struct.unpack_from(order + "Q", blob, 16)[0]

        def read(fmt: str) -> Any:
            fmt = order + fmt
            return struct.unpack(fmt, file.read(struct.calcsize(fmt)))[0]

        def string(wanted: bool) -> str | None:
            size = read("Q")
            if size > end - file.tell():  # a corrupted length: never allocate it
                raise EOFError(f"a string of {size} bytes at offset {file.tell()}")
            if wanted:
                return file.read(size).decode("utf-8", "replace")
            file.seek(size, os.SEEK_CUR)
            return None

        def value(kind: int, wanted: bool) -> Any:
            if kind == _STRING:
                return string(wanted)
            if kind == _ARRAY:
                inner, length = read("I"), read("Q")
                if inner in _SCALARS:
                    file.seek(length * struct.calcsize(_SCALARS[inner]), os.SEEK_CUR)
                else:
                    for _ in range(length):
                        value(inner, False)
                return None
            return read(_SCALARS[kind])

        try:
            for _ in range(count):
                name = string(True)
                found = value(read("I"), True)
                if name == key:
                    return found
        except (struct.error, KeyError, EOFError) as error:  # short read, unknown type
            raise ValueError(
                f"{path} is a truncated or corrupted GGUF file (its metadata ends early or holds "
                f"an unknown value type: {error!r}). Download or copy it again."
            ) from error
    return None


def gguf_provenance(
    source: str, gguf_file: str, revision: str | None = None, **hub_kwargs
) -> dict[str, str]:
    """``encoder_gguf_file`` and ``encoder_quantization`` for a projector's config, and
    ``encoder_revision`` (the commit) when the file came from the Hub cache."""
    path = gguf_local_path(source, gguf_file, revision, **hub_kwargs)
    provenance = {"encoder_gguf_file": gguf_file, "encoder_quantization": gguf_quantization(path)}
    snapshot = snapshot_record(path)  # a file in the Hub cache: (repo id, commit)
    if snapshot is not None:
        provenance["encoder_revision"] = snapshot[1]
    return provenance


def gguf_mismatch(projector_config: Any, loaded: dict[str, str]) -> str | None:
    """Why a projector does not fit the GGUF file loaded (``None`` when it does): the file it
    records, against the one loaded (``loaded``: `gguf_provenance`, ``{}`` for no GGUF file)."""
    recorded = getattr(projector_config, "encoder_gguf_file", "")
    loaded_file = loaded.get("encoder_gguf_file", "")
    if not recorded or loaded_file == recorded:
        return None
    what = f"the GGUF file {loaded_file!r}" if loaded_file else "no GGUF file"
    quantization = (
        getattr(projector_config, "encoder_quantization", "") or "quantisation unrecorded"
    )
    return (
        f"The projector was built on the encoder's GGUF file {recorded!r} ({quantization}), but "
        f"{what} was loaded: another quantisation embeds differently. Pass gguf_file={recorded!r}."
    )


def load_gguf_tokenizer(
    source: str, gguf_file: str, revision: str | None = None, **hub_kwargs: Any
) -> PreTrainedTokenizerBase:
    """The tokenizer a GGUF file describes; the one of the folder or repo beside it when
    transformers cannot build one from the file's metadata."""
    try:
        return AutoTokenizer.from_pretrained(
            source, gguf_file=gguf_file, revision=revision, **hub_kwargs
        )
    except (ValueError, KeyError, NotImplementedError) as gguf_error:
        try:
            return AutoTokenizer.from_pretrained(source, revision=revision, **hub_kwargs)
        except (OSError, ValueError) as folder_error:
            raise ValueError(
                f"No tokenizer for {source!r}/{gguf_file}: transformers cannot build one from the "
                f"GGUF metadata ({gguf_error}) and {source!r} has none beside it ({folder_error}). "
                "Save the model's tokenizer there (tokenizer.save_pretrained) or pass tokenizer=..."
            ) from folder_error


def load_gguf_encoder(
    source: str,
    gguf_file: str,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    **model_kwargs: Any,
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """The model and tokenizer of a GGUF file, as ``AutoModel`` / `load_gguf_tokenizer` load them
    from ``(source, gguf_file=...)``, parsed and dequantized once per file version.

    The first load converts the file and saves the result (`converted_gguf_folder`); later loads
    read that folder: the same float32 weights and tokenizer, so the same embeddings. The
    model's ``name_or_path`` and commit are those of the direct load, so provenance is unchanged.
    A converted folder that no longer loads is rebuilt, with a warning.
    """
    path = gguf_local_path(source, gguf_file, revision)
    folder = converted_gguf_folder(path, cache_dir)
    if (folder / "config.json").is_file():
        try:
            model = AutoModel.from_pretrained(folder, **model_kwargs)
            tokenizer = AutoTokenizer.from_pretrained(folder)
            return _as_loaded_from(model, tokenizer, source, path)
        except Exception as error:  # anything wrong with our own cache: convert again
            logger.warning("Converting %s again: its converted folder %s does not load (%s).",
                           path, folder, error)  # fmt: skip
            shutil.rmtree(folder, ignore_errors=True)
    with _one_parse_per_file():
        tokenizer = load_gguf_tokenizer(source, gguf_file, revision)
        model = AutoModel.from_pretrained(source, revision=revision, gguf_file=gguf_file)
    _save_converted(model, tokenizer, folder)
    if model_kwargs:  # a dtype or device map: applied as it is to any transformers folder
        model = AutoModel.from_pretrained(folder, **model_kwargs)
    return _as_loaded_from(model, tokenizer, source, path)


_PARSE_LOCK = threading.Lock()


@contextlib.contextmanager
def _one_parse_per_file() -> Iterator[dict]:
    """While it is open, the `gguf.GGUFReader`s made of one path are one reader, parsed once,
    and the tensor-name maps of one architecture and depth are one map, built once.

    transformers makes a fresh reader for the config, the tokenizer and the weights of one load
    (``load_gguf_checkpoint``, which imports ``GGUFReader`` from ``gguf`` at each call), and each
    parses the whole metadata again: SmolLM2's 49,152-token vocabulary and merges, 441,714 fields'
    parts, 7 CPU s a parse. A reader only reads (a read-only memory map), so sharing one changes
    nothing it returns. Mapping the weights' names, it builds ``gguf.get_tensor_name_map(arch,
    n_blocks)`` again for every submodule (imported at each call too): 395 maps for SmolLM2;
    one map made its first load 20.6 -> 11.0 CPU s (medians of 5 and 9 runs, one thread). A map
    is only read (``get_name``), and one load maps one architecture, so the one map is the map
    each call built. Yields the readers made, by real path and mode.
    """
    import gguf

    original, original_names, readers = gguf.GGUFReader, gguf.get_tensor_name_map, {}

    def shared(path: str | os.PathLike, mode: str = "r") -> Any:
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    with _PARSE_LOCK:  # one load at a time swaps the names: no load restores another's
        gguf.GGUFReader = shared
        gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(original_names)
        try:
            yield readers
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = original, original_names


def converted_gguf_folder(path: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the transformers folder converted from GGUF file ``path`` goes: its name and a key
    of its real path, size, modification time and the converting libraries' versions."""
    from relrep_hf.encoding.extraction_writer import cache_root

    stat = os.stat(path)
    identity = [os.path.realpath(path), stat.st_size, stat.st_mtime_ns,
                transformers.__version__, version("gguf")]  # fmt: skip
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]
    stem = Path(path).name.removesuffix(GGUF_SUFFIX)
    return cache_root(cache_dir) / CONVERTED_FOLDER / f"{stem}-{key}"


def _save_converted(model: nn.Module, tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """Save the dequantized model and tokenizer into ``folder`` atomically (a staging folder
    renamed into place); a failure only logs: the model loaded is returned all the same."""
    staging = None
    quantizer, config = getattr(model, "hf_quantizer", None), model.config
    quantization = config.__dict__.pop("quantization_config", None)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        model.hf_quantizer = None  # the weights are float now: save them as any model's
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        os.replace(staging, folder)
        staging = None
    except OSError as error:  # a read-only or full cache, or another process got there first
        if not (folder / "config.json").is_file():
            logger.warning("Could not save the converted GGUF model in %s: %s", folder, error)
    finally:
        model.hf_quantizer = quantizer
        if quantization is not None:
            config.quantization_config = quantization
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _as_loaded_from(
    model: nn.Module, tokenizer: PreTrainedTokenizerBase, source: str, path: str
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """``model`` and ``tokenizer`` naming ``source`` (and the Hub commit of ``path``) as a
    direct load from ``source`` would, not the converted folder."""
    snapshot = snapshot_record(path)
    model.config._name_or_path = source
    model.config._commit_hash = snapshot[1] if snapshot else None
    tokenizer.name_or_path = source
    return model.eval(), tokenizer
