"""sqlite-vec stores: a ``vec0`` virtual table (``embedding float[d]`` beside metadata,
auxiliary ``+columns`` and partition keys) or a plain table with a BLOB column of float32
vectors, in an SQLite file (``sqlite-vec:PATH#TABLE``).

The migration is one SQLite transaction (``BEGIN IMMEDIATE``): the table is copied as it is to
``TABLE_backup_<time>``, dropped, created again with the new dimension (its indexes too) and
filled with the migrated vectors, rowids and every other column carried over; the count and
rowids are checked, then it commits. Readers see the old table or the new one, never half; a
killed run is rolled back by SQLite's journal; a second writer waits at most ``BUSY_SECONDS``
and then fails. (sqlite-vec 0.1's ``vec0`` tables cannot be renamed: their shadow tables keep
the old name, which is why the old table is copied rather than renamed.)

The space of a table's vectors is recorded in a small side table of the same file,
``relrep_hf_spaces`` (``name`` -> the record's JSON), written in the migration's transaction: a
``vec0`` table has no slot of its own for metadata, and a side table leaves the user's schema
as it was. The backup keeps the old table's record, and a rollback gives it back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from relrep_hf.migration.disk import sqlite_rolled_back
from relrep_hf.migration.plan import StorePlan
from relrep_hf.migration.space import StoreSpace
from relrep_hf.migration.stores import database as db
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    StoreKind,
    Transform,
    VectorStoreError,
    kept_rows,
)

__all__ = ["KIND", "SqliteVecStore", "connect"]

BUSY_SECONDS = 2.0
SPACES_TABLE = "relrep_hf_spaces"  # table name -> the space its vectors are in (JSON)
VECTOR_NAMES = ("embedding", "embeddings", "vector", "vectors")
# The migration's page cache, at least. SQLite's default, 2 MiB, is smaller than the vector BLOB
# of one vec0 chunk that every insert writes into (1,024 rows: 3 MiB at 768-d): at 20,000 rows
# the migration spent 9.6 s of 14.7 s in system time, pages read back from the file; 3.0 s in all
# with 64 MiB (docs/migration.md). Pages are allocated as the transaction touches them.
CACHE_BYTES = 64 * 2**20


def connect(path: str | Path, *, timeout: float = BUSY_SECONDS):
    """An SQLite connection with sqlite-vec loaded (the standard library's ``sqlite3`` where it
    loads extensions, else the ``sqlean.py`` wheel's drop-in one)."""
    sqlite_vec = db.require("sqlite_vec", "sqlite-vec")
    import sqlite3

    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        sqlite3 = db.require("sqlean", "sqlean.py")  # this Python's sqlite3 loads no extensions
    connection = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
    connection.enable_load_extension(True)
    sqlite_vec.load(connection)
    connection.enable_load_extension(False)
    return connection


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _renamed(sql: str, name: str) -> str:
    """A table's CREATE statement ``sql`` creating ``name`` instead."""
    return re.sub(
        r"^(\s*create\s+(?:virtual\s+)?table\s+(?:if\s+not\s+exists\s+)?)(\"[^\"]*\"|\S+?)(\s*(?:using|\())",
        lambda m: m.group(1) + _quote(name) + m.group(3),
        sql, count=1, flags=re.I,
    )  # fmt: skip


class SqliteVecStore(db.DatabaseStore):
    kind = "sqlite-vec"
    records_space = True
    id_field = "rowid"  # the ids a re-embed names rows by
    carries = ("rowids and every column", "the table's indexes (built again)")

    def __init__(self, location: db.DatabaseLocation):
        self.location, self.path = location, Path(location.database)
        if not self.path.is_file():
            raise VectorStoreError(f"{location.shown()!r}: no such SQLite file.")
        self.connection = connect(self.path)
        self.sql = self._schema(location.name)
        self.virtual = bool(re.match(r"\s*create\s+virtual\s+table", self.sql, re.I))
        columns = [row[1] for row in self.connection.execute(f"PRAGMA table_info({self._table})")]
        found = location.column or next((c for c in VECTOR_NAMES if c in columns), None)
        if found not in columns:
            raise VectorStoreError(
                f"{location.shown()!r}: no vector column {location.column or 'embedding'!r}; "
                f"the table's columns are {columns}. Name it (--column)."
            )
        self.column, self.columns = found, [c for c in columns if c != "rowid"]
        self.rows = self.connection.execute(f"SELECT count(*) FROM {self._table}").fetchone()[0]
        self.dtype, self.dim = np.dtype(np.float32), self._dimension()

    @property
    def _table(self) -> str:
        return _quote(self.location.name)

    def _schema(self, name: str | None) -> str:
        listed = [
            row[1:3] for row in self.connection.execute("PRAGMA table_list") if row[0] == "main"
        ]
        virtual = [t for t, kind in listed if kind == "virtual"]
        tables = [
            t
            for t, kind in listed
            if kind in ("table", "virtual") and not any(t.startswith(f"{v}_") for v in virtual)
        ]  # fmt: skip (not shadows)
        row = self.connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        if name is None or row is None:
            raise self.missing("table", [t for t in tables if not t.startswith("sqlite_")])
        return row[0]

    def _dimension(self) -> int:
        if self.virtual:
            declared = self._declared()
            if declared is None:
                raise VectorStoreError(
                    f"{self.location.shown()!r}: column {self.column!r} is not a float[d] vector "
                    "column (int8 and bit vectors are not migrated)."
                )
            return int(declared.group(2))
        sizes = self.connection.execute(
            f"SELECT DISTINCT length({_quote(self.column)}) FROM {self._table} LIMIT 2"
        ).fetchall()
        if len(sizes) > 1 or (sizes and (sizes[0][0] is None or sizes[0][0] % 4)):
            raise VectorStoreError(
                f"{self.location.shown()!r}: column {self.column!r} must hold float32 vectors "
                "of one length (BLOBs of 4 x d bytes, no NULLs)."
            )
        return sizes[0][0] // 4 if sizes else 0

    def _declared(self) -> re.Match | None:
        pattern = rf"(\b{re.escape(self.column)}\s+float\s*\[\s*)(\d+)(\s*\])"
        return re.search(pattern, self.sql, re.I)

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        cursor = self.connection.execute(
            f"SELECT {_quote(self.column)} FROM {self._table} ORDER BY rowid"
        )
        while batch := cursor.fetchmany(chunk_rows):
            yield np.frombuffer(b"".join(row[0] for row in batch), np.float32).reshape(-1, self.dim)

    def fields(self) -> list[str]:
        """``rowid`` and the table's columns (`values` reads them)."""
        return ["rowid", *self.columns]

    def values(self, name: str, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[list]:
        """Column ``name``'s values in the rewrite's order (its scan, `_copy`'s: no ORDER BY)."""
        if name not in self.fields():
            raise VectorStoreError(f"{self.describe()}: no column {name!r} in {self.fields()}.")
        cursor = self.connection.cursor().execute(f"SELECT {_quote(name)} FROM {self._table}")
        while batch := cursor.fetchmany(chunk_rows):
            yield [row[0] for row in batch]

    def _create_sql(self, name: str, dim: int) -> str:
        """The table's CREATE statement for ``name`` with ``dim``-d vectors."""
        sql = _renamed(self.sql, name)
        if self.virtual:
            sql = re.sub(self._declared().re.pattern, rf"\g<1>{dim}\g<3>", sql, count=1, flags=re.I)
        return sql

    def _exists(self, name: str) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE name = ?"
        return self.connection.execute(query, (name,)).fetchone() is not None

    def _indexes(self) -> list[str]:
        return [row[0] for row in self.connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
            (self.location.name,))]  # fmt: skip

    def read_space(self) -> StoreSpace | None:
        return _read_record(self.connection, self.location.name, self.location.shown())

    def rewrite_into(
        self,
        out: str,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        overwrite: bool = False,
        space: StoreSpace | None = None,
        skip=None,
    ) -> db.MigratedLocation:
        """One transaction: the old table kept as a backup copy, the new one written under the
        output's name (the rows at the positions ``skip`` left out), its ``space`` recorded
        (see the module)."""
        name, _ = db.output_name(self, out, overwrite, self._exists)
        skip = db.skipped_positions(skip)
        self.connection.execute(f"PRAGMA cache_size = -{self._cache_bytes(dim) // 1024}")
        try:
            self.connection.execute("BEGIN IMMEDIATE")
        except Exception as error:  # sqlite3/sqlean OperationalError: database is locked
            raise db.StoreBusyError(
                f"{self.describe()}: another writer holds the database ({error}); nothing was "
                "written. Run one migration at a time."
            ) from None
        try:
            backup = self._swap(name, transform, dim, chunk_rows, skip)
            if backup is not None:  # the old vectors' record goes with them
                _move_record(self.connection, name, backup)
            _write_record(self.connection, name, space)
            self.connection.execute("COMMIT")
        except BaseException as error:
            sqlite_rolled_back(self.connection, error, self.describe(), self.path)
            raise
        return db.MigratedLocation(self.location.with_name(name), backup)

    def _cache_bytes(self, dim: int) -> int:
        """The page cache the migration needs: ``CACHE_BYTES``, or eight of a vec0 table's
        chunks (``chunk_size`` rows of the wider vectors) if they are larger."""
        if not self.virtual:
            return CACHE_BYTES
        declared = re.search(r"\bchunk_size\s*=\s*(\d+)", self.sql, re.I)
        chunk_rows = int(declared.group(1)) if declared else 1024  # sqlite-vec's default
        return max(CACHE_BYTES, 8 * chunk_rows * max(self.dim, dim) * 4)

    def _swap(self, name: str, transform: Transform, dim: int, chunk_rows: int, skip) -> str | None:
        if self._schema(self.location.name) != self.sql:
            raise db.StoreBusyError(
                f"{self.describe()}: the table changed since it was opened (another migration?)."
                " Nothing was written; open it again."
            )
        columns = ", ".join(["rowid", *map(_quote, self.columns)])
        source, backup, indexes = self._table, None, self._indexes()
        triggers = [sql for _, sql in self._triggers()]
        if name == self.location.name:  # in place: keep the old rows under the backup name
            backup = db.backup_name(name)
            self.connection.execute(self._create_sql(backup, self.dim))
            self.connection.execute(
                f"INSERT INTO {_quote(backup)} ({columns}) SELECT {columns} FROM {source}"
            )
            self.connection.execute(f"DROP TABLE {source}")
            source = _quote(backup)
        self.connection.execute(self._create_sql(name, dim))
        for index in indexes:  # a plain table's indexes, on the same table name
            self.connection.execute(index)
        left_out = self._copy(source, _quote(name), columns, transform, (chunk_rows, skip))
        self._check(source, _quote(name), left_out)
        for trigger in triggers if backup else ():  # after the copy: it fires none of them
            self.connection.execute(trigger)  # ON the table's name: the new table's now
        return backup

    def _triggers(self) -> list[tuple[str, str]]:
        """The table's triggers: ``(name, CREATE TRIGGER statement)``."""
        return self.connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? "
            "ORDER BY name", (self.location.name,)
        ).fetchall()  # fmt: skip

    def plan(self, out: str, dim: int) -> StorePlan:
        """Rowids and every column carried, the indexes rebuilt; the triggers recreated on the
        new table in place (a new table's input keeps them)."""
        plan = super().plan(out, dim)
        triggers = [f"trigger {name!r}" for name, _ in self._triggers()]
        (plan.carried if plan.in_place else plan.input_only).extend(triggers)
        return plan

    def _copy(
        self, source: str, target: str, columns: str, transform: Transform, batches: tuple
    ) -> set[int]:
        """The rows of ``source`` into ``target``, the vectors through ``transform``, but those
        at the positions ``skip`` (``batches``: ``(chunk_rows, skip)``): their rowids returned."""
        chunk_rows, skip = batches
        at = self.columns.index(self.column) + 1
        marks = ", ".join("?" * (len(self.columns) + 1))
        left_out, position = set(), 0
        # no ORDER BY: each row carries its rowid, and a vec0 table sorts in a temporary B-tree
        cursor = self.connection.cursor().execute(f"SELECT {columns} FROM {source}")
        while batch := cursor.fetchmany(chunk_rows):
            keep = kept_rows(skip, position, len(batch))
            position += len(batch)
            if keep is not None:
                left_out |= {row[0] for row, k in zip(batch, keep, strict=True) if not k}
                batch = [row for row, k in zip(batch, keep, strict=True) if k]
            if not batch:
                continue
            old = np.frombuffer(b"".join(row[at] for row in batch), np.float32)
            new = np.ascontiguousarray(transform(old.reshape(len(batch), self.dim)), np.float32)
            rows = [(*row[:at], new[i].tobytes(), *row[at + 1 :]) for i, row in enumerate(batch)]
            self.connection.executemany(f"INSERT INTO {target} ({columns}) VALUES ({marks})", rows)
        return left_out

    def _check(self, source: str, target: str, left_out: set[int]) -> None:
        count = self.connection.execute(f"SELECT count(*) FROM {target}").fetchone()[0]
        old = self.connection.execute(f"SELECT rowid FROM {source} ORDER BY rowid").fetchall()
        new = self.connection.execute(f"SELECT rowid FROM {target} ORDER BY rowid").fetchall()
        kept = [row for row in old if row[0] not in left_out]
        db.check_copied(self, count, kept == new, f"table {target}", len(left_out))

    def names(self) -> list[str]:
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        return [name for (name,) in self.connection.execute(query)]

    def remove(self, name: str) -> None:
        self.connection.execute(f"DROP TABLE {_quote(name)}")
        _write_record(self.connection, name, None)

    def restore(self, backup: str, *, force: bool = False) -> None:
        """One transaction: the migrated table dropped and created again from the backup (its
        schema, rows, the served table's indexes and triggers), the backup dropped."""
        try:
            self.connection.execute("BEGIN IMMEDIATE")
        except Exception as error:  # sqlite3/sqlean OperationalError: database is locked
            raise db.StoreBusyError(f"{self.describe()}: {error}; nothing was changed.") from None
        try:
            self._restore(backup, force)
            _move_record(self.connection, backup, self.location.name)
            self.connection.execute("COMMIT")
        except BaseException as error:
            sqlite_rolled_back(self.connection, error, self.describe(), self.path)
            raise

    def _restore(self, backup: str, force: bool) -> None:
        kept = self.connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (backup,)
        ).fetchone()
        if kept is None:
            raise VectorStoreError(f"{self.describe()}: no backup table {backup!r}.")
        new = self.connection.execute(
            f"SELECT rowid FROM {self._table} EXCEPT SELECT rowid FROM {_quote(backup)} LIMIT 6"
        ).fetchall()
        db.check_nothing_new(self, [r for (r,) in new], backup, force)
        indexes, triggers = self._indexes(), [sql for _, sql in self._triggers()]
        self.connection.execute(f"DROP TABLE {self._table}")
        self.connection.execute(_renamed(kept[0], self.location.name))
        columns = ", ".join(["rowid", *map(_quote, self.columns)])
        self.connection.execute(
            f"INSERT INTO {self._table} ({columns}) SELECT {columns} FROM {_quote(backup)}"
        )
        for statement in indexes + triggers:  # triggers after the copy: it fires none
            self.connection.execute(statement)
        self.connection.execute(f"DROP TABLE {_quote(backup)}")


def _has_records(connection) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return connection.execute(query, (SPACES_TABLE,)).fetchone() is not None


def _read_record(connection, name: str, where: str) -> StoreSpace | None:
    """The space ``name``'s vectors are in, as the side table records it (None: unrecorded)."""
    if not _has_records(connection):
        return None
    row = connection.execute(f"SELECT space FROM {SPACES_TABLE} WHERE name = ?", (name,)).fetchone()
    return None if row is None else StoreSpace.from_json(row[0], where=where)


def _write_record(connection, name: str, space: StoreSpace | None) -> None:
    """Record ``space`` for table ``name`` (None: drop its record), in the caller's transaction."""
    if space is None:
        if _has_records(connection):
            connection.execute(f"DELETE FROM {SPACES_TABLE} WHERE name = ?", (name,))
        return
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {SPACES_TABLE} (name TEXT PRIMARY KEY, space TEXT NOT NULL)"
    )
    connection.execute(
        f"INSERT OR REPLACE INTO {SPACES_TABLE} (name, space) VALUES (?, ?)",
        (name, space.to_json()),
    )


def _move_record(connection, source: str, target: str) -> None:
    """``source``'s record (or its absence) becomes ``target``'s, in the caller's transaction."""
    if _has_records(connection):
        connection.execute(f"DELETE FROM {SPACES_TABLE} WHERE name = ?", (target,))
        connection.execute(f"UPDATE {SPACES_TABLE} SET name = ? WHERE name = ?", (target, source))


KIND = StoreKind(
    "sqlite-vec",
    db.recognises("sqlite-vec"),
    db.database_opener(SqliteVecStore),
    "a sqlite-vec table (sqlite-vec:PATH#TABLE)",
)
