"""One table of a LanceDB database folder as a vector store, the ``lancedb`` store kind (an
`relrep_hf.migration.stores.arrow` record-batch store): rewritten with the database's other
tables copied, and the table's scalar and full-text indexes built again on the new table. Its
space is recorded in the table's schema metadata (``relrep_hf.space``). An embedding function
of LanceDB's registry recorded for the vector column (the schema's ``embedding_functions``)
embeds new rows and query texts with the old model: the plan names it and the migration refuses
it unless forced; a forced migration writes the new table without it."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from relrep_hf.migration.plan import StorePlan
from relrep_hf.migration.space import SPACE_KEY, StoreSpace
from relrep_hf.migration.stores.arrow import _ArrowStore, _with_space
from relrep_hf.migration.stores.base import (
    StoreKind,
    Transform,
    VectorStoreError,
    existing_path,
    folder_with,
)

__all__ = ["KIND", "LanceStore", "embedding_functions", "is_lancedb_folder"]

FUNCTIONS_KEY = b"embedding_functions"  # LanceDB's embedding registry, in the schema


def is_lancedb_folder(path: Path) -> bool:
    """``path`` is a LanceDB database folder (it holds a ``<table>.lance`` folder)."""
    return any(p.suffix == ".lance" and p.is_dir() for p in path.iterdir())


def embedding_functions(schema: pa.Schema, column: str) -> tuple[list[dict], list[dict]]:
    """The LanceDB embedding functions ``schema`` records: those filling ``column``, the others
    (none where the metadata is not LanceDB's layout)."""
    raw = (schema.metadata or {}).get(FUNCTIONS_KEY)
    try:
        functions = json.loads(raw) if raw else []
    except ValueError:
        return [], []  # not LanceDB's layout: left as it is
    functions = [f for f in functions if isinstance(f, dict)] if isinstance(functions, list) else []
    ours = [f for f in functions if f.get("vector_column") == column]
    return ours, [f for f in functions if f not in ours]


class LanceStore(_ArrowStore):
    """One table of a LanceDB database folder (``table``, default: the only one); the other
    tables are copied as they are."""

    kind = "lancedb"
    records_space = True

    def __init__(
        self, path: Path, *, column: str | None = None, table: str | None = None, **_: object
    ):
        import lancedb

        self.path = path
        self.db = lancedb.connect(str(path))
        names = sorted(p.stem for p in path.iterdir() if p.suffix == ".lance" and p.is_dir())
        if (table is None and len(names) != 1) or (table is not None and table not in names):
            raise VectorStoreError(
                f"{str(path)!r}: the LanceDB database's tables are {names}; name the one to "
                "migrate with --table."
            )
        self.table_name = table or names[0]
        self.table = self.db.open_table(self.table_name)
        self.rows = self.table.count_rows()
        self._setup(
            self.table.schema,
            column
            or ("vector" if column is None and "vector" in self.table.schema.names else None),
            None,
        )
        if self.dim == 0 and self.rows:
            self.dim = next(self.chunks(1)).shape[1]

    def batches(self, chunk_rows: int) -> Iterator[pa.RecordBatch]:
        reader = self.table.search().limit(None).to_batches(chunk_rows)
        for batch in reader:
            yield batch.select(self.schema.names)

    def read_space(self) -> StoreSpace | None:
        record = (self.schema.metadata or {}).get(SPACE_KEY.encode())
        where = f"{str(self.path)!r} (table {self.table_name!r})"
        return None if record is None else StoreSpace.from_json(record, where=where)

    def _embedding_functions(self) -> tuple[list[dict], list[dict]]:
        """The schema's LanceDB embedding functions: those of the vector column, the others."""
        return embedding_functions(self.schema, self.column)

    def plan(self, out: str | os.PathLike, dim: int) -> StorePlan:
        """The vector column's embedding functions named: not carried (refused unless forced)."""
        plan = super().plan(out, dim)
        for function in self._embedding_functions()[0]:
            plan.dropped.append(
                f"the embedding function {function.get('name')!r} (model "
                f"{json.dumps(function.get('model'), sort_keys=True)}) that fills "
                f"{self.column!r} from {function.get('source_column')!r} with the old model: the "
                "new table has none; register the new encoder's function on it afterwards"
            )
        return plan

    def _new_metadata_schema(self, schema: pa.Schema) -> pa.Schema:
        """``schema`` without the vector column's embedding functions (the others kept)."""
        ours, others = self._embedding_functions()
        if not ours:
            return schema
        metadata = {k: v for k, v in (schema.metadata or {}).items() if k != FUNCTIONS_KEY}
        if others:
            metadata[FUNCTIONS_KEY] = json.dumps(others, indent=2).encode()
        return schema.with_metadata(metadata)

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
        """The table rewritten (and the database's other tables copied), with its scalar and
        full-text indexes built again on the new table; an index that cannot be (a vector
        index, trained on the old vectors) is named in a warning."""
        import lancedb

        for other in self.path.iterdir():
            if other.name != f"{self.table_name}.lance":
                copy = shutil.copytree if other.is_dir() else shutil.copy2
                copy(other, staging / other.name)
        out = lancedb.connect(str(staging))
        schema = _with_space(self._new_metadata_schema(self.new_schema(dim, dtype)), space)
        failed: list[BaseException] = []

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                yield from self.transformed(transform, dim, chunk_rows, dtype, skip)
            except BaseException as error:  # LanceDB wraps it in a RuntimeError: keep ours
                failed.append(error)
                raise

        data = pa.RecordBatchReader.from_batches(schema, batches())
        try:
            table = out.create_table(self.table_name, data=data, schema=schema)
        except Exception:
            if failed:
                raise failed[0] from None
            raise
        _rebuild_indexes(self, table)


SCALAR_INDEXES = {"BTree": "BTREE", "Bitmap": "BITMAP", "LabelList": "LABEL_LIST"}
FTS_OPTIONS = (
    "with_position",
    "base_tokenizer",
    "language",
    "max_token_length",
    "lower_case",
    "stem",
    "remove_stop_words",
    "custom_stop_words",
    "ascii_folding",
    "prefix_only",
    "block_size",
)


def _rebuild_indexes(store: LanceStore, table) -> None:
    """Build ``store``'s scalar and full-text indexes again on ``table`` (same names and
    options); warn naming each other index (a vector index: trained on the old space)."""
    for index in store.table.list_indices():
        column = index.columns[0] if len(index.columns) == 1 else None
        if column is not None and index.index_type in SCALAR_INDEXES:
            kind = SCALAR_INDEXES[index.index_type]
            table.create_scalar_index(column, index_type=kind, name=index.name)
        elif column is not None and index.index_type == "FTS":
            details = index.index_details or {}
            options = {k: details[k] for k in FTS_OPTIONS if k in details}
            for option, key in (
                ("ngram_min_length", "min_ngram_length"),
                ("ngram_max_length", "max_ngram_length"),
            ):
                if key in details:
                    options[option] = details[key]
            table.create_fts_index(column, name=index.name, **options)
        else:
            warnings.warn(
                f"{str(store.path)!r}: index {index.name!r} ({index.index_type} on "
                f"{index.columns}) was not rebuilt on the migrated table: it is trained on the "
                "old vectors. Create it again on the new table (table.create_index(...)).",
                stacklevel=2,
            )


KIND = StoreKind(
    "lancedb",
    folder_with(is_lancedb_folder),
    existing_path(LanceStore),
    "a LanceDB database folder",
)
