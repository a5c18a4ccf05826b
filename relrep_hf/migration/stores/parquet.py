"""A parquet file with a vector column: the ``parquet`` store kind. Its space is recorded in the
file's schema metadata (``relrep_hf.space``); every other column is carried over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from relrep_hf.migration.space import SPACE_KEY, StoreSpace
from relrep_hf.migration.stores.arrow import _ArrowStore, _with_space
from relrep_hf.migration.stores.base import (
    StoreKind,
    Transform,
    VectorStoreError,
    existing_path,
    has_suffix,
)

__all__ = ["KIND", "ParquetStore"]


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
        skip=None,
    ) -> None:
        import pyarrow.parquet as pq

        schema = _with_space(self.new_schema(dim, dtype), space)
        with pq.ParquetWriter(staging, schema) as writer:
            for batch in self.transformed(transform, dim, chunk_rows, dtype, skip):
                writer.write_batch(batch)


KIND = StoreKind("parquet", has_suffix(".parquet"), existing_path(ParquetStore), "a .parquet file")
