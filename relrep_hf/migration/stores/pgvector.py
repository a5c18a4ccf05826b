"""pgvector stores: a PostgreSQL table with a ``vector(d)`` column
(``postgresql://USER@HOST:PORT/DB?table=TABLE&column=COLUMN``), read and written with psycopg 3.

The migration is one transaction: a staging table ``LIKE`` the old one (defaults, constraints,
storage, comments) with a ``vector(d_new)`` column is filled by binary ``COPY`` (every other
column's bytes carried over as they are, in key order), the old table's indexes and
primary/unique constraints are built again on it (HNSW and IVFFlat with their operator classes
and options included), the count and keys are checked, and then the old table (and its
indexes) is renamed to ``TABLE_backup_<time>`` and the staging table (and its indexes) takes
the old names. Readers keep reading the old table until the commit (the exclusive lock is taken
only for the renames); writers of it wait for the commit (a share lock), so the copy is the
table as it is swapped; a killed run's transaction is rolled back by the server; a second
migration of the same table fails at once (a transaction-level advisory lock).

The space of a table's vectors is recorded in a small side table of its schema,
``relrep_hf_spaces`` (the table's oid -> the record's JSON), written in the same transaction.
Not a ``COMMENT``: the table's and the column's comments are the user's (carried as they are),
and a record keyed by oid follows the table through the renames of a migration or a rollback
with nothing to update (the backup keeps the old vectors' record). Records of dropped tables
are removed by the next write.
"""

from __future__ import annotations

import os
import re
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from secrets import token_hex

import numpy as np

from relrep_hf.migration.plan import StorePlan
from relrep_hf.migration.space import StoreSpace
from relrep_hf.migration.stores import database as db
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    StoreKind,
    Transform,
    VectorStoreError,
)
from relrep_hf.migration.stores.pgvector_plan import (
    TableFacts,
    carry_to,
    carry_triggers,
    read_facts,
    table_plan,
)

__all__ = ["KIND", "PgvectorStore"]

VECTOR_NAMES = ("embedding", "embeddings", "vector", "vectors")
SPACES_TABLE = "relrep_hf_spaces"  # a table's oid -> the space its vectors are in (JSON)
# how long the migration waits for the table's locks (a writer idle in a transaction holds one)
LOCK_TIMEOUT = 10.0
SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
HEADER = SIGNATURE + struct.pack(">ii", 0, 0)


class PgvectorStore(db.DatabaseStore):
    kind = "pgvector"
    records_space = True

    def __init__(self, location: db.DatabaseLocation):
        psycopg = db.require("psycopg", "psycopg[binary]")
        self.location, self.path = location, Path(location.name or "pgvector")
        self.dtype = np.dtype(np.float32)
        try:
            self.connection = psycopg.connect(location.database, autocommit=True)
        except psycopg.Error as error:
            raise VectorStoreError(
                f"{location.shown()!r}: cannot connect to PostgreSQL ({str(error).strip()})."
            ) from None
        self.table = self._table()
        columns = self.query(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid "
            "= %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (self._sql(self.table),),
        )  # fmt: skip
        self.columns, types = [c for c, _ in columns], dict(columns)
        vectors = [c for c, t in columns if t.startswith("vector")]
        found = location.column or next((c for c in VECTOR_NAMES if c in types), None)
        found = found if found or len(vectors) != 1 else vectors[0]
        declared = re.fullmatch(r"vector\((\d+)\)", types.get(found, ""))
        if declared is None:
            raise VectorStoreError(
                f"{location.shown()!r}: no vector(d) column {found or 'embedding'!r}; the "
                f"table's columns are {columns}. Name the pgvector column (--column, or "
                "&column=) of a fixed dimension (halfvec, sparsevec and vector without a "
                "dimension are not migrated)."
            )
        self.column, self.type, self.dim = found, types[found], int(declared.group(1))
        self.key = [row[0] for row in self.query(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
            (self._sql(self.table),))]  # fmt: skip
        self.rows = self.query(f"SELECT count(*) FROM {self._sql(self.table)}")[0][0]
        self.id_field = self.key[0] if len(self.key) == 1 else "id"  # a re-embed's row names

    def query(self, sql: str, params: tuple = (), connection=None) -> list[tuple]:
        return (connection or self.connection).execute(sql, params).fetchall()

    def _sql(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def _table(self) -> str:
        name = self.location.name
        found = name is not None and self.query("SELECT to_regclass(%s)", (self._sql(name),))[0][0]
        if not found:
            tables = self.query(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
            raise self.missing("table", [t for (t,) in tables])
        return name

    def _order(self, table: str) -> str:
        key = ", ".join(map(self._sql, self.key)) or "ctid"
        return f"SELECT * FROM {self._sql(table)} ORDER BY {key}"

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        at = self.columns.index(self.column)
        rows: list[bytes] = []
        for fields in self._copy_out(self.connection, self.table):
            rows.append(fields[at])
            if len(rows) == chunk_rows:
                yield self._vectors(rows)
                rows = []
        if rows:
            yield self._vectors(rows)

    def _vectors(self, fields: list[bytes | None]) -> np.ndarray:
        if any(field is None for field in fields):
            raise VectorStoreError(f"{self.describe()}: column {self.column!r} has NULL rows.")
        raw = np.frombuffer(b"".join(field[4:] for field in fields), ">f4")
        return raw.reshape(len(fields), self.dim).astype(np.float32)

    def _copy_out(self, connection, table: str) -> Iterator[list[bytes | None]]:
        """The rows of ``table`` in key order, each a list of its fields' binary values (the
        stream read to its end: the connection serves the next command)."""
        buffer, position, ended = bytearray(), len(HEADER), False
        with connection.cursor().copy(
            f"COPY ({self._order(table)}) TO STDOUT (FORMAT BINARY)"
        ) as copy:
            for data in copy:
                buffer += data
                while not ended and (row := _parse_row(buffer, position)) is not None:
                    fields, position = row
                    ended = fields is None  # the trailer
                    if not ended:
                        yield fields
                del buffer[:position]
                position = 0

    def fields(self) -> list[str]:
        """The table's columns (`values` reads them)."""
        return list(self.columns)

    def values(self, name: str, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[list]:
        """Column ``name``'s values in the rewrite's order (key order, `_order`'s)."""
        if name not in self.columns:
            raise VectorStoreError(f"{self.describe()}: no column {name!r} in {self.columns}.")
        key = ", ".join(map(self._sql, self.key)) or "ctid"
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT {self._sql(name)} FROM {self._sql(self.table)} ORDER BY {key}")
            while batch := cursor.fetchmany(chunk_rows):
                yield [row[0] for row in batch]

    def read_space(self) -> StoreSpace | None:
        if self.query("SELECT to_regclass(%s)", (SPACES_TABLE,))[0][0] is None:
            return None
        found = self.query(
            f"SELECT space FROM {SPACES_TABLE} WHERE relid = %s::regclass", (self._sql(self.table),)
        )
        return StoreSpace.from_json(found[0][0], where=self.location.shown()) if found else None

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
        """One transaction: staging table, copy (the rows at the positions ``skip`` left out),
        indexes, check, the new table's ``space`` recorded, renames (see the module)."""
        psycopg = db.require("psycopg", "psycopg[binary]")
        name, found = db.output_name(self, out, overwrite, self._exists)
        skip = db.skipped_positions(skip)
        writer = psycopg.connect(self.location.database)
        try:
            with writer.transaction():
                self._lock_timeout(writer)
                backup = self._write(writer, name, found, transform, (dim, chunk_rows, skip), space)
        except psycopg.errors.LockNotAvailable:
            raise self._locked() from None
        finally:
            writer.close()
        return db.MigratedLocation(self.location.with_name(name), backup)

    def plan(self, out: str, dim: int) -> StorePlan:
        """What the new table carries and what it cannot (`relrep_hf.migration.stores.pgvector_plan`)."""
        in_place = self.in_place(out)
        plan = StorePlan(self.describe(), str(out), in_place)
        return table_plan(self._facts(self.connection), plan, dim, in_place)

    def _facts(self, connection) -> TableFacts:
        return read_facts(
            lambda sql, params: self.query(sql, params, connection),
            self._sql(self.table),
            self.column,
        )

    def _lock_timeout(self, writer) -> None:
        """Wait at most `LOCK_TIMEOUT` for the table's locks (or the connection's own
        ``lock_timeout``, e.g. ``options=-c lock_timeout=2s`` in the URI)."""
        if self.query("SHOW lock_timeout", (), writer)[0][0] in ("0", "0ms"):
            writer.execute(f"SET LOCAL lock_timeout = '{int(LOCK_TIMEOUT * 1000)}ms'")

    def _locked(self) -> db.StoreBusyError:
        """The error of a lock not granted in time, naming the sessions that hold the table."""
        holders = self.query(
            "SELECT DISTINCT a.pid, a.usename, a.application_name, a.state, a.xact_start::text,"
            " left(a.query, 60) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE "
            "l.relation = %s::regclass AND l.granted AND l.pid <> pg_backend_pid()",
            (self._sql(self.table),),
        )
        shown = "; ".join(
            f"pid {pid} ({user}, application {app!r}, {state}, transaction since {since}, last "
            f"query {query!r})"
            for pid, user, app, state, since, query in holders
        )
        shown = shown or "it has ended since"
        return db.StoreBusyError(
            f"{self.describe()}: the table stays locked by another session ({shown}); nothing was written. Commit or end that transaction (SELECT "
            "pg_terminate_backend(PID) ends a stuck one), then run the migration again; a "
            "longer wait: options=-c lock_timeout=60s in the URI."
        )

    @contextmanager
    def run_lock(self) -> Iterator[None]:
        """A session advisory lock of the server on this table for a whole re-embed, whatever
        machine or working directory each run starts from (the server ends it with the session
        of a killed run); the session is named ``relrep-hf reembed (process PID on HOST)``, which
        a second run's refusal shows."""
        key = f"relrep_hf reembed {self.table}"
        me = f"relrep-hf reembed (process {os.getpid()} on {socket.gethostname()})"
        self.connection.execute("SELECT set_config('application_name', %s, false)", (me[:63],))
        if not self.query("SELECT pg_try_advisory_lock(hashtext(%s))", (key,))[0][0]:
            holders = self.query(
                "SELECT a.pid, a.application_name, a.backend_start::text FROM pg_locks l JOIN "
                "pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                "AND l.objid = (hashtext(%s)::bigint & 4294967295)::oid", (key,)
            )  # fmt: skip
            shown = "; ".join(
                f"{name or 'a session'} (server pid {pid}, since {since})"
                for pid, name, since in holders
            )
            raise self.busy(shown or "a session that has ended since")
        try:
            yield
        finally:
            self.query("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def _exists(self, name: str) -> bool:
        return self.query("SELECT to_regclass(%s)", (self._sql(name),))[0][0] is not None

    def _write(self, writer, name, found, transform, sizes, recorded) -> str | None:
        dim, chunk_rows, skip = sizes  # skip: the positions of the rows left out
        lock = f"relrep_hf migrate {self.table}"
        if not self.query("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (lock,), writer)[0][0]:
            raise db.StoreBusyError(
                f"{self.describe()}: another migration of this table is running; nothing was "
                "written. Run one migration at a time."
            )
        # writers of the table wait until the commit (readers do not): the copy is the table
        writer.execute(f"LOCK TABLE {self._sql(self.table)} IN SHARE MODE")
        now = self.query(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
            "%s::regclass AND attname = %s", (self._sql(self.table), self.column), writer
        )  # fmt: skip
        if now != [(self.type,)]:
            raise db.StoreBusyError(
                f"{self.describe()}: column {self.column!r} is now {now}, not {self.type} (another"
                " migration finished meanwhile?). Nothing was written; open the store again."
            )
        staging = db.staging_name(name) if found else name
        old, new = self._sql(self.table), self._sql(staging)
        facts = self._facts(writer)  # as of the lock: what the plan checked may have changed
        plan = table_plan(facts, StorePlan(self.describe(), name, found), dim, found)
        plan.check(force=True)  # what cannot be done; the rest was refused before, or forced
        space = f" TABLESPACE {self._sql(facts.tablespace)}" if facts.tablespace else ""
        writer.execute(f"CREATE TABLE {new} (LIKE {old} INCLUDING ALL EXCLUDING INDEXES){space}")
        writer.execute(
            f"ALTER TABLE {new} ALTER COLUMN {self._sql(self.column)} TYPE vector({dim})"
        )
        self._copy(writer, staging, transform, dim, chunk_rows, skip)
        indexes = self._build_indexes(writer, staging)
        carry_to(writer, new, facts, self._sql)
        self._carry_sequences(writer, staging, found)
        count = self.query(f"SELECT count(*) FROM {new}", (), writer)[0][0]
        key = ", ".join(map(self._sql, self.key))
        # every key of the old table (rows left out: the new table's keys are among the old's)
        first, second = (new, old) if len(skip) else (old, new)
        same = not self.key or not self.query(
            f"SELECT {key} FROM {first} EXCEPT SELECT {key} FROM {second} LIMIT 1", (), writer
        )
        db.check_copied(self, count, same, f"table {staging!r}", len(skip))
        _write_record(writer, new, recorded)  # by oid: it follows the renames below
        if not found:
            return None
        backup = db.backup_name(name)
        writer.execute(f"LOCK TABLE {self._sql(name)} IN ACCESS EXCLUSIVE MODE")
        writer.execute(f"ALTER TABLE {self._sql(name)} RENAME TO {self._sql(backup)}")
        for index, (temporary, constraint) in indexes.items():
            aside = f"{index[:36]}_backup_{backup[-19:]}"
            self._rename(writer, backup, index, aside, constraint)
            self._rename(writer, staging, temporary, index, constraint)
        writer.execute(f"ALTER TABLE {new} RENAME TO {self._sql(name)}")
        carry_triggers(writer, self._sql(name), facts, self._sql)  # after the copy: none fire
        return backup

    def _carry_sequences(self, writer, staging: str, in_place: bool) -> None:
        """An identity column's new sequence continues after the copied values; a serial
        column's sequence (shared through its default) becomes the new table's only when that
        takes the input's place (a new table beside the input uses it, never owns it: dropping
        the new table must not drop the input's default)."""
        for column in self.columns:
            new, old = (self.query("SELECT pg_get_serial_sequence(%s, %s)",
                                   (self._sql(table), column), writer)[0][0]
                        for table in (staging, self.table))  # fmt: skip
            if new is not None:
                top = f"SELECT max({self._sql(column)}) FROM {self._sql(staging)}"
                writer.execute(
                    f"SELECT setval(%s, m) FROM ({top}) AS t(m) WHERE m IS NOT NULL", (new,)
                )
            elif old is not None and in_place:
                writer.execute(
                    f"ALTER SEQUENCE {old} OWNED BY {self._sql(staging)}.{self._sql(column)}"
                )

    def _rename(self, writer, table: str, index: str, to: str, constraint: bool) -> None:
        if constraint:  # renames its index too
            writer.execute(
                f"ALTER TABLE {self._sql(table)} RENAME CONSTRAINT {self._sql(index)} TO "
                f"{self._sql(to)}"
            )
        else:
            writer.execute(f"ALTER INDEX {self._sql(index)} RENAME TO {self._sql(to)}")

    def _copy(self, writer, staging: str, transform: Transform, dim: int, chunk_rows: int, skip):
        """The old rows (but those at the positions ``skip``) into ``staging`` by binary COPY,
        the vectors through ``transform``."""
        at = self.columns.index(self.column)
        head = struct.pack(">hh", dim, 0)
        sql = f"COPY {self._sql(staging)} FROM STDIN (FORMAT BINARY)"
        with writer.cursor().copy(sql) as copy:
            copy.write(HEADER)
            rows: list[list[bytes | None]] = []
            left_out = set(skip.tolist())
            for position, fields in enumerate(
                self._copy_out(self.connection, self.table) if self.rows else ()
            ):
                if position in left_out:
                    continue
                rows.append(fields)
                if len(rows) == chunk_rows:
                    copy.write(_encode(rows, at, transform, self._vectors, head))
                    rows = []
            if rows:
                copy.write(_encode(rows, at, transform, self._vectors, head))
            copy.write(struct.pack(">h", -1))

    def _indexes_of(self, writer, table: str) -> dict[str, tuple[str, bool, str | None]]:
        """``{index: (definition, backs a constraint, the constraint's definition)}``."""
        found = self.query(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid), k.conname IS NOT NULL, "
            "pg_get_constraintdef(k.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid "
            "WHERE i.indrelid = %s::regclass", (self._sql(table),), writer
        )  # fmt: skip
        return {
            index: (definition, constraint, sql) for index, definition, constraint, sql in found
        }

    def _build_indexes(self, writer, staging: str) -> dict[str, tuple[str, bool]]:
        """The old table's indexes built on ``staging`` under temporary names: ``{old name:
        (temporary name, backs a constraint)}``."""
        built = {}
        for index, (definition, constraint, constraint_sql) in self._indexes_of(
            writer, self.table
        ).items():
            temporary = f"{staging[:40]}_{index[:22]}"
            if constraint:
                writer.execute(
                    f"ALTER TABLE {self._sql(staging)} ADD CONSTRAINT {self._sql(temporary)} "
                    + constraint_sql
                )
            else:
                tail = re.sub(r"^CREATE (UNIQUE )?INDEX \S+ ON (ONLY )?\S+", "", definition)
                unique = "UNIQUE " if definition.startswith("CREATE UNIQUE") else ""
                writer.execute(
                    f"CREATE {unique}INDEX {self._sql(temporary)} ON {self._sql(staging)}{tail}"
                )
            built[index] = (temporary, bool(constraint))
        return built

    def names(self) -> list[str]:
        found = self.query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return [t for (t,) in found]

    def remove(self, name: str) -> None:
        self.connection.execute(f"DROP TABLE {self._sql(name)}")  # no CASCADE: a view refuses

    def restore(self, backup: str, *, force: bool = False) -> None:
        """One transaction: the migrated table (and its indexes) renamed aside, the backup (and
        its indexes) given the names back, the serial sequences returned to it, the migrated
        table dropped."""
        psycopg = db.require("psycopg", "psycopg[binary]")
        writer = psycopg.connect(self.location.database)
        try:
            with writer.transaction():
                self._lock_timeout(writer)
                self._restore(writer, backup, force)
        except psycopg.errors.LockNotAvailable:
            raise self._locked() from None
        finally:
            writer.close()

    def _restore(self, writer, backup: str, force: bool) -> None:
        lock = f"relrep_hf migrate {self.table}"
        if not self.query("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (lock,), writer)[0][0]:
            raise db.StoreBusyError(f"{self.describe()}: a migration of this table is running.")
        name, kept = self._sql(self.table), self._sql(backup)
        writer.execute(f"LOCK TABLE {name}, {kept} IN ACCESS EXCLUSIVE MODE")
        key = ", ".join(map(self._sql, self.key))
        new = [row[0] for row in self.query(
            f"SELECT {key} FROM {name} EXCEPT SELECT {key} FROM {kept} LIMIT 6", (), writer
        )] if key else []  # fmt: skip
        db.check_nothing_new(self, new, backup, force)
        suffix, aside = backup.rsplit("_backup_", 1)[1], db.rolled_back_name(self.table)
        kept_indexes = self._indexes_of(writer, backup)
        for index, (_, constraint, _) in self._indexes_of(writer, self.table).items():
            self._rename(writer, self.table, index, f"{index[:40]}_rb_{token_hex(4)}", constraint)
            if f"{index[:36]}_backup_{suffix}" in kept_indexes:
                self._rename(writer, backup, f"{index[:36]}_backup_{suffix}", index, constraint)
        writer.execute(f"ALTER TABLE {name} RENAME TO {self._sql(aside)}")
        writer.execute(f"ALTER TABLE {kept} RENAME TO {name}")
        for column in self.columns:  # a serial's sequence: the restored table's again
            owned, own = (self.query("SELECT pg_get_serial_sequence(%s, %s)",
                                     (self._sql(t), column), writer)[0][0]
                          for t in (aside, self.table))  # fmt: skip
            if owned is not None and own is None:
                writer.execute(f"ALTER SEQUENCE {owned} OWNED BY {name}.{self._sql(column)}")
        writer.execute(f"DROP TABLE {self._sql(aside)}")


def _write_record(writer, table: str, space: StoreSpace | None) -> None:
    """Record ``space`` for ``table`` (quoted) by its oid, in the writer's transaction; the
    records of tables that are gone are removed."""
    if (
        space is None
        and writer.execute("SELECT to_regclass(%s)", (SPACES_TABLE,)).fetchone()[0] is None
    ):
        return
    writer.execute(
        f"CREATE TABLE IF NOT EXISTS {SPACES_TABLE} (relid oid PRIMARY KEY, space text NOT NULL)"
    )
    writer.execute(
        f"DELETE FROM {SPACES_TABLE} WHERE relid = %s::regclass OR NOT EXISTS "
        f"(SELECT 1 FROM pg_class c WHERE c.oid = {SPACES_TABLE}.relid)",
        (table,),
    )
    if space is not None:
        writer.execute(
            f"INSERT INTO {SPACES_TABLE} (relid, space) VALUES (%s::regclass, %s)",
            (table, space.to_json()),
        )


def _parse_row(buffer: bytearray, position: int) -> tuple[list | None, int] | None:
    """The row of a binary COPY stream at ``position`` (and the next position), ``(None, _)`` at
    the trailer, or None if ``buffer`` does not hold the whole row yet."""
    if len(buffer) < position + 2:
        return None
    (count,) = struct.unpack_from(">h", buffer, position)
    if count == -1:
        return None, position + 2
    fields, at = [], position + 2
    for _ in range(count):
        if len(buffer) < at + 4:
            return None
        (size,) = struct.unpack_from(">i", buffer, at)
        at += 4
        if size == -1:
            fields.append(None)
            continue
        if len(buffer) < at + size:
            return None
        fields.append(bytes(buffer[at : at + size]))
        at += size
    return fields, at


def _encode(rows: list[list], at: int, transform: Transform, vectors, head: bytes) -> bytes:
    """``rows`` in the binary COPY format, their vector field (``at``) through ``transform``."""
    new = np.ascontiguousarray(transform(vectors([row[at] for row in rows])), ">f4")
    parts = []
    for i, row in enumerate(rows):
        parts.append(struct.pack(">h", len(row)))
        for j, field in enumerate(row):
            value = head + new[i].tobytes() if j == at else field
            parts.append(struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)))
            parts.append(value or b"")
    return b"".join(parts)


KIND = StoreKind(
    "pgvector",
    db.recognises("pgvector"),
    db.database_opener(PgvectorStore),
    "a pgvector table (postgresql://USER@HOST/DB?table=T&column=C)",
)
