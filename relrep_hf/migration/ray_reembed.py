"""A sharded store re-embedded from its text on Ray, shard by shard (`reembed_shards`,
``relrep-hf reembed --engine ray``): a folder of parquet shards, a ``datasets`` folder, or a
Lance dataset (a LanceDB table's ``TABLE.lance`` folder) fragment by fragment.

Encoder actors (one per GPU where the cluster has GPUs, else one per CPU; ``num_workers``)
each take one input shard at a time and rewrite it as the single-process re-embed rewrites a
store (`relrep_hf.migration.reembed`: the same embedding function, chunk by chunk, the same
writer, every other column carried over, the new space recorded) into a work folder beside
``out`` (``.<out>.ray-shards``), with the new shard's sha256. Rows without text are refused by
id on the driver before any actor starts, with the local path's message. The input shards are
only read. Once every shard is written the new folder is swapped in at ``out`` in one step, as
`relrep_hf.migration.ray_shards.migrate_shards` swaps a migrated one; a stopped run resumes by
shard (``resume=True``, ``--resume``). An actor that dies is restarted and its shard retried by
Ray (``max_restarts``, ``max_task_retries``); then the error names the shard.

A Lance dataset is re-embedded fragment by fragment with the machinery that migrates one
(`relrep_hf.migration.ray_lance.run_fragments`): each fragment's new rows written by an actor
with pylance's ``write_fragments``, the new dataset committed once with the space recorded in
its schema metadata (as the local re-embed of a LanceDB table records it), resumable by
fragment. One whose vector column a LanceDB embedding function fills, or that has indexes, is
refused naming the local engine (which rebuilds the indexes and refuses the function unless
``--force``).

Every node must see the input and ``out`` at the same paths (a shared file system).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from relrep_hf.migration.ray_engine import (
    DONE_FOLDER,
    _concurrency,
    _start_work,
    actor_device,
    collect_shards,
    require_ray,
)
from relrep_hf.migration.ray_lance import (
    LanceData,
    _check_lance_out,
    is_lance_dataset,
    require_lance,
    run_fragments,
    written_schema,
)
from relrep_hf.migration.ray_shards import (
    _check_out,
    _open_shard,
    _swap_in,
    _verified,
    commit_shard,
    sharded_store,
)
from relrep_hf.migration.reembed_texts import check_texts, missing_rows, texts_of
from relrep_hf.migration.stores.base import VectorStore, VectorStoreError, _check_dtype
from relrep_hf.utils.defaults import DEFAULT_EMBED_BATCH_SIZE, DEFAULT_REEMBED_CHUNK_ROWS
from relrep_hf.utils.locking import folder_lock

__all__ = ["ShardEncoder", "estimate_shards", "reembed_shards"]


class ShardEncoder:
    """A Ray actor: one input shard at a time re-embedded from its text column and written to
    the work folder (`embed_shard`), on the GPU when the actor sees one."""

    def __init__(self, spec: str, options: dict[str, Any]):
        from relrep_hf.migration.reembed import _parse

        self.spec, self.options = _parse(spec), options
        self.device = actor_device(self.spec)  # the actor's own GPU(s)

    def embed_shard(self, kind: str, shard: str, work: str) -> dict[str, Any]:
        """Re-embed ``shard`` into ``work``: `write_shard` with its vectors and their space."""
        store = _open_shard(kind, Path(shard), self.options["column"])
        vectors, space = self._embedded(store)
        return write_shard(kind, store, Path(work), vectors, space, self.options)

    def embed_fragment(self, source: str, version: int, fragment_id: int, work: str) -> dict:
        """Re-embed fragment ``fragment_id`` of the Lance dataset ``source`` (at ``version``)
        into ``work``'s dataset (`write_fragment`), recorded with its vectors' space."""
        from relrep_hf.migration.ray_lance import LanceData, write_fragment

        store = LanceData(source, version, fragment_id, self.options["column"])
        vectors, space = self._embedded(store)
        wanted = np.dtype(self.options["dtype"])
        batches = store.transformed(
            _taker(vectors, wanted), vectors.shape[1], self.options["chunk_rows"], wanted
        )
        space = json.loads(space.to_json())
        return write_fragment(batches, work, fragment_id, store.rows, space=space)

    def _embedded(self, store: VectorStore) -> tuple[np.ndarray, Any]:
        """Every row's vector ``[rows, d]`` (embedded ``chunk_rows`` rows at a time, as
        `reembed_store` embeds its chunks) and their space (`encoder_space`)."""
        from relrep_hf.migration.reembed import _is_unit, embed_texts
        from relrep_hf.migration.reembed_texts import rechunked
        from relrep_hf.migration.space import encoder_space

        options, parts, embedded = self.options, [], None
        chunk_rows = options["chunk_rows"]
        for texts in rechunked(store.values(options["text_column"], chunk_rows), chunk_rows):
            with tempfile.TemporaryDirectory(prefix="relrep-ray-reembed-") as cache:
                vectors, embedded = embed_texts(
                    self.spec, texts, Path(cache), options["batch_size"], self.device
                )
            parts.append(np.asarray(vectors))
        if embedded is None:  # an empty shard: no vector to record
            raise VectorStoreError(f"{store.describe()} has no rows to re-embed.")
        vectors = np.concatenate(parts)  # [rows, d]
        unit = _is_unit(vectors)
        return vectors, encoder_space(embedded.spec, embedded.provenance, vectors.shape[1], unit)


def _taker(vectors: np.ndarray, wanted: np.dtype) -> Any:
    """A transform giving the next rows of ``vectors`` ``[rows, d]`` (as ``wanted``) for each
    chunk a store's writer reads, in order."""
    position = 0

    def take(chunk: np.ndarray) -> np.ndarray:
        nonlocal position
        rows = vectors[position : position + len(chunk)]  # [n, d]
        position += len(chunk)
        return rows.astype(wanted, copy=False)

    return take


def write_shard(
    kind: str, store: VectorStore, work: Path, vectors: np.ndarray, space: Any, options: dict
) -> dict[str, Any]:
    """``store`` (one input shard) rewritten into ``work`` with ``vectors`` ``[rows, d]`` by
    its kind's own writer (aside, then renamed), and recorded with its sha256 and ``space``
    (a parquet shard records it in its schema; a datasets folder once, when swapped in)."""
    wanted = np.dtype(options["dtype"])
    extra: dict[str, Any] = {} if wanted == store.dtype else {"dtype": wanted}
    if kind == "parquet":
        extra["space"] = space
    taker = _taker(vectors, wanted)
    return commit_shard(
        store,
        work,
        lambda partial: store.write(
            partial, taker, vectors.shape[1], options["chunk_rows"], **extra
        ),
        space=json.loads(space.to_json()),
    )


def _checked_shards(kind: str, shards: list[Path], options: dict[str, Any]) -> list[VectorStore]:
    """Every shard opened, its text column found and its rows without text refused by id
    (`check_texts`, the local path's error), before any actor starts; a store of no rows at all
    refused (an empty shard among others is written by `_write_empty`)."""
    stores = []
    for shard in shards:
        store = _open_shard(kind, shard, options["column"])
        source = texts_of(store, options["text_column"], None, store.id_field)
        check_texts(source, missing_rows(source, options["chunk_rows"])[1])
        stores.append(store)
    if not any(store.rows for store in stores):
        raise VectorStoreError(f"{str(shards[0].parent)!r}: its shards hold no rows to re-embed.")
    return stores


def _run_actors(calls: list[tuple[str, str, tuple]], work: Path, options: dict[str, Any]) -> None:
    """``calls`` (``(shard name, actor method, its arguments)``: a shard's `embed_shard`, a
    fragment's `embed_fragment`) given to encoder actors, one per actor at a time."""
    ray = require_ray()
    if not ray.is_initialized():
        ray.init()  # RAY_ADDRESS, if set, names the cluster; else a local one
    num_gpus = options["num_gpus"]
    if num_gpus is None:
        num_gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    retries = options["max_retries"]
    actor = ray.remote(
        num_cpus=1, num_gpus=num_gpus, max_restarts=retries, max_task_retries=retries
    )(ShardEncoder)
    count = min(len(calls), options["num_workers"] or _concurrency(num_gpus)[1])
    settings = {k: options[k] for k in ("column", "text_column", "chunk_rows", "batch_size")}
    settings["dtype"] = options["dtype"]
    idle = [actor.remote(options["encoder"], settings) for _ in range(count)]
    jobs = iter(calls)
    pending: dict[Any, str] = {}
    working: dict[Any, Any] = {}

    def next_job(done: Any = None, died: bool = False) -> None:
        if done is not None and not died:
            idle.append(working.pop(done))
        while idle:
            job = next(jobs, None)
            if job is None:
                return
            worker = idle.pop()
            call = getattr(worker, job[1]).remote(*job[2])
            pending[call], working[call] = job[0], worker

    next_job()
    collect_shards(pending, len(calls), work, options | {"work": "re-embedding"}, next_job)
    unrun = [name for name, _, _ in jobs]
    if unrun:  # every actor died: the shards no actor took
        raise VectorStoreError(f"Every Ray encoder actor died before shards {unrun} were run.")


def reembed_shards(
    store: str | os.PathLike,
    encoder: str,
    out: str | os.PathLike,
    *,
    text_column: str = "text",
    column: str | None = None,
    chunk_rows: int = DEFAULT_REEMBED_CHUNK_ROWS,
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
    dtype: str | np.dtype | None = None,
    overwrite: bool = False,
    resume: bool = False,
    num_workers: int | None = None,
    num_gpus: float | None = None,
    max_retries: int = 2,
    show_progress: bool | None = None,
) -> Path:
    """Re-embed the sharded store ``store`` (a folder of parquet shards, a datasets folder, or a
    Lance dataset) from its ``text_column`` with ``encoder`` into a new folder ``out`` on Ray,
    one encoder actor per worker, one shard (a Lance fragment) per call (see the module's text).

    ``encoder``: any spec `reembed_store` takes. ``column``, ``chunk_rows``, ``batch_size``,
    ``dtype``, ``overwrite``: as `reembed_store` (``out`` is never the input). ``resume``: keep
    the verified shards of an earlier run that stopped. ``num_workers``: encoder actors
    (default: one per GPU, else one per CPU of the cluster); ``num_gpus``: GPUs per actor
    (default: 1 where the cluster has GPUs). ``max_retries``: restarts of an actor that died,
    and retries of its shard. Ray is started here (``ray.init()``: ``RAY_ADDRESS`` or a local
    cluster) unless the caller started it (``ray.init(address=...)``).
    """
    from relrep_hf.migration.reembed import _parse

    for name, value in (("chunk_rows", chunk_rows), ("batch_size", batch_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
    spec = _parse(encoder)
    source, out = Path(store), Path(os.path.abspath(out))
    settings = {"text_column": text_column, "column": column, "chunk_rows": chunk_rows}
    settings |= {"batch_size": batch_size, "dtype": dtype, "num_gpus": num_gpus}
    settings |= {"num_workers": num_workers, "max_retries": max_retries}
    settings |= {"show_progress": show_progress, "encoder": encoder}
    if is_lance_dataset(source):
        return _reembed_lance(source, out, str(spec), settings, overwrite, resume)
    kind, shards = sharded_store(source)
    _check_out(source, out, kind, overwrite)
    options = {"column": column, "text_column": text_column, "chunk_rows": chunk_rows}
    stores = _checked_shards(kind, shards, options)
    wanted = stores[0].dtype if dtype is None else _check_dtype(stores[0], dtype)
    plan = {
        "encoder": str(spec),
        "source": str(source.resolve()),
        "kind": kind,
        "column": stores[0].column,
        "text_column": text_column,
        "dtype": str(wanted),
        "chunk_rows": chunk_rows,
        "batch_size": batch_size,
    }
    work = out.parent / f".{out.name}.ray-shards"
    with folder_lock(work):
        _start_work(work, plan, resume, "re-embed")
        todo = [s for s, o in zip(shards, stores, strict=True) if o.rows and not _verified(work, s)]
        options = {**plan, "encoder": encoder, "column": column, "num_gpus": num_gpus}
        options |= {"num_workers": num_workers, "max_retries": max_retries}
        options["show_progress"] = show_progress
        if todo:
            calls = [(str(s), "embed_shard", (kind, str(s), str(work))) for s in todo]
            _run_actors(calls, work, options)
        _write_empty(kind, shards, stores, work, options)
        _check_out(source, out, kind, overwrite)  # again: it may have appeared meanwhile
        _swap_in(out, work, source, kind, shards, plan, space=_space_file(kind, work, shards))
    return out


def _reembed_lance(
    source: Path, out: Path, spec: str, settings: dict[str, Any], overwrite: bool, resume: bool
) -> Path:
    """The Lance dataset ``source`` re-embedded into a new one at ``out``, one fragment per
    actor call (`ShardEncoder.embed_fragment`), committed once with the new space recorded in
    its schema as the local re-embed of a LanceDB table records it (`run_fragments`)."""
    from relrep_hf.migration.space import SPACE_KEY

    lance = require_lance()
    _check_lance_out(source, out, overwrite)
    version = lance.dataset(str(source)).version
    store = LanceData(str(source), version, column=settings["column"])
    _check_lance_table(store)
    texts = texts_of(store, settings["text_column"], None, store.id_field)
    check_texts(texts, missing_rows(texts, settings["chunk_rows"])[1])
    if not store.rows:
        raise VectorStoreError(f"Lance dataset {str(source)!r} has no rows to re-embed.")
    dtype = store.dtype if settings["dtype"] is None else _check_dtype(store, settings["dtype"])
    plan = {"encoder": spec, "source": str(source.resolve()), "kind": "lance"}
    plan |= {"version": version, "column": store.column, "dtype": str(dtype)}
    plan |= {k: settings[k] for k in ("text_column", "chunk_rows", "batch_size")}
    options = {**settings, **plan, "encoder": settings["encoder"]}

    def run(todo: list[int], work: Path) -> None:
        where = (os.path.abspath(source), version)
        calls = [(f"{source}#fragment-{i}", "embed_fragment", (*where, i, str(work))) for i in todo]
        _run_actors(calls, work, options)

    def schema(records: list[dict[str, Any]]) -> Any:
        written = written_schema(records)
        metadata = dict(written.metadata or {})
        metadata[SPACE_KEY.encode()] = merged_space(records).to_json().encode()
        return written.with_metadata(metadata)

    return run_fragments(source, out, plan, run, overwrite=overwrite, resume=resume, schema=schema)


def _check_lance_table(store: LanceData) -> None:
    """A dataset whose vector column a LanceDB embedding function fills, or that has indexes,
    refused naming the local engine (which names the function in its plan, refused unless
    --force, and builds the indexes again)."""
    from relrep_hf.migration.stores.lance import embedding_functions

    functions = [f.get("name") for f in embedding_functions(store.schema, store.column)[0]]
    indexes = [index.name for index in store.data.describe_indices()]
    found = [f"the embedding function(s) {functions} filling {store.column!r}"] if functions else []
    found += [f"the index(es) {indexes}"] if indexes else []
    if found:
        raise VectorStoreError(
            f"Lance dataset {str(store.path)!r} has {' and '.join(found)}, which the Ray "
            "re-embed does not carry. Re-embed the LanceDB table with the local engine (relrep-hf reembed "
            "DB_FOLDER --table TABLE --engine local), which rebuilds its indexes and refuses an "
            "embedding function of the old model unless --force; nothing was written."
        )


def _write_empty(
    kind: str, shards: list[Path], stores: list[VectorStore], work: Path, options: dict
) -> None:
    """The empty shards, on the driver: no text to embed, written with the new vectors' width
    and space (those of a shard the actors wrote)."""
    from relrep_hf.migration.space import StoreSpace

    written = [_verified(work, s) for s, o in zip(shards, stores, strict=True) if o.rows]
    space = dict(written[0]["space"])
    space.pop("format")
    space = StoreSpace(**{**space, "aliases": tuple(space["aliases"])})
    for shard, store in zip(shards, stores, strict=True):
        if store.rows == 0 and _verified(work, shard) is None:
            empty = np.empty((0, space.dim), np.float32)
            write_shard(kind, store, work, empty, space, options)


def _space_file(kind: str, work: Path, shards: list[Path]) -> str | None:
    """A datasets folder's record of its space (``store_space.json``): the shards' space,
    unit-length only if every shard's vectors are."""
    if kind != "datasets":
        return None
    records = [json.loads((work / DONE_FOLDER / f"{s.name}.json").read_text()) for s in shards]
    return merged_space(records).to_json()


def merged_space(records: list[dict[str, Any]]) -> Any:
    """The `StoreSpace` the shards' (or fragments') records give, unit-length only if every
    one's vectors are."""
    from relrep_hf.migration.space import StoreSpace

    spaces = [r["space"] for r in records if "space" in r]
    space = dict(spaces[0])
    space.pop("format")
    space["encoder"]["normalized"] = all(s["encoder"]["normalized"] for s in spaces)
    return StoreSpace(**{**space, "aliases": tuple(space["aliases"])})


class _ShardTexts:
    """The texts of every shard, in order (what a dry run reads)."""

    def __init__(self, stores: list[VectorStore], text_column: str):
        self.stores, self.text_column = stores, text_column

    def batches(self, chunk_rows: int) -> Iterator[list[Any]]:
        for store in self.stores:
            yield from store.values(self.text_column, chunk_rows)


def estimate_shards(
    store: str | os.PathLike,
    encoder: str,
    max_rows: int,
    *,
    text_column: str = "text",
    column: str | None = None,
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
) -> Any:
    """A dry run (``--max-rows``) of the sharded store: the first ``max_rows`` texts embedded
    in this process, nothing written, and the whole store's time and cost projected at that
    rate (a `ReembedEstimate`, as the local path's)."""
    from relrep_hf.migration.reembed import _dry_run, _parse

    spec = _parse(encoder)
    if is_lance_dataset(Path(store)):
        stores: list[VectorStore] = [LanceData(str(store), None, column=column)]
    else:
        kind, shards = sharded_store(Path(store))
        stores = [_open_shard(kind, shard, column) for shard in shards]
    texts_of(stores[0], text_column, None, stores[0].id_field)  # a missing column named
    source = _ShardTexts(stores, text_column)
    return _dry_run(spec, source, max_rows, batch_size, sum(s.rows for s in stores))
