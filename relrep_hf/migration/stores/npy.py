"""A .npy file of vectors: the ``npy`` store kind, read and written in chunks through memory
maps whose pages are released after each chunk (so memory stays at a few chunks whatever the
size). Its space is recorded in a sidecar, ``<name>.space.json``. `_RawStore` (one C-ordered
block of a file) is what the ``safetensors`` kind shares."""

from __future__ import annotations

import json
import mmap
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from relrep_hf.migration.disk import reserve_space
from relrep_hf.migration.space import StoreSpace, StoreSpaceError
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    StoreKind,
    Transform,
    VectorStore,
    VectorStoreError,
    existing_path,
    has_suffix,
)
from relrep_hf.utils.io import atomic_write_bytes

__all__ = ["KIND", "NpyStore", "SidecarSpace", "keep_current_space_record", "space_sidecar"]


def _check_float(path: Path, dtype: np.dtype, shape: tuple) -> None:
    if len(shape) != 2 or dtype.kind != "f":
        raise VectorStoreError(
            f"{str(path)!r}: expected a 2-D floating-point array of vectors [N, d], got shape "
            f"{tuple(shape)} of {dtype}. Save the vectors as float16/32/64 [N, d]."
        )


def _release(mapped: np.memmap, start_byte: int, stop_byte: int) -> None:
    """Drop the pages of bytes [start, stop) of ``mapped`` from this process (its RSS): a shared
    file mapping keeps them, written or not, in the page cache, and faults them back in if read
    again."""
    handle = getattr(mapped, "_mmap", None)
    if handle is None or not hasattr(mmap, "MADV_DONTNEED"):
        return
    base = mapped.offset % mmap.ALLOCATIONGRANULARITY  # where the array starts in the map
    first = (base + start_byte) // mmap.PAGESIZE * mmap.PAGESIZE
    last = base + stop_byte
    if last > first:
        handle.madvise(mmap.MADV_DONTNEED, first, last - first)


class _RawStore(VectorStore):
    """Vectors stored as one C-ordered block of bytes at ``offset`` of a file, read through a
    memory map a chunk at a time, each chunk's pages released once it is used (so the process
    holds a few chunks, whatever the file's size)."""

    offset: int

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        if self.rows == 0:
            return
        vectors = np.memmap(  # copy-on-write: writable arrays for torch, the file never written
            self.path, self.dtype, "c", offset=self.offset, shape=(self.rows, self.dim)
        )
        row_bytes = self.dim * self.dtype.itemsize
        for start in range(0, self.rows, chunk_rows):
            stop = min(start + chunk_rows, self.rows)
            yield vectors[start:stop]
            _release(vectors, start * row_bytes, stop * row_bytes)
        del vectors

    def _stream(
        self, path: Path, offset: int, transform: Transform, dim: int, chunk_rows: int, dtype
    ) -> None:
        """Write the transformed vectors (``dtype``) into the file at ``offset`` (already sized)
        through a memory map: each chunk's ``addmm`` writes its rows in place, then their
        pages go."""
        if self.rows == 0:
            return
        out = np.memmap(path, dtype, "r+", offset=offset, shape=(self.rows, dim))
        row_bytes = dim * dtype.itemsize
        for start, chunk in zip(
            range(0, self.rows, chunk_rows), self.chunks(chunk_rows), strict=True
        ):
            stop = start + len(chunk)
            transform(chunk, out[start:stop])
            _release(out, start * row_bytes, stop * row_bytes)
        out.flush()
        del out


SIDECAR_VERSIONS = 8  # records kept in a sidecar: the file now and the versions before it


def space_sidecar(path: Path) -> Path:
    """The file beside a .npy store that records its space: ``<name>.space.json``."""
    return path.with_name(f"{path.name}.space.json")


def _identity(path: Path) -> list[int]:
    """What tells one version of a file from another: inode, size, modification time (kept by
    the rename that swaps a new version in)."""
    stat = path.stat()
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]


def _sidecar_records(sidecar: Path) -> list[dict]:
    if not sidecar.is_file():
        return []
    try:
        records = json.loads(sidecar.read_text())["records"]
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise TypeError("records is not a list of records")
        return records
    except (ValueError, KeyError, TypeError) as error:
        raise StoreSpaceError(
            f"{str(sidecar)!r}: not a readable record of a store's space ({error}). Remove it "
            "(the store then reads as unrecorded)."
        ) from None


class SidecarSpace:
    """The space of a file store whose format has no metadata slot (.npy, a FAISS index),
    recorded in a sidecar, ``<name>.space.json``, which names the version of the file it
    describes (so a file replaced otherwise reads unrecorded)."""

    path: Path

    def read_space(self) -> StoreSpace | None:
        sidecar = space_sidecar(self.path)
        identity = _identity(self.path)
        for record in _sidecar_records(sidecar):
            if record.get("file") == identity:
                return StoreSpace.from_json(json.dumps(record.get("space")), where=str(sidecar))
        return None

    def record_beside(self, out: Path, space: StoreSpace | None) -> None:
        """The sidecar of ``out`` records ``space`` for the version just swapped in (by its
        identity: a run killed before this leaves the new version unrecorded, never described
        by the old version's record)."""
        sidecar, identity = space_sidecar(out), _identity(out)
        # the earlier versions' records stay (their files may be backups a rollback restores)
        records = [r for r in _sidecar_records(sidecar) if r.get("file") != identity]
        if space is not None:
            records.append({"file": identity, "space": json.loads(space.to_json())})
        _write_sidecar(sidecar, records[-SIDECAR_VERSIONS:])


class NpyStore(SidecarSpace, _RawStore):
    """A .npy file; its space is recorded in a sidecar, ``<name>.space.json``, which names the
    version of the file it describes (so a file replaced otherwise reads unrecorded)."""

    kind = "npy"
    records_space = True

    def __init__(self, path: Path, **_: object):
        self.path = path
        try:  # the header only: the memory map is dropped at once, the data read by chunks
            mapped = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as error:
            raise VectorStoreError(f"{str(path)!r}: not a readable .npy file ({error}).") from None
        shape, dtype, fortran = mapped.shape, mapped.dtype, mapped.flags.f_contiguous
        fortran = fortran and mapped.ndim > 1 and not mapped.flags.c_contiguous
        self.offset = mapped.offset if isinstance(mapped, np.memmap) else 0
        del mapped
        _check_float(path, dtype, shape)
        if fortran or not dtype.isnative:
            raise VectorStoreError(
                f"{str(path)!r}: a Fortran-ordered or non-native-endian array; save it with "
                "np.save(path, np.ascontiguousarray(vectors, dtype='float32'))."
            )
        self.rows, self.dim, self.dtype = shape[0], shape[1], dtype

    def write(
        self,
        staging: Path,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        dtype=None,
        space: StoreSpace | None = None,  # recorded by `record_beside`: .npy has no slot
    ) -> None:
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
        header["shape"] = (self.rows, dim)
        with open(staging, "xb") as file:
            np.lib.format.write_array_header_2_0(file, header)
            offset = file.tell()
            reserve_space(file, offset + self.rows * dim * dtype.itemsize, self.describe())
        self._stream(staging, offset, transform, dim, chunk_rows, dtype)


def keep_current_space_record(path: Path) -> None:
    """Drop from ``path``'s sidecar the records of versions other than the file there now (after
    a rollback swapped an older version back), and the sidecar when none is left."""
    sidecar = space_sidecar(path)
    identity = _identity(path)
    _write_sidecar(sidecar, [r for r in _sidecar_records(sidecar) if r.get("file") == identity])


def _write_sidecar(sidecar: Path, records: list[dict]) -> None:
    if records:
        atomic_write_bytes(sidecar, json.dumps({"records": records}, indent=1).encode())
    else:
        sidecar.unlink(missing_ok=True)


KIND = StoreKind("npy", has_suffix(".npy"), existing_path(NpyStore), "a .npy file")
