"""The database stores of a migration (relrep_hf.migration.stores.database and its four kinds), each
tested on the real database: Qdrant local mode, a Chroma persistent folder, pgvector on a real
PostgreSQL (pgserver, one server for the session) and sqlite-vec. What each must do: the new
vectors equal the map applied, ids and payloads identical, the search name serving the new
vectors (asked through the database's own search), the replaced ones kept under the backup name;
an existing output refused without overwrite; a run killed while writing leaves the old store
serving, and a second run while one writes fails clearly."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import time

import numpy as np
import pytest
import torch

from relrep_hf import MigrationMap, migrate_store
from relrep_hf.migration import open_store
from relrep_hf.migration.stores import VectorStoreError
from relrep_hf.migration.stores.database import StoreBusyError, parse_location
from tests.fixtures import database_stores
from tests.fixtures.database_stores import KINDS, build, contents, nearest, row_id
from tests.fixtures.killable_migration import migrate_and_hang

D_OLD, D_NEW = 8, 12
# Qdrant's local mode commits every point on its own (about 30 ms each here): fewer rows
ROWS = {"qdrant": 30, "chroma": 200, "pgvector": 200, "sqlite-vec": 200}
_tables = itertools.count()


@pytest.fixture
def where(request, tmp_path):
    """Where a test's store lives: ``where(kind)`` (a folder, or the PostgreSQL URI)."""
    return lambda kind: request.getfixturevalue("postgres") if kind == "pgvector" else tmp_path


def table_name() -> str:
    return f"docs{next(_tables)}"


def old_vectors(kind: str, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((ROWS[kind], D_OLD)).astype(np.float32)


def a_map(d_old: int = D_OLD) -> MigrationMap:
    generator = torch.Generator().manual_seed(1)
    return MigrationMap(
        torch.randn(d_old, D_NEW, generator=generator), torch.randn(D_NEW, generator=generator)
    )


def applied(migration_map: MigrationMap, vectors: np.ndarray) -> np.ndarray:
    weight, bias = migration_map.weight.detach().double().numpy(), migration_map.bias.detach()
    return (vectors.astype(np.float64) @ weight + bias.double().numpy()).astype(np.float32)


def migrate(uri: str, out: str, **kwargs):
    chunk_rows = kwargs.pop("chunk_rows", 16)
    return migrate_store(
        kwargs.pop("map", a_map()), uri, out, chunk_rows=chunk_rows, show_progress=False, **kwargs
    )


def same_payloads(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(first[i][0] == second[i][0] for i in first)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_migrated_in_place_with_ids_payloads_and_a_backup(kind, where):
    vectors, name = old_vectors(kind), table_name()
    uri = build(kind, where(kind), name, vectors)
    before = contents(uri)
    out = migrate(uri, uri, overwrite=True)
    assert parse_location(out).name == name and out.backup
    after, want = contents(out), applied(a_map(), vectors)
    assert same_payloads(before, after)  # ids and payloads exactly as they were
    for i in range(len(vectors)):
        np.testing.assert_allclose(after[row_id(kind, i)][1], want[i], rtol=1e-5, atol=1e-5)
    assert nearest(out, want[7]) == row_id(kind, 7)  # the search name serves the new vectors
    store = open_store(out)
    assert (store.rows, store.dim) == (len(vectors), D_NEW)
    backup = contents(parse_location(uri).with_name(out.backup))
    assert same_payloads(before, backup)
    assert all(np.array_equal(backup[i][1], before[i][1]) for i in before)


@pytest.mark.parametrize("kind", KINDS)
def test_migrated_into_a_new_name_leaves_the_input_as_it_was(kind, where):
    vectors, name = old_vectors(kind), table_name()
    uri = build(kind, where(kind), name, vectors)
    before = contents(uri)
    out = migrate(uri, parse_location(uri).with_name(f"{name}_e5"))
    assert out.backup is None
    after = contents(out)
    assert same_payloads(before, after)
    want = applied(a_map(), vectors)
    np.testing.assert_allclose(after[row_id(kind, 3)][1], want[3], rtol=1e-5, atol=1e-5)
    assert nearest(out, want[5]) == row_id(kind, 5)
    untouched = contents(uri)
    assert all(np.array_equal(untouched[i][1], before[i][1]) for i in before)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_outputs_and_inputs_are_refused_and_nothing_changes(kind, where, tmp_path):
    vectors, name = old_vectors(kind)[:10], table_name()
    uri = build(kind, where(kind), name, vectors)
    location, before = parse_location(uri), contents(uri)
    with pytest.raises(VectorStoreError, match="exists already; nothing was written"):
        migrate(uri, uri)
    with pytest.raises(VectorStoreError, match="the map takes 9-d vectors"):
        migrate(uri, uri, map=a_map(D_OLD + 1), overwrite=True)
    with pytest.raises(VectorStoreError, match=f"no (table|collection[a-z ]*) 'absent'.*{name}"):
        open_store(location.with_name("absent"))
    other = tmp_path / "other.db" if kind != "pgvector" else "postgresql://x@localhost/other"
    with pytest.raises(VectorStoreError, match="must name a collection/table of the same database"):
        migrate(uri, f"{kind}:{other}#{name}" if kind != "pgvector" else f"{other}?table=t")
    after = contents(uri)
    assert same_payloads(before, after) and len(after) == 10
    assert all(np.array_equal(after[i][1], before[i][1]) for i in before)
    assert open_store(uri).dim == D_OLD


def test_nan_rows_are_refused_before_anything_is_swapped(tmp_path):
    vectors = old_vectors("sqlite-vec")
    vectors[5, 2] = np.nan
    uri = build("sqlite-vec", tmp_path, "docs", vectors)
    with pytest.raises(VectorStoreError, match=r"hold NaN or infinite values \(rows 5\)"):
        migrate(uri, uri, overwrite=True)
    assert open_store(uri).dim == D_OLD and len(contents(uri)) == len(vectors)


def test_a_plain_sqlite_table_with_a_blob_column_and_an_index(tmp_path):
    from relrep_hf.migration.stores.sqlite_vec import connect

    vectors = old_vectors("sqlite-vec")
    connection = connect(tmp_path / "plain.db")
    connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, body TEXT, embedding BLOB)")
    connection.execute("CREATE INDEX items_body ON items (body)")
    connection.execute("BEGIN")
    connection.executemany(
        "INSERT INTO items VALUES (?, ?, ?)", [(3 * i, f"b{i}", v.tobytes()) for i, v in enumerate(vectors)]
    )  # fmt: skip
    connection.execute("COMMIT")
    connection.close()
    uri = f"sqlite-vec:{tmp_path / 'plain.db'}#items"
    out = migrate(uri, uri, overwrite=True)
    connection = connect(tmp_path / "plain.db")
    rows = connection.execute("SELECT id, body, embedding FROM items ORDER BY id").fetchall()
    indexes = connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
    connection.close()
    assert [(r[0], r[1]) for r in rows] == [(3 * i, f"b{i}") for i in range(len(vectors))]
    got = np.stack([np.frombuffer(r[2], np.float32) for r in rows])
    np.testing.assert_allclose(got, applied(a_map(), vectors), rtol=1e-5, atol=1e-5)
    assert ("items_body",) in indexes and out.backup


def test_pgvector_indexes_are_rebuilt_under_their_names(where):
    import psycopg

    name = table_name()
    uri = build("pgvector", where("pgvector"), name, old_vectors("pgvector"))
    out = migrate(uri, uri, overwrite=True)
    with psycopg.connect(where("pgvector")) as connection:
        found = dict(connection.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", (name,)
        ).fetchall())  # fmt: skip
        kept = connection.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = %s", (out.backup,)
        ).fetchone()[0]
    assert set(found) == {f"{name}_pkey", f"{name}_body_key", f"{name}_hnsw"}
    assert "USING hnsw (embedding vector_l2_ops)" in found[f"{name}_hnsw"] and kept == 3


def test_pgvector_identity_and_serial_columns_keep_counting(where):
    import psycopg

    name, vectors = table_name(), old_vectors("pgvector")[:20]
    with psycopg.connect(where("pgvector"), autocommit=True) as connection:
        connection.execute(
            f"CREATE TABLE {name} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            f"n bigserial, embedding vector({D_OLD}))"
        )
        for v in vectors:
            connection.execute(f"INSERT INTO {name} (embedding) VALUES (%s)", (str(v.tolist()),))
    uri = f"{where('pgvector')}&table={name}"
    out = migrate(uri, uri, overwrite=True)
    with psycopg.connect(where("pgvector"), autocommit=True) as connection:
        connection.execute(f"DROP TABLE {out.backup}")  # the serial's sequence must survive it
        zero = str([0.0] * D_NEW)
        connection.execute(f"INSERT INTO {name} (embedding) VALUES (%s)", (zero,))
        rows = connection.execute(f"SELECT id, n FROM {name} ORDER BY id").fetchall()
    assert rows == [(i, i) for i in range(1, 22)]


def _wait_for(path, process, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.is_alive(), "the migration ended before it was killed"
        assert time.monotonic() < deadline, "the migration never started writing"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_run_leaves_the_old_store_serving_and_a_second_run_fails(kind, where, tmp_path):
    vectors, name = old_vectors(kind)[:40], table_name()
    uri = build(kind, where(kind), name, vectors)
    before = contents(uri)
    marker = tmp_path / "writing"
    # Chroma's client (Rust threads, a cached system per folder) does not survive a fork: its
    # child starts afresh (a few seconds more); the others fork, which is quicker
    start = "spawn" if kind == "chroma" else "fork"
    child = multiprocessing.get_context(start).Process(
        target=migrate_and_hang, args=(uri, marker, D_NEW)
    )
    child.start()
    try:
        _wait_for(marker, child)
        with pytest.raises(StoreBusyError, match="[Nn]othing was written|Another save"):
            migrate(uri, uri, overwrite=True)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(60)
    after = contents(uri)
    assert same_payloads(before, after)
    assert all(np.array_equal(after[i][1], before[i][1]) for i in before)
    assert nearest(uri, vectors[4]) == row_id(kind, 4)
    for attempt in range(50):  # the server notices the dead client's connection
        try:
            out = migrate(uri, uri, overwrite=True)
            break
        except StoreBusyError:
            if attempt == 49 or kind != "pgvector":
                raise
            time.sleep(0.2)
    assert open_store(out).dim == D_NEW


def test_fixture_kinds_are_the_registered_database_kinds():
    from relrep_hf.migration.stores import STORE_KINDS

    assert set(database_stores.KINDS) <= set(STORE_KINDS)


def test_the_command_line_takes_database_uris_and_prints_the_backup(tmp_path, capsys):
    from relrep_hf.cli import main

    vectors = old_vectors("sqlite-vec")
    uri = build("sqlite-vec", tmp_path, "docs", vectors)
    a_map().save_pretrained(tmp_path / "map")
    main(["migrate", str(tmp_path / "map"), "--vectors", uri, "--out", uri, "--overwrite"])
    printed = capsys.readouterr().out
    assert f"into {uri}" in printed and "The replaced vectors are kept as docs_backup_" in printed
    got = contents(uri)[row_id("sqlite-vec", 9)][1]
    np.testing.assert_allclose(got, applied(a_map(), vectors)[9], rtol=1e-5, atol=1e-5)
