"""Stored vectors moved into a new encoder's space: ``migrate`` (the anchor path alone: the old
encoder's projector, then the inverse of the new one's) and ``migrate_store``, which streams a
stored corpus (.npy, .safetensors, parquet, datasets, FAISS, LanceDB) through a map in chunks
(`relrep_hf.migration.stores`), written aside and renamed into place when complete.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.plan import StorePlan
from relrep_hf.migration.report import check_recommendation
from relrep_hf.migration.space import check_map_source, map_space
from relrep_hf.migration.stores import (
    DEFAULT_CHUNK_ROWS,
    VectorStoreError,
    open_store,
    rewrite_store,
)
from relrep_hf.migration.stores.base import check_rows_finite

if TYPE_CHECKING:  # a store migration (a map) loads neither transformers nor the projectors
    from relrep_hf.models.modeling_relative_projector import RelativeProjector

__all__ = ["affine_chunks", "migrate", "migrate_store", "plan_migration"]


def migrate(
    vectors: Tensor | np.ndarray,
    source: RelativeProjector,
    target: RelativeProjector,
    *,
    ridge: float = 0.0,
) -> Tensor:
    """Old-encoder ``vectors [N, d_source]`` in the new encoder's space ``[N, d_target]``.

    ``source`` and ``target`` are the two encoders' projectors of one anchor set (the target's
    anchors must span its space: as many anchors as its dimensions, or more). ``ridge``
    regularises the inversion (`relrep_hf.translation.inverse.relative_inverse`).

    Example:
        >>> new = migrate(old, RelativeProjector.from_pretrained("run/projectors/minilm"),
        ...               RelativeProjector.from_pretrained("run/projectors/e5"))  # doctest: +SKIP
    """
    from relrep_hf.translation.translator import translation_map

    x = torch.as_tensor(np.asarray(vectors) if not isinstance(vectors, Tensor) else vectors)
    with torch.no_grad():
        return translation_map(source, target, ridge=ridge)(x.to(source.weight.dtype))


def affine_chunks(migration_map: MigrationMap | Any, dtype: np.dtype) -> Any:
    """``chunk [n, d_old] -> [n, d_new]``: one fused ``addmm`` per chunk, computed in float32
    (float64 for float64 vectors) and returned as NumPy."""
    compute = torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
    weight = migration_map.weight.detach().cpu().to(compute).contiguous()  # [d_old, d_new]
    bias = migration_map.bias.detach().cpu().to(compute)  # [d_new]

    def apply(chunk: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        rows = torch.from_numpy(chunk if chunk.flags.writeable else np.array(chunk))
        rows = rows.to(compute)  # [n, d_old]
        if out is not None and out.dtype == np.dtype(str(compute).split(".")[1]):
            torch.addmm(bias, rows, weight, out=torch.from_numpy(out))  # in place: one pass
            return out
        result = torch.addmm(bias, rows, weight).numpy()  # [n, d_new]
        if out is not None:
            out[...] = result
            return out
        return result

    return apply


def _dtype(dtype: object) -> np.dtype:
    try:
        return np.dtype(dtype)
    except TypeError:
        raise VectorStoreError(
            f"dtype={dtype!r} is not a NumPy dtype; give float16/32/64."
        ) from None


def migrate_store(
    migration_map: MigrationMap | str | os.PathLike,
    vectors: str | os.PathLike,
    out: str | os.PathLike,
    *,
    column: str | None = None,
    table: str | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    overwrite: bool = False,
    show_progress: bool | None = None,
    dtype: str | np.dtype | None = None,
    force: bool = False,
) -> Path | str:
    """Stream the stored old-encoder ``vectors`` through ``migration_map`` into a new store
    ``out`` of the same kind, every other column carried over.

    ``migration_map``: a `MigrationMap` (or any module with ``weight [d_old, d_new]`` and
    ``bias``), or the folder or Hub id of a saved one. ``vectors``: a .npy, .safetensors,
    .parquet or FAISS file, a datasets folder or a LanceDB database folder (``column``,
    ``table``: see `relrep_hf.migration.stores.open_store`), or a database URI (Qdrant, Chroma,
    pgvector, sqlite-vec: `relrep_hf.migration.stores.database`). The new store is written
    aside and renamed into place when complete; ``out`` must not exist unless ``overwrite``
    (which replaces only a store of the same kind). ``dtype``: the new vectors' dtype (default:
    the store's), e.g. ``"float32"`` for a float16 store whose migrated values exceed float16. A
    database store's ``out`` names a collection/table of the same database; the result is then
    a `MigratedLocation` whose ``backup`` names the replaced collection/table, kept. What the
    rewrite cannot carry (`plan_migration`), and a map whose own held-out report recommends
    re-embedding, are refused unless ``force``.

    The new store records its space (`relrep_hf.migration.space`: the map's fingerprint, source
    and target) where its kind keeps a record; a store whose record says its vectors are not in
    the map's source space (another encoder's, the map's target already, or migrated by this
    very map) is refused with a `StoreSpaceError`, nothing written.
    """
    migration_map, store, d_new = _opened(migration_map, vectors, column, table)
    check_recommendation(getattr(migration_map, "info", {}), "the migration", force=force)
    check_map_source(store.read_space(), migration_map, store.describe())
    # computed in float64 for a float64 output, float32 otherwise
    transform = affine_chunks(migration_map, store.dtype if dtype is None else _dtype(dtype))
    return rewrite_store(
        store,
        out,
        transform,
        d_new,
        chunk_rows=chunk_rows,
        overwrite=overwrite,
        show_progress=show_progress,
        dtype=dtype,
        force=force,
        space=map_space(migration_map),
    )


def _opened(migration_map: Any, vectors: Any, column: str | None, table: str | None):
    """The map (loaded if a folder or Hub id), the store, and the map's output width, the store
    checked to hold the map's input width."""
    if not isinstance(migration_map, torch.nn.Module):
        migration_map = MigrationMap.from_pretrained(migration_map)
    store = open_store(vectors, column=column, table=table)
    d_old, d_new = migration_map.weight.shape
    if store.dim != d_old and not (store.rows == 0 and store.dim == 0):  # 0: unknown, no rows
        raise VectorStoreError(
            f"{store.describe()}: the map takes {d_old}-d vectors of the old encoder, the store "
            f"holds {store.dim}-d ones. Give the vectors of the map's source encoder."
        )
    return migration_map, store, d_new


def plan_migration(
    migration_map: MigrationMap | str | os.PathLike,
    vectors: str | os.PathLike,
    out: str | os.PathLike,
    *,
    column: str | None = None,
    table: str | None = None,
) -> StorePlan:
    """What `migrate_store` with the same arguments would carry into ``out`` and what it
    cannot (`relrep_hf.migration.plan.StorePlan`); nothing is written."""
    migration_map, store, d_new = _opened(migration_map, vectors, column, table)
    return store.plan(out, d_new)


def estimate_migration(
    migration_map: MigrationMap | str | os.PathLike,
    vectors: str | os.PathLike,
    max_rows: int,
    *,
    column: str | None = None,
    table: str | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> str:
    """A dry run of `migrate_store` (``relrep-hf migrate --max-rows``): the store's first
    ``max_rows`` rows read, mapped (`affine_chunks`, checked finite) and written to a scratch
    .npy, timed; the whole store's time and cost projected from that rate
    (`relrep_hf.migration.throughput`). Writes nothing beside the store."""
    import tempfile
    import time

    from relrep_hf.migration.throughput import Throughput, dry_run_text

    if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1:
        raise ValueError(f"max_rows must be a positive int, got {max_rows!r}.")
    migration_map, store, d_new = _opened(migration_map, vectors, column, table)
    transform = affine_chunks(migration_map, store.dtype)
    done = 0
    with tempfile.TemporaryDirectory(prefix="relrep-migrate-dry-") as scratch:
        start = time.perf_counter()
        with open(Path(scratch) / "rows.npy", "wb") as sink:
            for chunk in store.chunks(min(chunk_rows, max_rows)):
                chunk = chunk[: max_rows - done]
                check_rows_finite(chunk, done, store)
                np.save(sink, transform(chunk).astype(store.dtype, copy=False))
                done += len(chunk)
                if done >= max_rows:
                    break
        seconds = time.perf_counter() - start
    measured = Throughput("migrate", done, seconds)
    return dry_run_text(
        measured, store.rows, done="Migrated", note=f"read, mapped to {d_new}-d, written aside"
    )
