"""Stored vectors read and rewritten in chunks: the I/O of an embedding migration at scale.

`open_store` recognises a store by its path: a ``.npy`` file, a ``.safetensors`` file, a
``.parquet`` file (an embedding column), a FAISS index (``.faiss`` / ``.index``: flat indexes),
a ``datasets`` folder (``save_to_disk``) or a LanceDB database folder (one table of it).
`rewrite_store` streams a store through ``transform`` (``[n, d_in] -> [n, d_out]``, one chunk at
a time) into a new store of the same kind, carrying every other column (ids, texts) and
tensor over. The new store is written beside its final name and renamed into place only when
complete, so a killed run leaves no half-written store and an existing one untouched; an
existing output is refused unless ``overwrite``. Every chunk is checked for NaN and infinite
values before it is written. The formats, and `open_store` that picks one, live in
`relrep_hf.migration.files` (.npy, .safetensors) and `relrep_hf.migration.tables`.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from relrep_hf.utils.io import atomic_directory, fsync_directory, fsync_file

__all__ = [
    "STORE_KINDS",
    "VectorStore",
    "VectorStoreError",
    "check_finite",
    "rewrite_store",
]

# ``transform(chunk [n, d_in]) -> [n, d_out]``; a store may pass ``out`` ([n, d_out] of its
# dtype, e.g. a slice of a memory-mapped output file) to be written in place and returned
Transform = Callable[..., np.ndarray]
DEFAULT_CHUNK_ROWS = 32768
STORE_KINDS = ("npy", "safetensors", "parquet", "faiss", "datasets", "lancedb")
FILE_SUFFIXES = {
    ".npy": "npy",
    ".safetensors": "safetensors",
    ".parquet": "parquet",
    ".faiss": "faiss",
    ".index": "faiss",
}


class VectorStoreError(ValueError):
    """A store cannot be read or written as asked; the message names it and says what to do."""


class VectorStore:
    """One readable store of ``rows`` vectors of ``dim`` dimensions (``dtype``)."""

    kind: str = ""
    path: Path
    rows: int
    dim: int
    dtype: np.dtype

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        """The vectors, ``[<= chunk_rows, dim]`` at a time, in order."""
        raise NotImplementedError

    def write(self, staging: Path, transform: Transform, dim: int, chunk_rows: int) -> None:
        """Write the transformed store (``dim``-d vectors, everything else as it was) at
        ``staging`` (a new file path, or an empty folder for folder stores)."""
        raise NotImplementedError

    def read_all(self) -> np.ndarray:
        """Every vector, ``[rows, dim]`` (small stores: evaluation, tests)."""
        parts = list(self.chunks())
        return np.concatenate(parts) if parts else np.empty((0, self.dim), self.dtype)

    def describe(self) -> str:
        return f"{self.kind} store {str(self.path)!r} ({self.rows} x {self.dim} {self.dtype})"


def store_kind(path: Path) -> str:
    """The kind of store at (or meant for) ``path``, from its suffix or its folder's files."""
    if path.suffix in FILE_SUFFIXES:
        return FILE_SUFFIXES[path.suffix]
    if path.is_dir():
        if (path / "dataset_info.json").is_file() or (path / "state.json").is_file():
            return "datasets"
        if any(p.suffix == ".lance" and p.is_dir() for p in path.iterdir()):
            return "lancedb"
    raise VectorStoreError(
        f"{str(path)!r}: not a vector store relrep_hf reads. Give a .npy, .safetensors, .parquet "
        "or FAISS (.faiss/.index) file, a datasets folder (save_to_disk) or a LanceDB database "
        "folder."
    )


def check_finite(chunk: np.ndarray, start: int, store: VectorStore) -> None:
    """Raise naming the store and the first rows of ``chunk`` (rows from ``start``) that hold
    NaN or infinite values."""
    finite = np.isfinite(chunk)
    if finite.all():
        return
    bad = np.flatnonzero(~finite.all(axis=1))
    rows = ", ".join(str(start + int(i)) for i in bad[:5])
    raise VectorStoreError(
        f"{store.describe()}: {len(bad)} row(s) of the chunk from row {start} hold NaN or "
        f"infinite values (rows {rows}{', ...' if len(bad) > 5 else ''}). Re-embed or drop those "
        "rows first; nothing was written."
    )


def _checked_transform(
    store: VectorStore, transform: Transform, dim: int, progress: Callable[[int], None] | None
) -> Transform:
    position = 0

    def apply(chunk: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        nonlocal position
        check_finite(chunk, position, store)
        out = transform(chunk) if out is None else transform(chunk, out)
        if out.shape != (len(chunk), dim):
            raise RuntimeError(f"The transform gave {out.shape}, expected {(len(chunk), dim)}.")
        position += len(chunk)
        if progress is not None:
            progress(len(chunk))
        return out

    return apply


def _check_output(store: VectorStore, out: Path, overwrite: bool) -> None:
    kind = store_kind(out) if out.suffix in FILE_SUFFIXES else store.kind
    if kind != store.kind:
        raise VectorStoreError(
            f"{str(out)!r}: the output must be a store of the input's kind ({store.kind}, "
            f"{str(store.path)!r}), not {kind}. Give a path with the input's suffix."
        )
    if out.exists() and not overwrite:
        raise VectorStoreError(
            f"{str(out)!r} exists already; nothing was written. Give a new path, or pass "
            "overwrite (--overwrite) to replace it once the new store is complete."
        )
    if out.exists() and out.is_dir() != store.path.is_dir():
        raise VectorStoreError(f"{str(out)!r} exists and is not a {store.kind} store.")


def rewrite_store(
    store: VectorStore,
    out: str | os.PathLike,
    transform: Transform,
    dim: int,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    overwrite: bool = False,
    show_progress: bool | None = None,
) -> Path:
    """Stream ``store`` through ``transform`` into a new store of the same kind at ``out``.

    Written aside first (a file beside ``out``, or a staging folder) and renamed into place
    only once complete and durable; on any error the partial output is removed and ``out``
    (which may be the input itself, with ``overwrite``) is left as it was. ``show_progress``:
    a tqdm bar over rows (None: only on a terminal).
    """
    from tqdm.auto import tqdm

    out = Path(out)
    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int, got {chunk_rows!r}.")
    _check_output(store, out, overwrite)
    disable = None if show_progress is None else not show_progress
    with tqdm(
        total=store.rows, unit="rows", desc=f"migrating {store.path.name}", disable=disable
    ) as bar:
        apply = _checked_transform(store, transform, dim, bar.update)
        if store.path.is_dir():
            with atomic_directory(out) as staging:
                store.write(staging, apply, dim, chunk_rows)
        else:
            _write_file_aside(store, out, apply, dim, chunk_rows)
    return out


def _write_file_aside(
    store: VectorStore, out: Path, apply: Transform, dim: int, chunk_rows: int
) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}.partial-{os.getpid()}-{secrets.token_hex(4)}{out.suffix}")
    try:
        store.write(staging, apply, dim, chunk_rows)
        fsync_file(staging)
        os.replace(staging, out)
    except BaseException:
        if staging.is_dir():
            shutil.rmtree(staging, ignore_errors=True)
        staging.unlink(missing_ok=True)
        raise
    fsync_directory(out.parent)
