"""A .safetensors file of tensors, one of them the vectors: the ``safetensors`` store kind. Its
space is recorded in the file's ``__metadata__`` (``relrep_hf.space``); the other tensors and
the metadata are carried over."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from relrep_hf.migration.disk import reserve_space
from relrep_hf.migration.space import SPACE_KEY, StoreSpace
from relrep_hf.migration.stores.base import (
    StoreKind,
    Transform,
    VectorStoreError,
    existing_path,
    has_suffix,
)
from relrep_hf.migration.stores.npy import _check_float, _RawStore
from relrep_hf.utils.file_checks import ArtifactFileError, safetensors_shapes

__all__ = ["KIND", "SafetensorsStore"]

SAFETENSORS_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64}
NUMPY_TO_SAFETENSORS = {np.dtype(v): k for k, v in SAFETENSORS_DTYPES.items()}
VECTOR_NAMES = ("embedding", "embeddings", "vector", "vectors")


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


KIND = StoreKind(
    "safetensors",
    has_suffix(".safetensors"),
    existing_path(SafetensorsStore),
    "a .safetensors file",
)
