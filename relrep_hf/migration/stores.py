"""Stored vectors read and rewritten in chunks: the I/O of an embedding migration at scale.

A kind of store is one `StoreKind` entry of `STORE_KINDS` (`register_store_kind`): its name,
whether a location (a path, or a URI for a database) is one, and how to open it. The package's
kinds: a ``.npy`` file, a ``.safetensors`` file, a ``.parquet`` file (an embedding column), a
FAISS index (``.faiss`` / ``.index``: flat indexes), a ``datasets`` folder (``save_to_disk``)
and a LanceDB database folder (one table of it), registered in `relrep_hf.migration.files`.
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from relrep_hf.utils.io import atomic_directory, fsync_directory, fsync_file
from relrep_hf.utils.registry import Registry

__all__ = [
    "STORE_KINDS",
    "StoreKind",
    "VectorStore",
    "VectorStoreError",
    "check_finite",
    "register_store_kind",
    "rewrite_store",
    "store_kind",
]

# ``transform(chunk [n, d_in]) -> [n, d_out]``; a store may pass ``out`` ([n, d_out] of its
# dtype, e.g. a slice of a memory-mapped output file) to be written in place and returned
Transform = Callable[..., np.ndarray]
DEFAULT_CHUNK_ROWS = 32768
FILE_SUFFIXES = {
    ".npy": "npy",
    ".safetensors": "safetensors",
    ".parquet": "parquet",
    ".faiss": "faiss",
    ".index": "faiss",
}


class VectorStoreError(ValueError):
    """A store cannot be read or written as asked; the message names it and says what to do."""


@dataclass(frozen=True)
class StoreKind:
    """One kind of store: ``recognises(location)`` says whether a location (a path, or a URI)
    names a store of this kind; ``open(location, column=, table=)`` opens it as a
    `VectorStore`; ``help`` is the phrase errors and ``--help`` list it by."""

    name: str
    recognises: Callable[[str], bool]
    open: Callable[..., VectorStore]
    help: str


# name -> kind, in the order errors list them; the package's own kinds are registered by
# `relrep_hf.migration.files` (file and folder stores)
STORE_KINDS: Registry[StoreKind] = Registry("store kind")


def register_store_kind(kind: StoreKind) -> StoreKind:
    """Add ``kind``: `open_store`, `migrate_store` and ``relrep-hf migrate`` then take it."""
    return STORE_KINDS.register(kind)


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

    def rewrite_into(
        self,
        out: str | os.PathLike,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        overwrite: bool = False,
    ) -> Path | str:
        """Write the transformed store aside and swap it in at ``out`` in one step, so a reader
        never sees half of it and a killed run leaves ``out`` as it was. Files and folders are
        written beside ``out`` and renamed (`write`); a database store overrides this with its
        own way (a new collection or table, then an alias switch or a renaming transaction)."""
        return rewrite_file_or_folder(self, Path(out), transform, dim, chunk_rows, overwrite)

    def read_all(self) -> np.ndarray:
        """Every vector, ``[rows, dim]`` (small stores: evaluation, tests)."""
        parts = list(self.chunks())
        return np.concatenate(parts) if parts else np.empty((0, self.dim), self.dtype)

    def describe(self) -> str:
        return f"{self.kind} store {str(self.path)!r} ({self.rows} x {self.dim} {self.dtype})"


def store_kind(location: str | os.PathLike) -> str:
    """The name of the registered kind of store at (or meant for) ``location``."""
    for kind in STORE_KINDS.values():
        if kind.recognises(str(location)):
            return kind.name
    kinds = ", ".join(kind.help for kind in STORE_KINDS.values())
    raise VectorStoreError(
        f"{str(location)!r}: not a vector store relrep_hf reads. Give one of: {kinds}."
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
) -> Path | str:
    """Stream ``store`` through ``transform`` into a new store of the same kind at ``out``.

    Written aside first and swapped in only once complete and durable
    (`VectorStore.rewrite_into`); on any error the partial output is removed and ``out``
    (which may be the input itself, with ``overwrite``) is left as it was. Every chunk is
    checked for NaN and infinite values. ``show_progress``: a tqdm bar over rows (None: only on
    a terminal).
    """
    from tqdm.auto import tqdm

    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int, got {chunk_rows!r}.")
    disable = None if show_progress is None else not show_progress
    with tqdm(
        total=store.rows, unit="rows", desc=f"migrating {store.path.name}", disable=disable
    ) as bar:
        apply = _checked_transform(store, transform, dim, bar.update)
        return store.rewrite_into(out, apply, dim, chunk_rows, overwrite=overwrite)


def rewrite_file_or_folder(
    store: VectorStore, out: Path, apply: Transform, dim: int, chunk_rows: int, overwrite: bool
) -> Path:
    """A file or folder store's `VectorStore.rewrite_into`: written beside ``out`` (a file, or
    a staging folder) and renamed into place."""
    _check_output(store, out, overwrite)
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
