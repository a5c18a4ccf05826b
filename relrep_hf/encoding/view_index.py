"""Cached embeddings of a GGUF encoder found without loading it.

An embedding's cache key hashes the loaded weights when no Hub commit names them, and a GGUF
file is dequantised on load (about 35 s for SmolLM2-135M on this project's 2-core machine, most
of it transformers parsing the file three times): a second run over the same rows spent that
load only to find its embeddings cached. So each GGUF load that embeds also writes a small
index beside the cache folders: what identifies the load (the file's resolved path, size and
modification time, the specs, columns and rows, and the library versions that shape the
result) -> the folders its views were written to, with the spec, provenance and record each
one's `Embedded` needs. A run with the same identity reads those folders and loads nothing;
anything else (another file version, other rows, another transformers) misses and loads.

The file's version is its size and modification time, as make and ccache read it: a file
rewritten in place with the same size and an unchanged modification time would be taken for the
old one (copy or download a new file, or delete the ``relrep-gguf-views-*.json`` index).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

INDEX_FORMAT = 1


def load_identity(group: Sequence[tuple[Any, str]], data: Any, file_path: str) -> str:
    """The identity of one GGUF load over ``data``: each ``(spec, column)`` of ``group``, the
    file at ``file_path`` (resolved path, size, modification time), the rows' fingerprint, the
    embedding cache's format and the versions of the code that loads and dequantises."""
    from importlib.metadata import version

    import torch
    import transformers

    from relrep_hf.encoding.extraction import CACHE_FORMAT

    stat = os.stat(file_path)
    parts = {
        "format": [INDEX_FORMAT, CACHE_FORMAT],
        "versions": [transformers.__version__, torch.__version__, version("gguf")],
        "default_dtype": str(torch.get_default_dtype()),
        "file": [os.path.realpath(file_path), stat.st_size, stat.st_mtime_ns],
        "rows": data._fingerprint,
        "views": [[*_spec_fields(spec), column] for spec, column in group],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def indexed_views(cache_root: Path, identity: str) -> list[dict[str, Any]] | None:
    """The records written for ``identity`` (one per view, in order), or ``None`` when there
    are none or any of their folders is gone (a broken index is a miss, never an error)."""
    path = _index_path(cache_root, identity)
    try:
        records = json.loads(path.read_text(encoding="utf-8"))["views"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(records, list) or not all(map(_well_formed, records)):
        return None
    if not all((cache_root / r["folder"] / "embeddings.arrow").is_file() for r in records):
        return None
    logger.info("Embeddings of a GGUF encoder found in the cache: no load (%s)", path.name)
    return records


def index_views(cache_root: Path, identity: str, records: Sequence[dict[str, Any]]) -> None:
    """Write the records of ``identity`` (atomically: a reader sees the old index or the new)."""
    from relrep_hf.utils.io import atomic_write_bytes

    text = json.dumps({"format": INDEX_FORMAT, "views": list(records)}, indent=1)
    try:
        atomic_write_bytes(_index_path(cache_root, identity), text.encode())
    except OSError as error:  # a read-only cache still embeds; the next run loads again
        logger.warning("Could not write the GGUF view index in %s: %s", cache_root, error)


def view_record(spec: Any, folder: Path, provenance: dict[str, str], extra: dict) -> dict:
    """What the index keeps of one view: its cache folder's name, its spec (pooling decided),
    provenance and run record."""
    return {"folder": folder.name, "spec": _spec_fields(spec), "provenance": provenance,
            "extra": extra}  # fmt: skip


def _well_formed(record: Any) -> bool:
    """A record as `view_record` writes it: a cache folder's bare name, five spec fields, two
    dicts (anything else, edited or damaged, is a miss)."""
    return (
        isinstance(record, dict)
        and isinstance(folder := record.get("folder"), str)
        and folder.startswith("relrep-embeddings-")
        and Path(folder).name == folder
        and isinstance(record.get("spec"), list)
        and len(record["spec"]) == 5
        and isinstance(record.get("provenance"), dict)
        and isinstance(record.get("extra"), dict)
    )


def _spec_fields(spec: Any) -> list[Any]:
    return [spec.model_id, spec.revision, spec.pooling, spec.layer, spec.gguf_file]


def _index_path(cache_root: Path, identity: str) -> Path:
    return cache_root / f"relrep-gguf-views-{identity}.json"
