"""The file formats of `relrep_hf.migration.stores`: .npy and .safetensors, read and written
in chunks through memory maps whose pages are released after each chunk (so memory stays at a
few chunks whatever the size),
and the formats with other columns (parquet, datasets, FAISS, LanceDB) in
`relrep_hf.migration.tables`."""

from __future__ import annotations

import json
import math
import mmap
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from relrep_hf.migration.disk import reserve_space
from relrep_hf.migration.space import SPACE_KEY, StoreSpace, StoreSpaceError
from relrep_hf.migration.stores import (
    DEFAULT_CHUNK_ROWS,
    STORE_KINDS,
    StoreKind,
    Transform,
    VectorStore,
    VectorStoreError,
    register_store_kind,
    store_kind,
)
from relrep_hf.utils.file_checks import ArtifactFileError, safetensors_shapes
from relrep_hf.utils.io import atomic_write_bytes

__all__ = ["NpyStore", "SafetensorsStore", "open_store"]

SAFETENSORS_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64}
NUMPY_TO_SAFETENSORS = {np.dtype(v): k for k, v in SAFETENSORS_DTYPES.items()}
VECTOR_NAMES = ("embedding", "embeddings", "vector", "vectors")


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


class NpyStore(_RawStore):
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


class SafetensorsStore(_RawStore):
    """The vectors are the file's one 2-D tensor, or the one named ``column`` (or ``embedding``,
    ``embeddings``, ...); the other tensors and the metadata are carried over."""

    kind = "safetensors"
    records_space = True

    def __init__(self, path: Path, *, column: str | None = None, **_: object):
        self.path = path
        try:
            shapes = safetensors_shapes(path, what="vectors", source=str(path))
        except ArtifactFileError as error:
            raise VectorStoreError(str(error)) from None
        with open(path, "rb") as file:
            length = int.from_bytes(file.read(8), "little")
            self.header = json.loads(file.read(length))
        self.data_start = 8 + length
        matrices = [n for n, (_, shape) in shapes.items() if len(shape) == 2]
        named = [n for n in VECTOR_NAMES if n in shapes]
        name = column or (matrices[0] if len(matrices) == 1 else (named[0] if named else None))
        if name not in shapes:
            raise VectorStoreError(
                f"{str(path)!r} holds tensors {sorted(shapes)}: say which holds the vectors "
                "(--column NAME), or name it 'embedding'."
            )
        dtype = shapes[name][0]
        if dtype not in SAFETENSORS_DTYPES:
            raise VectorStoreError(
                f"{str(path)!r}: tensor {name!r} is {dtype}; vectors must be F16, F32 or F64."
            )
        self.name, self.dtype = name, np.dtype(SAFETENSORS_DTYPES[dtype])
        _check_float(path, self.dtype, shapes[name][1])
        self.rows, self.dim = shapes[name][1]
        self.offset = self.data_start + self.header[name]["data_offsets"][0]

    def read_space(self) -> StoreSpace | None:
        record = (self.header.get("__metadata__") or {}).get(SPACE_KEY)
        return None if record is None else StoreSpace.from_json(record, where=str(self.path))

    def write(
        self,
        staging: Path,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        dtype=None,
        space: StoreSpace | None = None,
    ) -> None:
        """The file again with the new vectors; its metadata carried, the space's record
        replaced by ``space`` (or dropped)."""
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        entries = {k: v for k, v in self.header.items() if k != "__metadata__"}
        order = sorted(entries, key=lambda k: entries[k]["data_offsets"][0])
        header, position = {}, 0
        metadata = {k: v for k, v in (self.header.get("__metadata__") or {}).items()}
        metadata.pop(SPACE_KEY, None)
        if space is not None:
            metadata[SPACE_KEY] = space.to_json()
        if metadata or "__metadata__" in self.header:
            header["__metadata__"] = metadata
        for name in order:
            entry = dict(entries[name])
            if name == self.name:
                entry["shape"] = [self.rows, dim]
                entry["dtype"] = NUMPY_TO_SAFETENSORS[dtype]
                size = self.rows * dim * dtype.itemsize
            else:
                size = entry["data_offsets"][1] - entry["data_offsets"][0]
            entry["data_offsets"] = [position, position + size]
            header[name], position = entry, position + size
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)  # the format aligns the data to 8 bytes
        data_start = 8 + len(raw)
        with open(staging, "xb") as file, open(self.path, "rb") as source:
            file.write(len(raw).to_bytes(8, "little") + raw)
            for name in order:
                begin, end = header[name]["data_offsets"]
                if name == self.name:
                    reserve_space(file, data_start + end, self.describe())
                    file.seek(data_start + end)
                    continue
                begin, end = entries[name]["data_offsets"]
                source.seek(self.data_start + begin)
                for _ in range(math.ceil((end - begin) / 2**26)):
                    file.write(source.read(min(2**26, end - source.tell() + self.data_start)))
        begin = header[self.name]["data_offsets"][0]
        self._stream(staging, data_start + begin, transform, dim, chunk_rows, dtype)


def _tables(name: str):
    """The module of a kind with other columns, imported when first used (pyarrow, lancedb)."""
    import importlib

    module = "lance_tables" if name == "LanceStore" else "tables"
    return importlib.import_module(f"relrep_hf.migration.{module}")


def _suffix(*suffixes: str) -> Callable[[str], bool]:
    return lambda location: Path(location).suffix in suffixes


def _folder_with(test: Callable[[Path], bool]) -> Callable[[str], bool]:
    return lambda location: Path(location).is_dir() and test(Path(location))


def _is_datasets(path: Path) -> bool:
    return (path / "dataset_info.json").is_file() or (path / "state.json").is_file()


def _is_lancedb(path: Path) -> bool:
    return any(p.suffix == ".lance" and p.is_dir() for p in path.iterdir())


def _existing(opener: Callable[..., VectorStore]) -> Callable[..., VectorStore]:
    """``opener`` of a path, with the "no such file" error before anything is read."""

    def open_path(location: str | os.PathLike, **kw) -> VectorStore:
        if not Path(location).exists():
            raise VectorStoreError(f"{str(location)!r}: no such file or folder.")
        return opener(Path(location), **kw)

    return open_path


def _table_store(name: str) -> Callable[..., VectorStore]:
    return _existing(lambda path, **kw: getattr(_tables(name), name)(path, **kw))


for _kind in (
    StoreKind("npy", _suffix(".npy"), _existing(NpyStore), "a .npy file"),
    StoreKind(
        "safetensors", _suffix(".safetensors"), _existing(SafetensorsStore), "a .safetensors file"
    ),
    StoreKind("parquet", _suffix(".parquet"), _table_store("ParquetStore"), "a .parquet file"),
    StoreKind(
        "faiss",
        _suffix(".faiss", ".index"),
        _table_store("FaissStore"),
        "a FAISS index (.faiss/.index)",
    ),
    StoreKind(
        "datasets",
        _folder_with(_is_datasets),
        _table_store("DatasetsStore"),
        "a datasets folder (save_to_disk)",
    ),
    StoreKind(
        "lancedb",
        _folder_with(_is_lancedb),
        _table_store("LanceStore"),
        "a LanceDB database folder",
    ),
):
    register_store_kind(_kind)


def open_store(
    location: str | os.PathLike, *, column: str | None = None, table: str | None = None
) -> VectorStore:
    """The store at ``location`` (a path, or the URI of a database of a registered kind).
    ``column``: the vector column of a parquet file, datasets folder or LanceDB table (default:
    ``embedding``, ``embeddings`` or ``vector``, whichever exists); for a safetensors file, the
    tensor's name. ``table``: the LanceDB table (default: the only one)."""
    try:
        name = store_kind(location)
    except VectorStoreError:
        if not Path(location).exists():
            raise VectorStoreError(f"{str(location)!r}: no such file or folder.") from None
        raise
    return STORE_KINDS[name].open(location, column=column, table=table)
