"""A Lance dataset migrated on Ray, fragment by fragment: a folder `lance.write_dataset` wrote,
or a LanceDB table's ``TABLE.lance`` folder (`migrate_shards` sends such a folder here).

Each fragment of the dataset's current version is one Ray task: its rows read in chunks, mapped
as `relrep_hf.migration.ray_engine.migrate_batch` maps a Ray Data batch (the single-process
affine apply and its NaN/overflow checks, every other column carried over), and written with
pylance's ``write_fragments`` into a work folder beside ``out`` (``.<out>.ray-shards``), the
new data files recorded with their sha256. The input is only read (at its version when the run
began). When every fragment is written, a new dataset is committed (one ``Overwrite``) in a
staging folder holding links to those files, and swapped in at ``out`` in one step. A stopped
run resumes (``resume=True``) from the fragments whose files still match their sha256.
Ray Data's own ``write_lance`` is not used: Ray 2.60 calls pylance with an argument pylance 14
does not take (``storage_options_provider``); ``ray.data.read_lance`` works and gives a
`ray.data.Dataset` for `migrate_dataset` (tested).

The fragment, commit and resume machinery (`run_fragments`: the work folder, the fragments not
yet verified, one commit swapped in; `write_fragment`: one fragment's rows written and recorded;
`LanceData`: a dataset or one fragment read as a record-batch store) is shared with the Ray
re-embed of a Lance dataset (`relrep_hf.migration.ray_reembed`).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from relrep_hf.migration.ray_engine import DONE_FOLDER
from relrep_hf.migration.stores import VectorStoreError
from relrep_hf.migration.stores.arrow import _ArrowStore, _pick_column, _vector_type
from relrep_hf.utils.io import atomic_directory, atomic_write_bytes, fsync_directory
from relrep_hf.utils.manifest import file_digest

__all__ = ["LanceData", "is_lance_dataset", "migrate_lance", "run_fragments", "write_fragment"]

DATA = "dataset"  # the work folder's Lance dataset, whose data files the tasks write


def is_lance_dataset(folder: Path) -> bool:
    """A Lance dataset's folder: it holds ``_versions``."""
    return (Path(folder) / "_versions").is_dir()


def require_lance() -> Any:
    """The ``lance`` module (pylance), or an ImportError saying how to install it."""
    try:
        import lance
    except ImportError as error:
        raise ImportError(
            f"A Lance dataset on the Ray engine needs pylance: pip install pylance ({error})."
        ) from None
    return lance


class LanceData(_ArrowStore):
    """A Lance dataset at one ``version`` (None: the latest), or one fragment of it, as a
    read-only record-batch store: what a re-embedding actor reads, and what the driver checks
    first."""

    kind = "lance"

    def __init__(
        self,
        source: str,
        version: int | None,
        fragment_id: int | None = None,
        column: str | None = None,
    ):
        lance = require_lance()
        dataset = lance.dataset(source, version=version)
        self.path = Path(source)
        self.data = dataset if fragment_id is None else dataset.get_fragment(fragment_id)
        self.rows = int(self.data.count_rows())
        self._setup(dataset.schema, column, lambda: next(iter(self.batches(1)), None))

    def batches(self, chunk_rows: int) -> Iterator[pa.RecordBatch]:
        return iter(self.data.to_batches(batch_size=chunk_rows))


def write_fragment(
    batches: Iterator[pa.RecordBatch], work: str, fragment_id: int, rows: int, **extra: Any
) -> dict[str, Any]:
    """The new rows of fragment ``fragment_id`` (``rows`` of them) written with pylance's
    ``write_fragments`` into ``work``'s dataset, and recorded with the sha256 of its files (what
    a migrating or re-embedding task ends with; ``extra``: more of the record, JSON)."""
    from lance.fragment import write_fragments

    first = next(batches)
    reader = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
    dataset = Path(work) / DATA
    metadata = write_fragments(reader, str(dataset), schema=first.schema)
    files = [f.path for m in metadata for f in m.data_files()]
    record = {
        "fragment": fragment_id,
        "rows": rows,
        "metadata": [json.dumps(m.to_json()) for m in metadata],
        "files": {name: file_digest(dataset / "data" / name) for name in files},
        "schema": first.schema.serialize().to_pybytes().hex(),
        **extra,
    }
    atomic_write_bytes(
        Path(work) / DONE_FOLDER / f"{fragment_id}.json", json.dumps(record).encode()
    )
    return record


def migrate_lance_fragment(
    migration_map: Any,
    source: str,
    version: int,
    fragment_id: int,
    work: str,
    column: str,
    dtype: str | None,
    chunk_rows: int,
) -> dict[str, Any]:
    """Migrate one fragment into ``work`` (the task each Ray worker runs), recorded with the
    sha256 of its new files."""
    from relrep_hf.migration.ray_engine import migrate_batch

    lance = require_lance()
    fragment = lance.dataset(source, version=version).get_fragment(fragment_id)
    where = f"Lance dataset {source!r}, fragment {fragment_id}"
    wanted = None if dtype is None else np.dtype(dtype)
    mapped = (
        migrate_batch(batch, migration_map=migration_map, column=column, dtype=wanted, where=where)
        for batch in fragment.to_batches(batch_size=chunk_rows)
    )
    batches = (b for table in mapped for b in table.to_batches())
    return write_fragment(batches, work, fragment_id, int(fragment.count_rows()))


def _verified(work: Path, fragment_id: int) -> dict[str, Any] | None:
    """The record of a fragment whose new files are all there with their sha256; else None."""
    try:
        record = json.loads((work / DONE_FOLDER / f"{fragment_id}.json").read_text("utf-8"))
        data = work / DATA / "data"
        same = all(file_digest(data / n) == h for n, h in record["files"].items())
        return record if same else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _check_lance_out(source: Path, out: Path, overwrite: bool) -> None:
    if out.resolve() == source.resolve():
        raise VectorStoreError(
            f"{str(out)!r} is the input dataset itself: the Ray engine writes the new dataset "
            "beside the input and never replaces it. Give another --out."
        )
    if out.exists() and not (overwrite and is_lance_dataset(out)):
        raise VectorStoreError(
            f"{str(out)!r} exists already; nothing was written. Give a new path, or pass "
            "overwrite (--overwrite) to replace a Lance dataset there once the new one is complete."
        )


def _commit(out: Path, work: Path, records: list[dict[str, Any]], schema: pa.Schema) -> None:
    """The new dataset (links to the tasks' files, one ``Overwrite`` commit of ``schema``)
    swapped in."""
    lance = require_lance()
    from lance.fragment import FragmentMetadata

    fragments = [FragmentMetadata.from_json(m) for r in records for m in r["metadata"]]
    with atomic_directory(out) as staging:
        (staging / "data").mkdir()
        for name in (n for r in records for n in r["files"]):
            try:
                os.link(work / DATA / "data" / name, staging / "data" / name)
            except OSError:  # another file system: a copy
                shutil.copy2(work / DATA / "data" / name, staging / "data" / name)
        lance.LanceDataset.commit(str(staging), lance.LanceOperation.Overwrite(schema, fragments))
    shutil.rmtree(work, ignore_errors=True)
    fsync_directory(out.parent)


def written_schema(records: list[dict[str, Any]]) -> pa.Schema:
    """The schema the tasks wrote their fragments with."""
    return pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(records[0]["schema"])))


def run_fragments(
    source: Path,
    out: Path,
    plan: dict[str, Any],
    run: Callable[[list[int], Path], None],
    *,
    overwrite: bool,
    resume: bool,
    schema: Callable[[list[dict[str, Any]]], pa.Schema] = written_schema,
) -> Path:
    """What a migration and a re-embed of a Lance dataset share: the work folder beside ``out``
    started with ``plan`` (or resumed), ``run(fragment ids, work)`` for the fragments not yet
    verified there, then one commit of every fragment (``schema(records)``) swapped in at
    ``out``. ``plan["version"]``: the input's version the tasks read."""
    from relrep_hf.migration.ray_engine import _start_work
    from relrep_hf.utils.locking import folder_lock

    lance = require_lance()
    what, verb = ("re-embed", "re-embed") if "encoder" in plan else ("migration", "migrate")
    dataset = lance.dataset(str(source), version=plan["version"])
    ids = [fragment.fragment_id for fragment in dataset.get_fragments()]
    if not ids:
        raise VectorStoreError(f"Lance dataset {str(source)!r} has no rows to {verb}.")
    work = out.parent / f".{out.name}.ray-shards"
    with folder_lock(work):
        _start_work(work, plan, resume, what)
        todo = [i for i in ids if _verified(work, i) is None]
        if todo:
            run(todo, work)
        _check_lance_out(source, out, overwrite)  # again: it may have appeared meanwhile
        records = [_verified(work, i) for i in ids]
        if any(record is None for record in records):
            raise VectorStoreError(
                f"{str(work)!r}: a fragment's new files changed while this run wrote the "
                f"others. Run again with resume=True (--resume): it {verb}s that fragment again."
            )
        _commit(out, work, records, schema(records))
    return out


def migrate_lance(
    migration_map: Any,
    source: Path,
    out: Path,
    *,
    column: str | None,
    dtype: str | None,
    chunk_rows: int,
    overwrite: bool,
    resume: bool,
    options: dict[str, Any],
) -> Path:
    """The Lance dataset ``source`` migrated into a new one at ``out``, one Ray task per
    fragment (see the module's text); called by `migrate_shards`, which loaded the map and
    checked its report. ``options``: ``max_retries``, ``show_progress``, ``map`` (its digest)."""
    from relrep_hf.migration.ray_engine import run_shard_tasks

    lance = require_lance()
    _check_lance_out(source, out, overwrite)
    dataset = lance.dataset(str(source))
    column = _pick_column(dataset.schema.names, column, source)
    _, dim = _vector_type(dataset.schema.field(column), source)
    d_old = int(migration_map.weight.shape[0])
    if dim is not None and dim != d_old:
        raise VectorStoreError(
            f"Lance dataset {str(source)!r}: column {column!r} holds {dim}-d vectors, the map "
            f"takes {d_old}-d vectors of the old encoder. Give the vectors of the map's source "
            "encoder."
        )
    plan = {"map": options["map"], "source": str(source.resolve()), "kind": "lance"}
    plan |= {"version": dataset.version, "column": column, "dtype": dtype}

    def run(todo: list[int], work: Path) -> None:
        args = (os.path.abspath(source), dataset.version)
        jobs = {
            f"{source}#fragment-{i}": (*args, i, str(work), column, dtype, chunk_rows) for i in todo
        }
        run_shard_tasks(migrate_lance_fragment, migration_map, jobs, work, options)

    return run_fragments(source, out, plan, run, overwrite=overwrite, resume=resume)
