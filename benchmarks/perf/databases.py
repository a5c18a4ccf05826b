"""Migrating the database stores (Qdrant local, Chroma, pgvector, sqlite-vec): rows per second.

Each kind: a store of N x 384 float32 vectors with ids and a text payload is migrated in place to
768 dimensions by ``migrate_store`` (read, map, write aside, check, swap), against the plain
client work on the same rows: reading the N old rows with the client and writing N rows of 768-d
vectors with their ids and payloads into a new collection/table (no migration, check or swap).
Qdrant's local mode commits each point on its own, so it gets fewer rows. pgvector runs on a
pgserver PostgreSQL in a temporary folder; its table has a primary key and no vector index.

sqlite-vec gets a second baseline, the in-place pass a careful engineer writes with the client
alone: one transaction that copies the old table to a backup (a ``vec0`` table cannot be
renamed), drops it, creates it again with 768-d vectors and fills it (no check). The other kinds
keep their backup by a rename or an alias switch, which the plain pass does not need either.

    python -m benchmarks databases [--quick] [--rows N] [--kinds qdrant chroma ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import announce_skips, row, unavailable
from relrep_hf import MigrationMap, migrate_store
from tests.fixtures import store_writers

D_OLD, D_NEW = 384, 768
KINDS = ("sqlite-vec", "pgvector", "chroma", "qdrant")
PACKAGES = {"qdrant": ("qdrant_client",), "chroma": ("chromadb",),
            "pgvector": ("pgserver", "psycopg"), "sqlite-vec": ("sqlite_vec",)}  # fmt: skip


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads, per kind (a kind whose packages are missing is
    skipped); sqlite-vec also needs sqlean.py where this Python's sqlite3 loads no extensions."""
    import sqlite3

    packages = dict(PACKAGES)
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        packages["sqlite-vec"] = (*packages["sqlite-vec"], "sqlean")
    return packages


def _rows(kind: str, rows: int) -> int:
    return min(rows // 10, 2_000) if kind == "qdrant" else rows  # ~30 ms a point in local mode


def _write(kind: str, where, name: str, ids: list, vectors: np.ndarray) -> str:
    """The plain client write of ``vectors`` with ids and a payload; the store's URI."""
    texts = [f"row {i}" for i in ids]
    if kind == "sqlite-vec":
        from relrep_hf.migration.stores.sqlite_vec import connect

        connection = connect(Path(where) / "store.db")
        connection.execute("BEGIN")
        _sqlite_table(connection, name, ids, vectors, texts)
        connection.execute("COMMIT")
        connection.close()
        return f"sqlite-vec:{Path(where) / 'store.db'}#{name}"
    if kind == "pgvector":
        import psycopg

        with psycopg.connect(where) as connection:
            connection.execute(
                f"CREATE TABLE {name} (id bigint PRIMARY KEY, body text, "
                f"embedding vector({vectors.shape[1]}))"
            )
            with connection.cursor().copy(f"COPY {name} (id, body, embedding) FROM STDIN") as copy:
                for i, text, vector in zip(ids, texts, vectors, strict=True):
                    copy.write_row((i, text, "[" + ",".join(map(str, vector.tolist())) + "]"))
        return f"{where}&table={name}"
    if kind == "chroma":
        return store_writers.chroma(where, name, [str(i) for i in ids], vectors, texts)
    return store_writers.qdrant(where, name, ids, vectors, [{"body": t} for t in texts])


def _sqlite_table(connection, name: str, ids: list, vectors: np.ndarray, texts: list) -> None:
    """The plain sqlite-vec table ``name`` (vectors, and the texts as an auxiliary column) created
    and filled in the caller's transaction."""
    connection.execute(
        f"CREATE VIRTUAL TABLE {name} USING vec0(embedding float[{vectors.shape[1]}], +body text)"
    )
    connection.executemany(
        f"INSERT INTO {name} (rowid, embedding, body) VALUES (?, ?, ?)",
        zip(ids, (v.tobytes() for v in vectors), texts, strict=True),
    )


def _careful_sqlite(where, name: str, ids: list, vectors: np.ndarray) -> None:
    """The client-only in-place sqlite-vec pass: in one transaction, the old table ``name``
    copied to a backup, dropped, created again with ``vectors``' dimension and filled (the
    SQLite defaults and the table of `_write`)."""
    from relrep_hf.migration.stores.sqlite_vec import connect

    connection = connect(Path(where) / "store.db")
    old = connection.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(old.replace(f"TABLE {name} ", f"TABLE {name}_backup "))
    connection.execute(f"INSERT INTO {name}_backup (rowid, embedding, body) "
                       f"SELECT rowid, embedding, body FROM {name}")  # fmt: skip
    texts = [row[0] for row in connection.execute(f"SELECT body FROM {name} ORDER BY rowid")]
    connection.execute(f"DROP TABLE {name}")
    _sqlite_table(connection, name, ids, vectors, texts)
    connection.execute("COMMIT")
    connection.close()


def _read(uri: str) -> int:
    """Every vector of ``uri`` read with our chunked reader (the client's scroll/get/COPY)."""
    from relrep_hf.migration import open_store

    return sum(len(chunk) for chunk in open_store(uri).chunks(4096))


def measure(kind: str, rows: int, where) -> dict:
    """Rows/s of ``migrate_store`` on a ``kind`` store of ``rows`` rows, and of the plain client
    read + write of the same rows (the baseline)."""
    generator = np.random.default_rng(0)
    old = generator.standard_normal((rows, D_OLD), dtype=np.float32)
    new = generator.standard_normal((rows, D_NEW), dtype=np.float32)
    ids = list(range(1, rows + 1))
    uri = _write(kind, where, "docs", ids, old)
    started = time.perf_counter()
    if _read(uri) != rows:
        raise RuntimeError(f"{uri}: read back fewer than {rows} rows")
    _write(kind, where, "plain", ids, new)
    baseline = time.perf_counter() - started
    careful = {}
    if kind == "sqlite-vec":  # read + backup copy + write, in place, in one transaction
        _write(kind, where, "careful", ids, old)
        started = time.perf_counter()
        if _read(uri.replace("#docs", "#careful")) != rows:
            raise RuntimeError(f"{uri}: read back fewer than {rows} rows")
        _careful_sqlite(where, "careful", ids, new)
        careful = {"careful_seconds": time.perf_counter() - started}
        careful["careful_value"] = rows / careful["careful_seconds"]
    weights = torch.Generator().manual_seed(0)
    migration_map = MigrationMap(torch.randn(D_OLD, D_NEW, generator=weights) / D_OLD**0.5,
                                 torch.zeros(D_NEW))  # fmt: skip
    started = time.perf_counter()
    migrate_store(migration_map, uri, uri, overwrite=True, chunk_rows=4096, show_progress=False)
    ours = time.perf_counter() - started
    return row(
        f"migrate a {kind} store in place, {rows:,} x {D_OLD} -> {D_NEW}",
        "the client's read of the old rows + write of new ones",
        rows / baseline,
        rows / ours,
        "rows/s",
        seconds=ours,
        baseline_seconds=baseline,
        **careful,
    )


def _where(kind: str, folder: Path, servers: list):
    if kind != "pgvector":
        (folder / kind).mkdir()
        return folder / kind
    servers.append(store_writers.postgres(folder / "pg"))
    return servers[-1].get_uri()


def run(quick: bool = False, rows: int | None = None, kinds=KINDS) -> list[dict]:
    """Each kind of ``kinds`` whose packages are installed (`needs`; ``python -m benchmarks``
    says the others in one line each before anything runs)."""
    rows = rows or (500 if quick else 100_000)  # quick: a crash check of every kind
    missing = unavailable(needs(quick))
    results, servers = [], []
    with tempfile.TemporaryDirectory(prefix="relrep-bench-databases-") as folder:
        try:
            for kind in (kind for kind in kinds if kind not in missing):
                where = _where(kind, Path(folder), servers)
                results.append(measure(kind, _rows(kind, rows), where))
        finally:
            for server in servers:
                server.cleanup()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks databases", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="500 rows (Qdrant 50): a crash check")
    parser.add_argument("--rows", type=int, default=None, help="rows per store (default 100,000)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    args = parser.parse_args(argv)
    announce_skips("databases", {kind: needs(args.quick)[kind] for kind in args.kinds})
    for result in run(args.quick, args.rows, args.kinds):
        print(
            f"{result['benchmark']}: {result['value']:,.0f} rows/s ({result['seconds']:.1f} s); "
            f"{result['baseline']}: {result['baseline_value']:,.0f} rows/s "
            f"({result['baseline_seconds']:.1f} s); ratio {result['ratio']:.2f}"
            + (
                f"; in place with a backup copy, client only: {result['careful_value']:,.0f} "
                f"rows/s ({result['careful_seconds']:.1f} s); ratio "
                f"{result['value'] / result['careful_value']:.2f}"
                if "careful_value" in result
                else ""
            )
        )
