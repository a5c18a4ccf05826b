"""The way back (relrep_hf.migration.rollback, ``relrep-hf rollback`` / ``cleanup``), each on
the real database: a store migrated in place serves its original vectors, ids and payloads
again after a rollback (pgvector: its index names and serial sequence too); rows written since
the migration refuse it unless forced; cleanup lists and removes what migrations of that store
left, and nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from relrep_hf.cli import main
from relrep_hf.migration.migrate import plan_migration
from relrep_hf.migration.rollback import cleanup_store, rollback_store
from relrep_hf.migration.stores import VectorStoreError
from tests.fixtures.database_stores import build, contents
from tests.migration import test_databases
from tests.migration.test_databases import a_map, migrate, old_vectors, table_name

where = test_databases.where


def same(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(
        first[i][0] == second[i][0] and np.array_equal(first[i][1], second[i][1]) for i in first
    )


@pytest.mark.parametrize(
    "kind",
    ["sqlite-vec", pytest.param("chroma", marks=pytest.mark.slow),
     pytest.param("pgvector", marks=pytest.mark.slow)],
)  # fmt: skip
def test_rolled_back_store_serves_its_original_vectors(kind, where):
    name = table_name()
    uri = build(kind, where(kind), name, old_vectors(kind))
    before = contents(uri)
    out = migrate(uri, uri, overwrite=True)
    assert not same(contents(uri), before)
    assert rollback_store(uri) == out.backup
    assert same(contents(uri), before)
    assert cleanup_store(uri) == []  # the backup is serving again, the migrated rows are gone


def test_pgvector_rollback_gives_back_index_names_and_the_serial_sequence(postgres):
    from tests.migration.test_store_safety import pg_execute, pg_table

    name = table_name()
    uri = pg_table(postgres, name)
    pg_execute(postgres, f"CREATE INDEX {name}_hnsw ON {name} USING hnsw (embedding vector_l2_ops)")
    migrate(uri, uri, overwrite=True)
    rollback_store(uri)
    indexes = pg_execute(postgres, f"SELECT indexname FROM pg_indexes WHERE tablename = '{name}'")
    assert sorted(indexes[0]) == [(f"{name}_hnsw",), (f"{name}_pkey",)]
    pg_execute(postgres, f"INSERT INTO {name} (body, embedding) VALUES ('new', '{[0.0] * 8}')")
    assert pg_execute(postgres, f"SELECT max(id), count(*) FROM {name}")[0] == [(13, 13)]
    assert pg_execute(postgres, f"SELECT count(*) FROM pg_tables WHERE tablename LIKE "
                      f"'{name}%'")[0] == [(1,)]  # fmt: skip


def test_rows_written_since_the_migration_refuse_the_rollback_unless_forced(tmp_path):
    from relrep_hf.migration.stores.sqlite_vec import connect

    uri = build("sqlite-vec", tmp_path, "docs", old_vectors("sqlite-vec"))
    migrate(uri, uri, overwrite=True)
    connection = connect(tmp_path / "store.db")
    connection.execute(
        "INSERT INTO docs (rowid, embedding, n, body) VALUES (5000, ?, 1, 'late')",
        (np.zeros(test_databases.D_NEW, np.float32).tobytes(),),
    )
    connection.close()
    after = contents(uri)
    with pytest.raises(VectorStoreError, match=r"1 row\(s\) were written since the migration"):
        rollback_store(uri)
    assert same(contents(uri), after)
    rollback_store(uri, force=True)
    assert 5000 not in contents(uri)


@pytest.mark.slow
def test_qdrant_rollback_points_the_alias_back_and_cleanup_removes_the_new_collection(tmp_path):
    from qdrant_client import QdrantClient

    vectors = old_vectors("qdrant")
    uri = build("qdrant", tmp_path, "docs", vectors)
    before = contents(uri)
    migrate(uri, uri, overwrite=True)
    with pytest.raises(VectorStoreError, match="no backup"):
        rollback_store(uri)  # the first migration kept docs_v1 under its own name: name it
    rollback_store(uri, backup="docs_v1")
    assert same(contents(uri), before)
    left = cleanup_store(uri)
    assert len(left) == 1 and left[0].startswith("docs_")
    cleanup_store(uri, remove=True)
    client = QdrantClient(path=str(tmp_path))
    try:
        assert [c.name for c in client.get_collections().collections] == ["docs_v1"]
    finally:
        client.close()


def test_cleanup_lists_and_removes_only_what_migrations_left(tmp_path):
    import chromadb

    uri = build("chroma", tmp_path, "docs", old_vectors("chroma"))
    plan = plan_migration(a_map(), uri, uri)
    assert plan.in_place and "ids, documents, metadatas and URIs" in plan.carried
    out = migrate(uri, uri, overwrite=True)
    client = chromadb.PersistentClient(path=str(tmp_path))
    client.create_collection("docs_migrating_0badc0de")  # a killed run's staging collection
    client.create_collection("docs_archive")  # the user's own
    client.create_collection("other_backup_20260101000000_abcd")  # another store's backup
    assert cleanup_store(uri) == [out.backup, "docs_migrating_0badc0de"]
    assert cleanup_store(uri, remove=True) == [out.backup, "docs_migrating_0badc0de"]
    names = sorted(c.name for c in client.list_collections())
    assert names == ["docs", "docs_archive", "other_backup_20260101000000_abcd"]


def test_cleanup_of_a_file_store_removes_dead_runs_partial_files(tmp_path):
    import socket

    store = tmp_path / "vectors.npy"
    np.save(store, np.ones((3, 4), np.float32))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    partial = tmp_path / f".vectors.npy.partial-{socket.gethostname()}-{dead}-ab12cd34.npy"
    partial.write_bytes(b"half")
    mine = tmp_path / "vectors-mine.npy"
    mine.write_bytes(b"keep")
    assert cleanup_store(store) == [str(partial)]
    cleanup_store(store, remove=True)
    assert not partial.exists() and mine.exists() and store.exists()


def test_a_file_store_migrated_in_place_keeps_a_backup_until_cleanup(tmp_path):
    from relrep_hf import migrate_store
    from relrep_hf.migration.stores import open_store

    store, vectors = tmp_path / "vectors.npy", old_vectors("sqlite-vec")
    np.save(store, vectors)
    migrate_store(a_map(), store, store, overwrite=True, show_progress=False)
    assert np.load(store).shape == (len(vectors), test_databases.D_NEW)
    left = cleanup_store(store)
    assert len(left) == 1 and ".vectors.npy.backup-" in left[0]
    assert rollback_store(store) == Path(left[0]).name
    np.testing.assert_array_equal(np.load(store), vectors)
    assert open_store(store).read_space() is None  # the original's: unrecorded, as it was
    assert not (tmp_path / "vectors.npy.space.json").exists()
    assert cleanup_store(store) == []  # the backup became the store
    migrate_store(a_map(), store, store, overwrite=True, show_progress=False)
    cleanup_store(store, remove=True)
    assert open_store(store).read_space() is not None  # the map's target, recorded beside it
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == [
        "vectors.npy",
        "vectors.npy.space.json",
    ]
    with pytest.raises(VectorStoreError, match="no backup of it to roll back to"):
        rollback_store(store)
    np.save(store, vectors)
    migrate_store(a_map(), store, tmp_path / "new.npy", show_progress=False)  # into a new path:
    assert cleanup_store(store) == []  # the input is untouched, no backup


def test_the_command_line_plans_rolls_back_and_cleans_up(tmp_path, capsys):
    vectors = old_vectors("sqlite-vec")
    uri = build("sqlite-vec", tmp_path, "docs", vectors)
    before = contents(uri)
    a_map().save_pretrained(tmp_path / "map")
    migrate_args = ["migrate", str(tmp_path / "map"), "--vectors", uri, "--out", uri]
    assert main([*migrate_args, "--overwrite", "--plan"]) == 0
    printed = capsys.readouterr().out
    assert "Plan: sqlite-vec store" in printed and "Nothing was written (--plan)" in printed
    assert same(contents(uri), before)
    assert main([*migrate_args, "--overwrite"]) == 0
    assert "Plan: sqlite-vec store" in capsys.readouterr().out  # every run prints it first
    assert main(["cleanup", uri]) == 0
    assert "docs_backup_" in capsys.readouterr().out
    assert main(["rollback", uri]) == 0
    assert "serves the vectors of docs_backup_" in capsys.readouterr().out
    assert same(contents(uri), before)
    assert main(["cleanup", uri, "--yes"]) == 0
    assert "Nothing left" in capsys.readouterr().out


def test_a_database_error_is_one_clear_line_at_the_command_line(postgres, capsys):
    from tests.migration.test_store_safety import pg_execute, pg_table

    name = table_name()
    uri = pg_table(postgres, name)
    migrate(uri, uri, overwrite=True)
    pg_execute(postgres, f"CREATE VIEW {name}_v AS SELECT id FROM {name}")  # on the migrated table
    assert main(["rollback", uri]) == 2
    error = capsys.readouterr().err
    assert "PostgreSQL refused the operation (DependentObjectsStillExist" in error
    assert "Traceback" not in error
    assert pg_execute(postgres, f"SELECT count(*) FROM pg_tables WHERE tablename LIKE '{name}%'")[
        0
    ] == [(2,)]  # fmt: skip (served + backup: nothing changed)
