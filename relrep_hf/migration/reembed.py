"""Re-embedding a store from its own text: ``reembed_store``, the way out when a map keeps too
little (the migration report says "re-embed").

Every row's text (a column or field of the store: parquet, datasets, LanceDB, a Chroma
collection's documents, a Qdrant payload field, a pgvector or sqlite-vec column; or a file of
``id, text`` joined on the store's ids; `relrep_hf.migration.reembed_texts`) is embedded by
any encoder the library loads (`relrep_hf.encoding.encoder_kinds`: its one embedding loop,
chunk by chunk), and the store is rewritten with the new vectors as ``migrate`` rewrites it:
aside, then swapped in whole (`VectorStore.rewrite_into`: for a database, the kind's own alias
switch, transaction or renames, the replaced vectors kept for a rollback), with the new space
recorded (`relrep_hf.migration.space`). Rows whose text is missing or empty are refused by id
before anything is embedded; they are never written as zeros.

Resumable: each chunk's vectors are committed to a staging folder beside the output,
``.reembed-<key>`` (a ``.npy`` shard per chunk, then ``progress.json``), the key a hash of the
store's version (a database's: its ids and texts) and every setting that changes the vectors;
a database store's folder is beside its folder or file (pgvector: in the embedding cache), an
absolute path resolved once whatever the working directory of a resume, and a database store
is held for the whole run (a second run refused, naming the first); the store is swapped
once, after every chunk is committed. A run killed anywhere is resumed (``resume=True``,
``--resume``) from its last committed chunk; chunks are embedded with the same boundaries and
batches, so the result equals an uninterrupted run's. The folder goes once the new store is in
place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from relrep_hf.migration.reembed_texts import (
    MissingTextError,
    Texts,
    check_can_drop,
    check_texts,
    has_text,
    missing_message,
    missing_rows,
    rechunked,
    texts_of,
)
from relrep_hf.migration.space import StoreSpace, encoder_space
from relrep_hf.migration.stores.base import (
    VectorStore,
    VectorStoreError,
    _check_dtype,
    check_written_rows_finite,
    open_store,
    records_space,
)
from relrep_hf.migration.stores.database import DatabaseStore, parse_location
from relrep_hf.migration.throughput import Throughput, dry_run_text
from relrep_hf.utils.defaults import DEFAULT_EMBED_BATCH_SIZE, DEFAULT_REEMBED_CHUNK_ROWS
from relrep_hf.utils.io import atomic_write_bytes, fsync_directory
from relrep_hf.utils.locking import folder_lock

logger = logging.getLogger(__name__)

__all__ = ["MissingTextError", "ReembedEstimate", "reembed_store"]

STAGING_PREFIX = ".reembed-"
PROGRESS_FILE = "progress.json"
PROGRESS_FORMAT = 1
UNIT_TOLERANCE = 1e-3  # |norm - 1| under which a vector counts as unit-length


@dataclass(frozen=True)
class ReembedEstimate:
    """A dry run (``max_rows``): ``rows`` embedded in ``seconds`` (one encoder load included),
    and the whole store's ``total_rows`` projected at that rate."""

    rows: int
    seconds: float
    total_rows: int

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    @property
    def projected_seconds(self) -> float:
        return self.total_rows / self.rows_per_second

    def __str__(self) -> str:
        measured = Throughput("re-embed", self.rows, self.seconds)
        return dry_run_text(
            measured, self.total_rows, done="Embedded", note="one encoder load included"
        )


# ---------------------------------------------------------------------------------------------
# Embedding, a chunk at a time
# ---------------------------------------------------------------------------------------------


def _parse(encoder: str) -> Any:
    from relrep_hf.encoding.encoder_kinds import parse_encoder

    spec, column = parse_encoder(encoder)
    if column is not None:
        raise ValueError(
            f"Encoder spec {encoder!r} names a column ('#{column}'): the text column of a "
            "re-embed is text_column= (--text-column)."
        )
    return spec


def embed_texts(
    spec: Any, texts: list[str], cache: Path, batch_size: int, device: str | None = None
) -> tuple[np.ndarray, Any]:
    """``texts`` embedded by ``spec`` through the library's loop (`embed_encoders`, its cache
    in ``cache``, a model on ``device``): ``[n, d]`` float vectors and the `Embedded` (spec
    decided, provenance). The one embedding of a re-embed, here and in the Ray engine's actors."""
    import datasets

    from relrep_hf.encoding.encoder_kinds import EmbedRequest, embed_encoders

    data = datasets.Dataset.from_dict({"text": texts})
    request = EmbedRequest(data, cache, batch_size, show_progress=False, device=device)
    (embedded,) = embed_encoders([spec], ["text"], request)
    vectors = np.asarray(embedded.dataset.with_format("numpy")["embedding"])
    return vectors.reshape(len(texts), -1), embedded


def _is_unit(vectors: np.ndarray) -> bool:
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    return bool(np.all(np.abs(norms - 1.0) < UNIT_TOLERANCE))


def _dry_run(
    spec: Any, source: Texts, max_rows: int, batch_size: int, total: int
) -> ReembedEstimate:
    if not isinstance(max_rows, int) or max_rows < 1:
        raise ValueError(f"max_rows must be a positive int, got {max_rows!r}.")
    valid = ([t for t in batch if has_text(t)] for batch in source.batches(max_rows))
    texts = next(rechunked(valid, max_rows), [])
    with tempfile.TemporaryDirectory(prefix="relrep-reembed-dry-") as cache:
        start = time.perf_counter()
        if texts:
            embed_texts(spec, texts, Path(cache), batch_size)
        seconds = time.perf_counter() - start
    return ReembedEstimate(len(texts), seconds, total)


# ---------------------------------------------------------------------------------------------
# The staging folder: committed chunks and the progress record
# ---------------------------------------------------------------------------------------------


def _version(path: Path) -> list:
    """What tells one version of a store (file or folder) from another: sizes, mtimes."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [
        [str(p.relative_to(path.parent)), p.stat().st_size, p.stat().st_mtime_ns] for p in files
    ]


def _run_key(store: VectorStore, settings: dict[str, Any], texts: Any) -> str:
    """A hash of the store's version, the text source's and every setting of the run (a
    database store's version: the hash of its ids and texts, ``settings["content"]``)."""
    where = store.location.shown() if isinstance(store, DatabaseStore) else None
    parts = {
        "store": [where]
        if where
        else [str(Path(store.path).absolute()), _version(Path(store.path))],
        "texts": None if texts is None else [str(Path(texts).absolute()), _version(Path(texts))],
        **settings,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _shard(staging: Path, index: int) -> Path:
    return staging / f"chunk-{index:06d}.npy"


def _read_progress(staging: Path, key: str) -> dict[str, Any]:
    path = staging / PROGRESS_FILE
    if not path.is_file():
        return {"format": PROGRESS_FORMAT, "key": key, "chunks": 0, "normalized": True}
    progress = json.loads(path.read_text())
    if progress.get("key") != key or progress.get("format") != PROGRESS_FORMAT:
        raise VectorStoreError(
            f"{str(staging)!r} holds the progress of another re-embed; remove it to start over."
        )
    return progress


def _commit_chunk(staging: Path, index: int, vectors: np.ndarray, progress: dict) -> None:
    """The chunk's shard made durable, then the progress record that counts it."""
    shard = _shard(staging, index)
    partial = shard.with_suffix(".partial.npy")
    with open(partial, "wb") as file:
        np.save(file, vectors)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, shard)
    fsync_directory(staging)
    atomic_write_bytes(staging / PROGRESS_FILE, json.dumps(progress, sort_keys=True).encode())


class _Shards:
    """The committed chunks read back in order, ``take(n)`` rows at a time."""

    def __init__(self, staging: Path, count: int, dim: int):
        self.files = iter(_shard(staging, i) for i in range(count))
        self.pending, self.dim = np.empty((0, dim), np.float32), dim

    def take(self, rows: int) -> np.ndarray:
        parts, needed = [self.pending[:0].reshape(0, self.dim)], rows
        while needed:
            if not len(self.pending):
                self.pending = np.load(next(self.files))
            parts.append(self.pending[:needed])
            self.pending = self.pending[len(parts[-1]) :]
            needed -= len(parts[-1])
        return np.concatenate(parts)


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def _embed_chunks(
    spec: Any, source: Texts, staging: Path, progress: dict, options: dict, show: bool | None
) -> dict:
    """Embed and commit every chunk after the last committed one (the rows with a text only,
    where ``options["drop"]`` leaves the others out); ``progress`` completed with the vectors'
    ``dim`` and ``space``."""
    from tqdm.auto import tqdm

    chunk_rows, total = options["chunk_rows"], source.store.rows - len(options["drop"])
    batches = source.batches(chunk_rows)
    if len(options["drop"]):
        batches = ([t for t in batch if has_text(t)] for batch in batches)
    done = progress["chunks"]
    disable = None if show is None else not show
    with tqdm(
        total=total,
        initial=min(done * chunk_rows, total),
        unit="rows",
        desc=f"re-embedding {source.store.path.name}",
        disable=disable,
    ) as bar:
        for index, texts in enumerate(rechunked(batches, chunk_rows)):
            if index < done:
                continue
            cache = staging / f"cache-{index:06d}"
            shutil.rmtree(cache, ignore_errors=True)  # a killed run's
            vectors, embedded = embed_texts(spec, texts, cache, options["batch_size"])
            shutil.rmtree(cache, ignore_errors=True)
            if "dim" in progress and vectors.shape[1] != progress["dim"]:
                raise VectorStoreError(
                    f"The encoder gave {vectors.shape[1]}-d vectors for chunk {index}, "
                    f"{progress['dim']}-d before: it must give one dimension."
                )
            progress["normalized"] = progress["normalized"] and _is_unit(vectors)
            progress["dim"] = int(vectors.shape[1])
            progress["space"] = json.loads(
                encoder_space(
                    embedded.spec, embedded.provenance, vectors.shape[1], progress["normalized"]
                ).to_json()
            )
            progress["chunks"] = index + 1
            _commit_chunk(staging, index, vectors, progress)
            bar.update(len(texts))
    return progress


def _write_store(
    store: VectorStore, out: Any, staging: Path, progress: dict, options: dict
) -> Path | str:
    """The committed vectors swapped into ``out`` (aside, then in whole), their space recorded."""
    dtype, dim = options["dtype"], progress["dim"]
    shards = _Shards(staging, progress["chunks"], dim)
    position = 0

    def apply(chunk: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        nonlocal position
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            vectors = shards.take(len(chunk)).astype(dtype, copy=False)
        check_written_rows_finite(vectors, position, store)
        position += len(chunk)
        if out is None:
            return vectors
        out[...] = vectors
        return out

    extra: dict[str, Any] = {} if dtype == store.dtype else {"dtype": dtype}
    if len(options["drop"]):  # the rows without text: not written (a kind that holds text)
        extra["skip"] = options["drop"]
    if records_space(store):
        space = dict(progress["space"])
        space.pop("format")
        extra["space"] = StoreSpace(**{**space, "aliases": tuple(space["aliases"])})
    return store.rewrite_into(
        out, apply, dim, options["chunk_rows"], overwrite=options["overwrite"], **extra
    )


def reembed_store(
    store: str | os.PathLike | VectorStore,
    encoder: str,
    out: str | os.PathLike | None = None,
    *,
    text_column: str | None = None,
    texts: str | os.PathLike | None = None,
    id_column: str | None = None,
    column: str | None = None,
    table: str | None = None,
    chunk_rows: int = DEFAULT_REEMBED_CHUNK_ROWS,
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
    overwrite: bool = False,
    resume: bool = False,
    max_rows: int | None = None,
    dtype: str | np.dtype | None = None,
    skip_missing: bool = False,
    show_progress: bool | None = None,
    force: bool = False,
) -> Path | str | ReembedEstimate:
    """Re-embed every row of ``store`` from its text with ``encoder`` into ``out``.

    Args:
        store: a store that holds text (parquet, datasets, LanceDB; a Chroma, Qdrant,
            pgvector or sqlite-vec URI; `open_store`'s ``column`` and ``table``), or opened.
        encoder: any encoder spec the library loads (`relrep_hf.encoding.encoder_kinds`):
            ``ID[@REV][:POOLING][:LAYER]``, ``st:FOLDER_OR_ID``, a GGUF file, ``py:mod:fn``.
        out: the new store (same kind; a database's: same database); ``None``: in place.
        text_column: the column of texts (of the store, or of ``texts``; default ``text``, a
            Chroma collection's ``documents``); a Qdrant payload field.
        texts: instead, a .jsonl or .parquet file of ``id_column`` and ``text_column``, joined
            on the store's ``id_column`` (default ``id``; sqlite-vec: ``rowid``; pgvector: the key).
        chunk_rows: rows per committed chunk (and per encoder load).
        overwrite: replace an existing ``out`` (a store of the same kind).
        resume: go on from the committed chunks of a killed run with the same store, texts and
            settings (without it, such a run's staging folder is refused, never discarded).
        max_rows: a dry run of the first ``max_rows`` rows: nothing written, a `ReembedEstimate`.
        dtype: the new vectors' dtype (default: the store's).
        skip_missing: leave the rows without text out of the new store (a warning names them);
            the old store (in place: its backup) keeps them; a folder store in place: refused.
        force: write although the plan lists what it would not carry (an embedding function).

    Returns:
        ``out`` (a database's: its URI with the ``backup`` kept), or the `ReembedEstimate`.

    Raises:
        MissingTextError: rows without text, named by id (nothing embedded or written),
            unless ``skip_missing``.
        VectorStoreError: a store with no text (a FAISS index, .npy), a killed run's staging
            folder without ``resume``, an output that cannot be written; `StoreBusyError`:
            another re-embed of the same database store is running (named).

    Example:
        >>> reembed_store("docs.parquet", "minilm:mean", "docs-minilm.parquet")  # doctest: +SKIP
    """
    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int, got {chunk_rows!r}.")
    opened = (
        store if isinstance(store, VectorStore) else open_store(store, column=column, table=table)
    )
    spec = _parse(encoder)
    source, positions, missing, content = _checked_texts(
        opened, text_column, texts, id_column, chunk_rows, skip_missing
    )
    text_column, id_column = source.text_column, source.id_column
    if max_rows is not None:
        return _dry_run(spec, source, max_rows, batch_size, opened.rows)
    options = {
        "encoder": str(spec),
        "text_column": text_column,
        "id_column": id_column if texts is not None else None,
        "vector_column": getattr(opened, "column", None),
        "chunk_rows": chunk_rows,
        "batch_size": batch_size,
        "dtype": str(opened.dtype if dtype is None else _check_dtype(opened, dtype)),
        "skip_missing": bool(skip_missing and positions),
    } | ({"content": content} if isinstance(opened, DatabaseStore) else {})  # a database's version
    drop = (positions, missing) if skip_missing else ([], [])
    return _run(spec, source, out, options, texts, resume=resume, overwrite=overwrite or out is None,
                show_progress=show_progress, drop=drop, force=force)  # fmt: skip


def _checked_texts(
    opened: VectorStore,
    text_column: str | None,
    texts: str | os.PathLike | None,
    id_column: str | None,
    chunk_rows: int,
    skip_missing: bool,
) -> tuple[Texts, list[int], list[Any], str]:
    """The store's texts (the kind's own text and id fields by default), the positions and
    ids of the rows without text (refused by id unless ``skip_missing``), and the hash of ids
    and texts."""
    text_column = text_column or (opened.text_field if texts is None else "text")
    source = texts_of(opened, text_column, texts, id_column or opened.id_field)
    positions, missing, content = missing_rows(source, chunk_rows)
    if not skip_missing:
        check_texts(source, missing)
    return source, positions, missing, content


def _run(
    spec: Any,
    source: Texts,
    out: str | os.PathLike | None,
    options: dict[str, Any],
    texts: str | os.PathLike | None,
    *,
    resume: bool,
    overwrite: bool,
    show_progress: bool | None,
    drop: tuple[list[int], list[Any]],
    force: bool,
) -> Path | str:
    """Embed the chunks not yet committed in the staging folder of this run (its key: the
    store's and texts' versions, ``out`` and ``options``), then swap the new store in. A
    database store is held for the whole run (`DatabaseStore.run_lock`): a second run on it
    is refused at once, naming the first."""
    opened = source.store
    database = isinstance(opened, DatabaseStore)
    if out is None:
        target = opened.location.with_name(opened.location.name) if database else opened.path
    else:
        target = out
    # refused before any row is embedded (the width is the encoder's: no re-embedded kind's
    # plan depends on it)
    opened.plan(target, opened.dim).check(force=force)
    positions, missing = drop
    if positions:  # skip_missing: left out of the new store; the old one (or its backup) keeps them
        in_place = not database and Path(target).exists() and os.path.samefile(target, opened.path)
        check_can_drop(opened, in_place)
        logger.warning(
            "%s: %s; they are left out of the new store.",
            opened.describe(),
            missing_message(source, missing),
        )
    options["out"] = (
        parse_location(str(target)).shown() if database else str(Path(os.path.abspath(target)))
    )
    key = _run_key(opened, options, texts)
    staging = _staging_home(opened, options["out"]) / f"{STAGING_PREFIX}{key}"
    options |= {"dtype": np.dtype(options["dtype"]), "overwrite": overwrite}
    options["drop"] = np.asarray(positions, dtype=np.int64)
    staging.parent.mkdir(parents=True, exist_ok=True)
    held = opened.run_lock() if database else contextlib.nullcontext()
    with held, folder_lock(staging):  # one run per store and staging folder: a second fails
        if staging.exists() and not resume:
            done = _read_progress(staging, key)["chunks"]
            raise VectorStoreError(
                f"A killed re-embed of {opened.describe()} with these settings left {done} "
                f"committed chunk(s) of {options['chunk_rows']} rows. Pass resume=True "
                "(--resume) to go on from them, or remove their folder to start over: "
                f"{str(staging)!r}. Nothing was written."
            )
        staging.mkdir(exist_ok=True)
        progress = _read_progress(staging, key)
        progress = _embed_chunks(spec, source, staging, progress, options, show_progress)
        if "dim" not in progress:  # nothing was committed: no folder to resume from either
            shutil.rmtree(staging, ignore_errors=True)
            raise VectorStoreError(
                f"{opened.describe()} has no rows to re-embed (none has a text). Nothing was "
                "written."
            )
        result = _write_store(opened, target, staging, progress, options)
        shutil.rmtree(staging, ignore_errors=True)
    return result


def _staging_home(store: VectorStore, out: str) -> Path:
    """Where a run's staging folder goes, an absolute path resolved once, whatever the working
    directory of a later ``--resume``: beside the output file or folder; beside a Chroma or
    Qdrant folder or an SQLite file; a pgvector table's (a server's: no folder of its own) in
    the embedding cache, ``<datasets cache>/relrep_hf/reembed``."""
    if not isinstance(store, DatabaseStore):
        return Path(out).parent
    if store.kind == "pgvector":
        from relrep_hf.encoding.extraction_writer import cache_root

        return Path(os.path.abspath(cache_root(None) / "reembed"))
    return Path(store.location.database).parent
