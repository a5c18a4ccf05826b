"""What the stores of record batches share (parquet files, datasets folders, LanceDB tables):
`_ArrowStore`, a store with a vector column beside other columns, read and rewritten in batches
of ``chunk_rows`` rows; only the vector column changes, every other column is carried over. The
kinds are `relrep_hf.migration.stores.parquet`, `.datasets` and `.lance`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from relrep_hf.migration.space import SPACE_KEY, StoreSpace
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    Transform,
    VectorStore,
    VectorStoreError,
    kept_rows,
)

__all__ = ["VECTOR_COLUMNS"]

VECTOR_COLUMNS = ("embedding", "embeddings", "vector", "vectors")


def _with_space(schema: pa.Schema, space: StoreSpace | None) -> pa.Schema:
    """``schema`` with its record of the space replaced by ``space`` (or dropped)."""
    metadata = {k: v for k, v in (schema.metadata or {}).items() if k != SPACE_KEY.encode()}
    if space is not None:
        metadata[SPACE_KEY.encode()] = space.to_json().encode()
    return schema.with_metadata(metadata)


def _pick_column(names: list[str], column: str | None, path: Path) -> str:
    found = column or next((n for n in VECTOR_COLUMNS if n in names), None)
    if found not in names:
        raise VectorStoreError(
            f"{str(path)!r} has no vector column {column or 'embedding'!r}; its columns are "
            f"{names}. Name the column holding the vectors with --column."
        )
    return found


def _vector_type(field: pa.Field, path: Path) -> tuple[np.dtype, int | None]:
    kind = field.type
    if not (
        pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind)
    ):
        raise VectorStoreError(
            f"{str(path)!r}: column {field.name!r} is {kind}, not a list of floats (one vector per row)."
        )
    if not pa.types.is_floating(kind.value_type):
        raise VectorStoreError(
            f"{str(path)!r}: column {field.name!r} holds {kind.value_type}, not floating-point values."
        )
    dtype = np.dtype(kind.value_type.to_pandas_dtype())
    return dtype, kind.list_size if pa.types.is_fixed_size_list(kind) else None


def _matrix(array: pa.Array | pa.ChunkedArray, path: Path, column: str) -> np.ndarray:
    """The ``[n, d]`` vectors of a list column (one equal-length list of floats per row)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count:
        raise VectorStoreError(
            f"{str(path)!r}: column {column!r} has {array.null_count} null rows."
        )
    if pa.types.is_fixed_size_list(array.type):
        dim = array.type.list_size
    else:
        lengths = array.value_lengths().to_numpy(zero_copy_only=False)
        dim = int(lengths[0]) if len(lengths) else 0
        if len(lengths) and (lengths != dim).any():
            raise VectorStoreError(
                f"{str(path)!r}: the vectors of column {column!r} differ in length."
            )
    values = array.flatten().to_numpy(zero_copy_only=False)
    return values.reshape(len(array), dim)


def _column(matrix: np.ndarray, like: pa.DataType) -> pa.Array:
    """``matrix [n, d]`` as a column of the kind of ``like`` (fixed-size or variable lists)."""
    values = pa.array(matrix.reshape(-1))
    if pa.types.is_fixed_size_list(like):
        return pa.FixedSizeListArray.from_arrays(values, matrix.shape[1])
    offsets = pa.array(np.arange(len(matrix) + 1, dtype=np.int64) * matrix.shape[1])
    if pa.types.is_list(like):
        offsets = offsets.cast(pa.int32())
        return pa.ListArray.from_arrays(offsets, values)
    return pa.LargeListArray.from_arrays(offsets, values)


def _updated_dims(metadata: dict[bytes, bytes], old: int, new: int) -> dict[bytes, bytes]:
    """Field metadata with each entry naming the vectors' dimension (a key with "dim" in it,
    whose value is the old one) set to the new one; the rest as it was."""
    return {
        key: str(new).encode() if b"dim" in key.lower() and value == str(old).encode() else value
        for key, value in metadata.items()
    }


def _updated_features(metadata: dict, column: str, dim: int, dtype: np.dtype) -> dict:
    """Schema metadata whose ``huggingface`` features (written by ``datasets``' ``to_parquet``)
    give the vector column its new length and dtype, so ``datasets`` reads the new file."""
    import json

    try:
        info = json.loads(metadata[b"huggingface"])
        feature = info["info"]["features"][column]
    except (ValueError, KeyError, TypeError):
        return metadata  # not the layout datasets writes: left as it was
    if isinstance(feature, dict) and isinstance(feature.get("feature"), dict):
        if feature.get("length", -1) != -1:
            feature["length"] = dim
        if "dtype" in feature["feature"]:
            feature["feature"]["dtype"] = str(dtype)
    return {**metadata, b"huggingface": json.dumps(info).encode()}


def _new_type(like: pa.DataType, value: pa.DataType, dim: int) -> pa.DataType:
    if pa.types.is_fixed_size_list(like):
        return pa.list_(value, dim)
    return pa.list_(value) if pa.types.is_list(like) else pa.large_list(value)


class _ArrowStore(VectorStore):
    """A store of record batches with a vector column (``schema``, ``column``)."""

    schema: pa.Schema
    column: str

    def _setup(self, schema: pa.Schema, column: str | None, first: Callable | None) -> None:
        """``first()``: the first rows, read only for variable-length lists (parquet: a row group)."""
        self.schema = schema
        self.column = _pick_column(schema.names, column, self.path)
        self.dtype, dim = _vector_type(schema.field(self.column), self.path)
        if dim is None:  # variable-length lists: the first row says
            batch = first() if first is not None else None
            dim = (
                _matrix(batch.column(self.column), self.path, self.column).shape[1]
                if batch is not None and batch.num_rows
                else 0
            )
        self.dim = dim

    def batches(self, chunk_rows: int) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def fields(self) -> list[str]:
        """The columns `values` reads."""
        return list(self.schema.names)

    def values(self, name: str, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[list]:
        """The values of column ``name`` (texts, ids) as Python lists, a batch at a time."""
        if name not in self.schema.names:
            raise VectorStoreError(
                f"{self.describe()} has no column {name!r}; its columns are {self.schema.names}."
            )
        for batch in self.batches(chunk_rows):
            yield batch.column(name).to_pylist()

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        start = 0
        for batch in self.batches(chunk_rows):
            yield self.vectors(batch.column(self.column), start)
            start += batch.num_rows

    def vectors(self, array: pa.Array | pa.ChunkedArray, start: int) -> np.ndarray:
        """The ``[n, dim]`` vectors of rows ``start..`` (the store's dimension, or an error)."""
        matrix = _matrix(array, self.path, self.column)
        if len(matrix) and matrix.shape[1] != self.dim:
            raise VectorStoreError(
                f"{str(self.path)!r}: the vectors of column {self.column!r} from row {start} are "
                f"{matrix.shape[1]}-d, those before {self.dim}-d: every row must hold one vector "
                "of the same length. Re-embed or drop the rows of the other length."
            )
        return matrix

    def new_schema(self, dim: int, dtype: np.dtype | None = None) -> pa.Schema:
        """The schema with the vector column ``dim``-d of ``dtype``, and a ``dim`` recorded in
        its field metadata updated."""
        index = self.schema.get_field_index(self.column)
        field = self.schema.field(index)
        value = field.type.value_type if dtype is None else pa.from_numpy_dtype(dtype)
        field = field.with_type(_new_type(field.type, value, dim))
        if field.metadata:
            field = field.with_metadata(_updated_dims(field.metadata, self.dim, dim))
        schema = self.schema.set(index, field)
        if schema.metadata and b"huggingface" in schema.metadata:  # datasets' to_parquet
            dtype = self.dtype if dtype is None else np.dtype(dtype)
            schema = schema.with_metadata(
                _updated_features(schema.metadata, self.column, dim, dtype)
            )
        return schema

    def transformed(
        self,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        dtype: np.dtype | None = None,
        skip: np.ndarray | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The store's batches with new vectors (``transform``'s), the rows at the positions
        ``skip`` left out (`relrep_hf.migration.stores.base.kept_rows`)."""
        schema = self.new_schema(dim, dtype)
        index = self.schema.get_field_index(self.column)
        like = self.schema.field(index).type
        dtype = self.dtype if dtype is None else dtype
        start = 0
        for batch in self.batches(chunk_rows):
            read = batch.num_rows
            keep = None if skip is None else kept_rows(skip, start, read)
            if keep is not None:
                batch = batch.filter(pa.array(keep))
            vectors = transform(self.vectors(batch.column(self.column), start))
            columns = list(batch.columns)
            columns[index] = _column(vectors.astype(dtype, copy=False), like)
            start += read
            yield pa.RecordBatch.from_arrays(columns, schema=schema)
