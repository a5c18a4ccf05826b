"""A sharded store migrated on Ray, shard by shard: a folder of parquet shards, or a
``datasets`` folder (``save_to_disk``: its ``data-*.arrow`` shards); a Lance dataset, fragment by
fragment, in `relrep_hf.migration.ray_lance`.

`migrate_shards` gives each input shard to one Ray task, which rewrites it exactly as the
single-process path rewrites a store (`relrep_hf.migration.stores`: the same chunks, the same
affine apply, the same NaN/overflow checks, every other column carried over) into a work
folder beside ``out`` (``.<out>.ray-shards``), records the new shard's sha256, and returns.
The input shards are only read. Once every shard is written, the new folder (the shards, the
store's other files, and ``_relrep_shards.json`` naming each new shard, its rows and sha256) is
swapped in at ``out`` in one step (`relrep_hf.utils.io.atomic_directory`). A driver killed
midway leaves the work folder: ``resume=True`` (``--resume``) keeps each shard whose file still
matches its recorded sha256 and whose input shard is unchanged, and migrates the rest. A worker
that dies is retried by Ray (``max_retries``); then the error names the shard.

Every node must see the input and ``out`` at the same paths (a shared file system).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from relrep_hf.migration.ray_engine import (
    DONE_FOLDER,
    _map_digest,
    _start_work,
    run_shard_tasks,
)
from relrep_hf.migration.ray_lance import is_lance_dataset, migrate_lance
from relrep_hf.migration.stores.arrow import _ArrowStore
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    Transform,
    VectorStore,
    VectorStoreError,
    _check_dtype,
    _checked_transform,
)
from relrep_hf.migration.stores.datasets import (
    DATASETS_SPACE_FILE,
    is_datasets_folder as _is_datasets,
)
from relrep_hf.migration.stores.parquet import ParquetStore
from relrep_hf.utils.io import atomic_directory, atomic_write_bytes, fsync_directory, fsync_file
from relrep_hf.utils.locking import folder_lock
from relrep_hf.utils.manifest import file_digest

__all__ = ["SHARDS_FILE", "ArrowShard", "migrate_shards", "sharded_store"]

SHARDS_FILE = "_relrep_shards.json"  # "_": parquet readers skip it


class ArrowShard(_ArrowStore):
    """One ``data-*.arrow`` shard of a ``datasets`` folder (an Arrow stream file), memory-mapped."""

    kind = "datasets"

    def __init__(self, path: Path, *, column: str | None = None, **_: object):
        self.path = path
        try:
            self.table = pa.ipc.open_stream(pa.memory_map(str(path))).read_all()
        except (pa.ArrowException, OSError) as error:
            raise VectorStoreError(
                f"{str(path)!r}: not a readable Arrow shard ({error})."
            ) from None
        self.rows = self.table.num_rows
        self._setup(
            self.table.schema, column, lambda: next(iter(self.table[:1].to_batches()), None)
        )

    def batches(self, chunk_rows: int) -> Iterator[pa.RecordBatch]:
        return iter(self.table.to_batches(max_chunksize=chunk_rows))

    def write(
        self, staging: Path, transform: Transform, dim: int, chunk_rows: int, *, dtype=None
    ) -> None:
        schema = self.new_schema(dim, dtype)
        with pa.OSFile(str(staging), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
            for batch in self.transformed(transform, dim, chunk_rows, dtype):
                writer.write_batch(batch)


def sharded_store(folder: str | os.PathLike) -> tuple[str, list[Path]]:
    """``(kind, shard paths)`` of a folder of parquet shards (``parquet``) or a ``datasets``
    folder (``datasets``); a VectorStoreError names what the folder is not."""
    folder = Path(folder)
    if not folder.is_dir():
        raise VectorStoreError(
            f"{str(folder)!r}: no such folder. The Ray engine reads a folder of parquet shards, "
            "a datasets folder (save_to_disk) or a Lance dataset."
        )
    if _is_datasets(folder):
        try:
            state = json.loads((folder / "state.json").read_text("utf-8"))
            names = [entry["filename"] for entry in state["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise VectorStoreError(
                f"{str(folder)!r}: a datasets folder whose state.json lists no data files "
                f"({error}). Save it again with Dataset.save_to_disk."
            ) from None
        return "datasets", [folder / name for name in names]
    shards = sorted(p for p in folder.iterdir() if p.suffix == ".parquet" and p.is_file())
    if not shards:
        raise VectorStoreError(
            f"{str(folder)!r} holds no .parquet shards and is not a datasets folder: the Ray "
            "engine reads a folder of parquet shards, a datasets folder (save_to_disk) or a "
            "Lance dataset."
        )
    return "parquet", shards


def _open_shard(kind: str, path: Path, column: str | None) -> VectorStore:
    return (
        ArrowShard(path, column=column) if kind == "datasets" else ParquetStore(path, column=column)
    )


def _check_dim(store: VectorStore, d_old: int) -> None:
    if store.dim != d_old and store.rows:
        raise VectorStoreError(
            f"{store.describe()}: the map takes {d_old}-d vectors of the old encoder, this shard "
            f"holds {store.dim}-d ones. Give the vectors of the map's source encoder (every "
            "shard of one store holds vectors of one encoder)."
        )


def _source_identity(path: Path) -> dict[str, int]:
    status = path.stat()
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns}


def migrate_one_shard(
    migration_map: Any,
    kind: str,
    shard: str,
    work: str,
    column: str | None,
    dtype: str | None,
    chunk_rows: int,
) -> dict[str, Any]:
    """Rewrite ``shard`` into ``work`` (the task each Ray worker runs): the single-process
    store rewrite of one shard, written aside, renamed, and recorded with its sha256."""
    from relrep_hf.migration.migrate import affine_chunks

    source = Path(shard)
    store = _open_shard(kind, source, column)
    d_old, d_new = (int(n) for n in migration_map.weight.shape)
    _check_dim(store, d_old)
    wanted = store.dtype if dtype is None else np.dtype(dtype)
    transform = affine_chunks(migration_map, wanted)
    checked = _checked_transform(store, transform, d_new, wanted, None)
    extra = {} if wanted == store.dtype else {"dtype": wanted}
    return commit_shard(
        store, Path(work), lambda partial: store.write(partial, checked, d_new, chunk_rows, **extra)
    )


def commit_shard(
    store: VectorStore, work: Path, write: Callable[[Path], Any], **record: Any
) -> dict[str, Any]:
    """One shard's new file written by ``write(partial)`` beside its final name in ``work``,
    synced and renamed (a failed write leaves nothing), then recorded as done with its rows,
    sha256, its source's identity and ``record``'s other fields (what `_verified` reads)."""
    source = Path(store.path)
    final = work / source.name
    partial = final.with_name(f".{final.name}.partial-{os.getpid()}")
    try:
        write(partial)
        fsync_file(partial)
        os.replace(partial, final)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    done = {
        "shard": source.name,
        "rows": store.rows,
        "sha256": file_digest(final),
        "source": _source_identity(source),
        **record,
    }
    atomic_write_bytes(work / DONE_FOLDER / f"{source.name}.json", json.dumps(done).encode())
    return done


def _verified(work: Path, shard: Path) -> dict[str, Any] | None:
    """The record of ``shard`` in ``work`` if its new file is there, matches its sha256, and
    its input shard is unchanged; else None (it is migrated again)."""
    try:
        record = json.loads((work / DONE_FOLDER / f"{shard.name}.json").read_text("utf-8"))
        written = work / shard.name
        if record["source"] != _source_identity(shard) or not written.is_file():
            return None
        return record if file_digest(written) == record["sha256"] else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _run_tasks(
    migration_map: Any, kind: str, todo: list[Path], work: Path, options: dict[str, Any]
) -> None:
    """One Ray task per shard of ``todo`` (`migrate_one_shard`), run by `run_shard_tasks`."""
    args = (str(work), options["column"], options["dtype"], options["chunk_rows"])
    jobs = {str(shard): (kind, str(shard), *args) for shard in todo}
    run_shard_tasks(migrate_one_shard, migration_map, jobs, work, options)


def _carry_files(kind: str, source: Path, staging: Path, shards: list[Path], options: dict) -> None:
    """The store's files other than its shards: a datasets folder's state.json, and its
    dataset_info.json with the vector column's new features; a parquet folder's files that are
    not shards, except parquet summary files (``_metadata``), which describe the old schema, and
    the record of the old vectors' space (``store_space.json``), which the new ones are not in."""
    names = {s.name for s in shards}
    for path in source.iterdir():
        if not path.is_file() or path.name in names or path.name.startswith("."):
            continue
        if path.name in ("_metadata", "_common_metadata", SHARDS_FILE, DATASETS_SPACE_FILE):
            continue
        if kind == "datasets" and path.name == "dataset_info.json":
            (staging / path.name).write_text(_new_info(path, shards[0], staging, options))
        else:
            shutil.copy2(path, staging / path.name)


def _new_info(info_path: Path, first_source: Path, staging: Path, options: dict) -> str:
    """dataset_info.json with the features the new shards' schema records (datasets writes the
    same features into both)."""
    info = json.loads(info_path.read_text("utf-8"))
    schema = pa.ipc.open_stream(pa.memory_map(str(staging / first_source.name))).schema
    metadata = json.loads((schema.metadata or {}).get(b"huggingface", b"{}"))
    features = metadata.get("info", {}).get("features")
    if features is not None:
        info["features"] = features
    return json.dumps(info, indent=2, sort_keys=True)


def _swap_in(
    out: Path,
    work: Path,
    source: Path,
    kind: str,
    shards: list[Path],
    plan: dict,
    space: str | None = None,
) -> None:
    """The new folder (shards linked from ``work``, the other files, ``_relrep_shards.json``,
    and a datasets folder's record of its new ``space``, JSON) swapped in at ``out`` in one
    step."""
    records = [json.loads((work / DONE_FOLDER / f"{s.name}.json").read_text()) for s in shards]
    with atomic_directory(out) as staging:
        for shard in shards:
            try:
                os.link(work / shard.name, staging / shard.name)
            except OSError:  # another file system: a copy
                shutil.copy2(work / shard.name, staging / shard.name)
        _carry_files(kind, source, staging, shards, plan)
        listing = {"format": "relrep_hf.ray_shards", "plan": plan, "shards": records}
        (staging / SHARDS_FILE).write_text(json.dumps(listing, indent=2, sort_keys=True))
        if space is not None:
            (staging / DATASETS_SPACE_FILE).write_text(space)
    shutil.rmtree(work, ignore_errors=True)
    fsync_directory(out.parent)


def _check_out(source: Path, out: Path, kind: str, overwrite: bool) -> None:
    if out.resolve() == source.resolve():
        raise VectorStoreError(
            f"{str(out)!r} is the input folder itself: the Ray engine writes the new shards "
            "beside the input and never replaces them. Give another --out."
        )
    if out.exists():
        if not overwrite:
            raise VectorStoreError(
                f"{str(out)!r} exists already; nothing was written. Give a new path, or pass "
                "overwrite (--overwrite) to replace it once the new store is complete."
            )
        try:
            same = sharded_store(out)[0] == kind
        except VectorStoreError:
            same = False
        if not same:
            raise VectorStoreError(
                f"{str(out)!r} exists and is not a sharded store of the input's kind ({kind}): "
                "overwrite replaces only such a store, never another folder. Nothing was written."
            )


def migrate_shards(
    migration_map: Any,
    vectors: str | os.PathLike,
    out: str | os.PathLike,
    *,
    column: str | None = None,
    dtype: str | np.dtype | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    overwrite: bool = False,
    resume: bool = False,
    force: bool = False,
    max_retries: int = 2,
    show_progress: bool | None = None,
) -> Path:
    """Migrate the sharded store ``vectors`` (a folder of parquet shards, or a datasets folder)
    into a new folder ``out`` on Ray, one task per shard (see the module's text).

    ``migration_map``: a `MigrationMap` (or any module with ``weight [d_old, d_new]`` and
    ``bias``) or a saved one's folder or Hub id. ``column``, ``dtype``, ``chunk_rows``,
    ``overwrite``: as `relrep_hf.migration.migrate_store`. ``resume``: keep the verified shards
    of an earlier run that stopped. ``force``: use a map whose own held-out report recommends
    re-embedding (refused otherwise, as by `migrate_store`). ``max_retries``: Ray's retries of a shard whose worker died. ``show_progress``: a bar over
    shards (None: only on a terminal).
    Ray is started here (``ray.init()``: ``RAY_ADDRESS`` or a local cluster) unless the caller
    started it (``ray.init(address=...)``). Every shard is checked (its column, its dimension)
    before any is written.
    """
    from relrep_hf.migration.ray_engine import _loaded_map
    from relrep_hf.migration.report import check_recommendation  # torch: not in a Ray worker

    migration_map = _loaded_map(migration_map)
    check_recommendation(getattr(migration_map, "info", {}), "the migration", force=force)
    if not isinstance(chunk_rows, int) or isinstance(chunk_rows, bool) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int, got {chunk_rows!r}.")
    source, out = Path(vectors), Path(os.path.abspath(out))
    options = {"max_retries": max_retries, "show_progress": show_progress}
    if is_lance_dataset(source):
        from relrep_hf.migration.migrate import _dtype

        wanted = None if dtype is None else str(_dtype(dtype))
        options["map"] = _map_digest(migration_map)
        return migrate_lance(
            migration_map, source, out, column=column, dtype=wanted, chunk_rows=chunk_rows,
            overwrite=overwrite, resume=resume, options=options,
        )  # fmt: skip
    kind, shards = sharded_store(source)
    _check_out(source, out, kind, overwrite)
    d_old = int(migration_map.weight.shape[0])
    stores = [_open_shard(kind, shard, column) for shard in shards]
    for store in stores:
        _check_dim(store, d_old)
    wanted = None if dtype is None else str(_check_dtype(stores[0], dtype))
    plan = {
        "map": _map_digest(migration_map),
        "source": str(source.resolve()),
        "kind": kind,
        "column": stores[0].column,
        "dtype": wanted,
    }
    work = out.parent / f".{out.name}.ray-shards"
    with folder_lock(work):
        _start_work(work, plan, resume)
        todo = [shard for shard in shards if _verified(work, shard) is None]
        options = {**plan, "chunk_rows": chunk_rows, "max_retries": max_retries}
        options["show_progress"] = show_progress
        if todo:
            _run_tasks(migration_map, kind, todo, work, options)
        _check_out(source, out, kind, overwrite)  # again: it may have appeared meanwhile
        _swap_in(out, work, source, kind, shards, plan)
    return out
