"""Vector stores with other columns beside the vectors: parquet files, datasets folders, FAISS
flat indexes (with their ids); LanceDB tables in `relrep_hf.migration.lance_tables`. Each is
read and rewritten in batches of ``chunk_rows`` rows; only the vector column changes, every
other column (and a FAISS index's ids) is carried over (`relrep_hf.migration.stores`)."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from relrep_hf.migration.space import SPACE_KEY, StoreSpace
from relrep_hf.migration.stores import (
    DEFAULT_CHUNK_ROWS,
    Transform,
    VectorStore,
    VectorStoreError,
)

__all__ = ["DatasetsStore", "FaissStore", "ParquetStore"]

VECTOR_COLUMNS = ("embedding", "embeddings", "vector", "vectors")
DATASETS_SPACE_FILE = "store_space.json"  # a datasets folder's record of its space


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
        self, transform: Transform, dim: int, chunk_rows: int, dtype: np.dtype | None = None
    ) -> Iterator[pa.RecordBatch]:
        schema = self.new_schema(dim, dtype)
        index = self.schema.get_field_index(self.column)
        like = self.schema.field(index).type
        dtype = self.dtype if dtype is None else dtype
        start = 0
        for batch in self.batches(chunk_rows):
            vectors = transform(self.vectors(batch.column(self.column), start))
            columns = list(batch.columns)
            columns[index] = _column(vectors.astype(dtype, copy=False), like)
            start += batch.num_rows
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


class ParquetStore(_ArrowStore):
    """A parquet file; its space is recorded in the file's schema metadata (``relrep_hf.space``)."""

    kind = "parquet"
    records_space = True

    def __init__(self, path: Path, *, column: str | None = None, **_: object):
        import pyarrow.parquet as pq

        self.path = path
        try:
            # pages streamed through a buffer, not a column chunk at once: half the peak memory
            self.file = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
        except (pa.ArrowException, OSError) as error:
            raise VectorStoreError(
                f"{str(path)!r}: not a readable parquet file ({error})."
            ) from None
        self.rows = self.file.metadata.num_rows
        self._setup(self.file.schema_arrow, column, lambda: next(self.file.iter_batches(1), None))

    def batches(self, chunk_rows: int) -> Iterator[pa.RecordBatch]:
        return self.file.iter_batches(batch_size=chunk_rows)

    def read_space(self) -> StoreSpace | None:
        record = (self.schema.metadata or {}).get(SPACE_KEY.encode())
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
        import pyarrow.parquet as pq

        schema = _with_space(self.new_schema(dim, dtype), space)
        with pq.ParquetWriter(staging, schema) as writer:
            for batch in self.transformed(transform, dim, chunk_rows, dtype):
                writer.write_batch(batch)


class DatasetsStore(_ArrowStore):
    """A ``save_to_disk`` folder of one `datasets.Dataset`; its features, format (``torch``,
    ``numpy``...) and other columns are kept. Its space is recorded in a file of the folder,
    ``store_space.json``."""

    kind = "datasets"
    records_space = True

    def __init__(self, path: Path, *, column: str | None = None, **_: object):
        self.path = path
        self.dataset = _load_dataset(path)
        self.rows = len(self.dataset)
        table = self.dataset.with_format("arrow")
        self._setup(table.data.schema, column, lambda: next(iter(table[:1].to_batches()), None))

    def batches(self, chunk_rows: int) -> Iterator[pa.RecordBatch]:
        for start in range(0, self.rows, chunk_rows):
            table = self.dataset.with_format("arrow")[start : start + chunk_rows]
            yield from table.combine_chunks().to_batches() or []

    def read_space(self) -> StoreSpace | None:
        record = self.path / DATASETS_SPACE_FILE
        if not record.is_file():
            return None
        return StoreSpace.from_json(record.read_bytes(), where=str(record))

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
        import datasets

        staging = Path(staging).absolute()  # datasets cannot cache beside a bare relative name
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        features = self.dataset.features.copy()
        features[self.column] = datasets.List(datasets.Value(str(dtype)), length=dim)
        if not pa.types.is_fixed_size_list(self.schema.field(self.column).type):
            features[self.column] = datasets.List(datasets.Value(str(dtype)))
        # beside the staging folder, under its name: a killed run's is removed with it
        cache = staging.parent / f"{staging.name}.cache"
        cache.mkdir()
        try:
            rows = self._mapped(transform, dim, chunk_rows, features, cache / "map.arrow", dtype)
            kept = self.dataset.format
            rows = rows.with_format(
                kept["type"],
                columns=kept["columns"],
                output_all_columns=kept["output_all_columns"],
                **kept["format_kwargs"],
            )
            rows.save_to_disk(str(staging))
            if space is not None:  # inside the folder: swapped in with it
                (staging / DATASETS_SPACE_FILE).write_text(space.to_json())
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def _mapped(self, transform, dim, chunk_rows, features, cache, dtype):
        index = self.schema.get_field_index(self.column)
        like = self.schema.field(index).type
        field = self.new_schema(dim, dtype).field(index)
        position = 0

        def replace(table: pa.Table) -> pa.Table:
            nonlocal position
            vectors = transform(self.vectors(table.column(self.column), position))
            position += table.num_rows
            column = _column(vectors.astype(dtype, copy=False), like)
            return table.set_column(index, field, column)

        if self.rows == 0:  # no rows to map: a dataset of the new features
            import datasets

            return datasets.Dataset.from_dict({n: [] for n in features}, features=features)
        return self.dataset.with_format("arrow").map(
            replace,
            batched=True,
            batch_size=chunk_rows,
            features=features,
            cache_file_name=str(cache),
            load_from_cache_file=False,
        )


def _load_dataset(path: Path):
    """``load_from_disk(path)``; a folder of no rows (which ``datasets`` saves with no data file
    and cannot load) gives an empty dataset of its features."""
    import datasets

    try:
        dataset = datasets.load_from_disk(str(path))
    except IndexError:  # no data file: a dataset of 0 rows
        try:
            info = datasets.DatasetInfo.from_directory(str(path))
        except (OSError, ValueError) as error:
            raise VectorStoreError(
                f"{str(path)!r}: not a readable datasets folder ({error})."
            ) from None
        dataset = datasets.Dataset.from_dict(
            {name: [] for name in info.features}, features=info.features
        )
    except (OSError, ValueError) as error:
        raise VectorStoreError(
            f"{str(path)!r}: not a readable datasets folder ({error})."
        ) from None
    if not isinstance(dataset, datasets.Dataset):
        raise VectorStoreError(f"{str(path)!r} holds a DatasetDict: give one split's folder.")
    return dataset


class FaissStore(VectorStore):
    """A flat FAISS index (``IndexFlatL2``/``IndexFlatIP``, optionally inside an ``IndexIDMap``
    or ``IndexIDMap2``, whose ids are carried over). The old index's codes are memory-mapped;
    FAISS builds the new index in memory."""

    kind = "faiss"
    output_dtypes = (np.dtype(np.float32),)  # a flat index holds float32

    def __init__(self, path: Path, **_: object):
        import faiss

        self.path = path
        try:
            # codes memory-mapped: an open (an overwritten output's check too) reads header, ids
            self.owner = index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        except RuntimeError as error:
            raise VectorStoreError(
                f"{str(path)!r}: not a readable FAISS index ({str(error).splitlines()[0]})."
            ) from None
        self.ids = None
        if isinstance(index, (faiss.IndexIDMap, faiss.IndexIDMap2)):
            self.ids = faiss.vector_to_array(index.id_map)
            index = faiss.downcast_index(index.index)
        if not isinstance(index, faiss.IndexFlat):
            raise VectorStoreError(
                f"{str(path)!r}: an index of kind {type(index).__name__}, which is not flat: only "
                "flat indexes (IndexFlatL2, IndexFlatIP, optionally in an IndexIDMap) are migrated. "
                "An IVF or HNSW index's quantizer and graph, and a PQ/SQ index's codes, are built "
                "on the old space: migrate the vectors (keep them in a .npy or reconstruct them with "
                "index.reconstruct_n) and train and fill a new index of that kind with the result."
            )
        if index.metric_type not in (faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT):
            raise VectorStoreError(
                f"{str(path)!r}: an index of metric {index.metric_type} (FAISS METRIC_* code); "
                "a migration map is fitted for cosine/inner-product and L2 search, so only "
                "METRIC_L2 and METRIC_INNER_PRODUCT indexes are migrated. Rebuild it as one of those."
            )
        self.index, self.metric = index, index.metric_type
        self.rows, self.dim, self.dtype = index.ntotal, index.d, np.dtype(np.float32)
        codes = faiss.rev_swig_ptr(index.get_xb(), self.rows * self.dim)
        self.vectors = codes.reshape(self.rows, self.dim)

    @functools.cached_property
    def normalised(self) -> bool:
        """An inner-product index of unit rows (cosine); a pass over every row, by a rewrite."""
        import faiss

        return (
            self.rows > 0
            and self.metric == faiss.METRIC_INNER_PRODUCT
            and all(
                bool(np.abs(np.linalg.norm(chunk.astype(np.float64), axis=1) - 1.0).max() < 1e-3)
                for chunk in self.chunks()
            )
        )

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        for start in range(0, self.rows, chunk_rows):
            yield self.vectors[start : start + chunk_rows]

    def write(
        self, staging: Path, transform: Transform, dim: int, chunk_rows: int, *, dtype=None
    ) -> None:
        """The new flat index of the same metric; an inner-product index of unit vectors only
        (a cosine index) gets unit vectors again."""
        import faiss

        flat = faiss.IndexFlat(dim, self.metric)
        out = flat if self.ids is None else faiss.IndexIDMap2(flat)
        for start, chunk in zip(
            range(0, self.rows, chunk_rows), self.chunks(chunk_rows), strict=True
        ):
            vectors = np.ascontiguousarray(transform(chunk), dtype=np.float32)
            if self.normalised and self.metric == faiss.METRIC_INNER_PRODUCT:
                faiss.normalize_L2(vectors)
            if self.ids is None:
                out.add(vectors)
            else:
                out.add_with_ids(vectors, self.ids[start : start + len(chunk)])
        faiss.write_index(out, str(staging))
