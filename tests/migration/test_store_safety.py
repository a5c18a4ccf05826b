"""A database store's rewrite in good hands (issue #46, items 3 and 4), each case on the real
database: Chroma's max batch and no staging collection left on an error; pgvector's sequences
never taken from the input, a lock held by an idle writer answered by a clear error, quoted
names, row-level security, policies, the comment and grants carried, and what a migration would
drop silently refused unless forced; sqlite-vec's triggers carried; ``--dtype`` refused on a
database; backup names unique within one second."""

from __future__ import annotations

import numpy as np
import pytest

from relrep_hf.migration.migrate import plan_migration
from relrep_hf.migration.plan import StorePlanError
from relrep_hf.migration.stores import VectorStoreError
from relrep_hf.migration.stores.database import StoreBusyError, backup_name
from tests.fixtures.database_stores import build, contents, row_id
from tests.migration.test_databases import D_NEW, D_OLD, a_map, applied, migrate, table_name


def pg_execute(uri: str, *statements: str) -> list:
    import psycopg

    with psycopg.connect(uri, autocommit=True) as connection:
        results = [connection.execute(s) for s in statements]
        return [r.fetchall() if r.description else None for r in results]


def vectors(rows: int, dim: int = D_OLD, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


# --- Chroma ------------------------------------------------------------------------------------


def chroma_names(folder) -> list[str]:
    import chromadb

    return sorted(c.name for c in chromadb.PersistentClient(path=str(folder)).list_collections())


@pytest.mark.slow
def test_chroma_over_its_max_batch_with_large_chunks(tmp_path):
    import chromadb

    limit = chromadb.PersistentClient(path=str(tmp_path)).get_max_batch_size()
    old = vectors(limit + 39)
    uri = build("chroma", tmp_path, "docs", old)
    out = migrate(uri, uri, overwrite=True, chunk_rows=32768)
    got = contents(uri)
    assert len(got) == len(old)
    np.testing.assert_allclose(
        got[row_id("chroma", limit + 5)][1], applied(a_map(), old)[limit + 5], rtol=1e-5, atol=1e-5
    )
    assert chroma_names(tmp_path) == sorted(["docs", out.backup])


def test_chroma_failed_copy_leaves_no_staging_collection(tmp_path):
    import torch

    from relrep_hf import MigrationMap

    uri = build("chroma", tmp_path, "docs", vectors(40) + 4.0)
    huge = MigrationMap(torch.full((D_OLD, D_NEW), 3e38), torch.zeros(D_NEW))  # overflows
    before = contents(uri)
    with pytest.raises(VectorStoreError, match="overflow float32"):
        migrate(uri, uri, overwrite=True, map=huge, chunk_rows=16)
    assert chroma_names(tmp_path) == ["docs"]
    assert contents(uri).keys() == before.keys()


# --- pgvector ----------------------------------------------------------------------------------


def pg_table(postgres: str, name: str, rows: int = 12, extra: str = "") -> str:
    """``name`` (id serial, body, embedding) holding ``rows`` rows; its URI."""
    quoted = '"' + name + '"'
    pg_execute(postgres, f"CREATE TABLE {quoted} (id serial PRIMARY KEY, body text, "
               f"embedding vector({D_OLD}){extra})")  # fmt: skip
    for i, v in enumerate(vectors(rows)):
        pg_execute(postgres, f"INSERT INTO {quoted} (body, embedding) VALUES ('row {i}', "
                   f"'{v.tolist()}')")  # fmt: skip
    return f"{postgres}&table={name}"


def test_pgvector_new_table_never_takes_the_input_sequence(postgres):
    name = table_name()
    uri = pg_table(postgres, name)
    trial = f"{postgres}&table={name}_trial"
    migrate(uri, trial)
    pg_execute(postgres, f"DROP TABLE {name}_trial CASCADE")
    pg_execute(postgres, f"INSERT INTO {name} (body, embedding) VALUES ('new', '{[0.0] * D_OLD}')")
    ids = pg_execute(postgres, f"SELECT max(id), count(*) FROM {name}")[0]
    assert ids == [(13, 13)]


def test_pgvector_idle_writer_lock_gives_a_clear_error_and_nothing_changes(postgres):
    import psycopg

    name = table_name()
    uri = pg_table(postgres, name)
    holder = psycopg.connect(postgres, application_name="my-app")
    holder.execute(f"UPDATE {name} SET body = 'held' WHERE id = 1")  # idle in a transaction
    try:
        timed = uri.replace("?", "?options=-c%20lock_timeout%3D500&", 1)
        with pytest.raises(StoreBusyError, match=r"locked by another session \(pid \d+.*my-app"):
            migrate(timed, timed, overwrite=True)
    finally:
        holder.rollback()
        holder.close()
    tables = pg_execute(postgres, f"SELECT tablename FROM pg_tables WHERE tablename LIKE '{name}%'")
    assert tables == [[(name,)]]


def test_pgvector_mixed_case_table(postgres):
    name = f"My{table_name()}"
    uri = pg_table(postgres, name)
    out = migrate(uri, uri, overwrite=True)
    rows = pg_execute(postgres, f'SELECT embedding::text FROM "{name}" ORDER BY id LIMIT 1')[0]
    np.testing.assert_allclose(
        np.asarray(eval(rows[0][0])), applied(a_map(), vectors(12))[0], rtol=1e-5, atol=1e-5
    )
    assert out.backup.startswith(f"{name}_backup_")


def test_pgvector_row_level_security_policies_comment_and_grants_are_carried(postgres):
    name = table_name()
    uri = pg_table(postgres, name)
    pg_execute(
        postgres,
        f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {name} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY only_even ON {name} FOR SELECT TO PUBLIC USING (id % 2 = 0)",
        f"COMMENT ON TABLE {name} IS 'the documents'",
        f"GRANT SELECT ON {name} TO PUBLIC",
    )
    plan = plan_migration(a_map(), uri, uri)
    assert "row-level security (forced)" in plan.carried and "policy 'only_even'" in plan.carried
    migrate(uri, uri, overwrite=True)
    facts = pg_execute(
        postgres,
        f"SELECT relrowsecurity, relforcerowsecurity, obj_description(oid, 'pg_class'), "
        f"relacl::text FROM pg_class WHERE oid = '{name}'::regclass",
        f"SELECT policyname, qual FROM pg_policies WHERE tablename = '{name}'",
    )
    rls, force, comment, acl = facts[0][0]
    assert (rls, force, comment) == (True, True, "the documents") and "=r/" in acl
    assert facts[1] == [("only_even", "((id % 2) = 0)")]


def test_pgvector_what_would_be_dropped_is_refused_unless_forced(postgres):
    name = table_name()
    uri = pg_table(postgres, name)
    pg_execute(
        postgres,
        f"CREATE FUNCTION {name}_touch() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN NEW.body := upper(NEW.body); RETURN NEW; END $$",
        f"CREATE TRIGGER touch BEFORE INSERT ON {name} FOR EACH ROW EXECUTE FUNCTION {name}_touch()",
        f"CREATE TABLE {name}_notes (doc int REFERENCES {name} (id))",
        f"CREATE VIEW {name}_view AS SELECT id, body FROM {name}",
    )
    plan = plan_migration(a_map(), uri, uri)
    assert "Plan:" in plan.text() and "refused unless --force" in plan.text()
    with pytest.raises(StorePlanError, match=r"notes_doc_fkey.*_view"):
        migrate(uri, uri, overwrite=True)
    assert pg_execute(
        postgres, f"SELECT count(*) FROM pg_tables WHERE tablename LIKE '{name}%'"
    ) == [[(2,)]]  # fmt: skip (the input and the notes: no copy)
    assert "triggers 'touch' (created again on the new table; the backup keeps its own)" in (
        plan.carried
    )
    # into a new name nothing is lost: the triggers stay on the input
    plan = plan_migration(a_map(), uri, f"{postgres}&table={name}_b")
    assert plan.dropped == [] and "triggers 'touch' (they stay on the input)" in plan.input_only
    out = migrate(uri, uri, overwrite=True, force=True)
    assert out.backup.startswith(f"{name}_backup_")


def test_pgvector_foreign_keys_are_carried_and_a_self_reference_refused(postgres):
    name = table_name()
    pg_execute(postgres, f"CREATE TABLE {name}_cat (id int PRIMARY KEY)",
               f"INSERT INTO {name}_cat VALUES (1)")  # fmt: skip
    uri = pg_table(postgres, name, extra=f", cat int DEFAULT 1 REFERENCES {name}_cat (id)")
    migrate(uri, uri, overwrite=True)
    keys = pg_execute(postgres, f"SELECT conname FROM pg_constraint WHERE conrelid = "
                      f"'{name}'::regclass AND contype = 'f'")  # fmt: skip
    assert keys == [[(f"{name}_cat_fkey",)]]
    other = table_name()
    uri = pg_table(postgres, other, extra=f", parent int REFERENCES {other} (id)")
    with pytest.raises(StorePlanError, match="to the table itself"):
        migrate(uri, uri, overwrite=True)


def test_pgvector_generated_column_is_refused_before_anything_is_written(postgres):
    name = table_name()
    uri = pg_table(postgres, name, extra=", twice int GENERATED ALWAYS AS (id * 2) STORED")
    with pytest.raises(StorePlanError, match="generated column 'twice'"):
        migrate(uri, uri, overwrite=True, force=True)


# --- sqlite-vec, and every database --------------------------------------------------------------


def test_sqlite_plain_table_triggers_are_carried(tmp_path):
    from relrep_hf.migration.stores.sqlite_vec import connect

    path = tmp_path / "store.db"
    connection = connect(path)
    connection.executescript(
        "CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT, embedding BLOB);"
        "CREATE VIRTUAL TABLE docs_fts USING fts5(body);"
        "CREATE TRIGGER docs_ai AFTER INSERT ON docs BEGIN "
        "INSERT INTO docs_fts (rowid, body) VALUES (new.id, new.body); END;"
    )
    for i, v in enumerate(vectors(20)):
        connection.execute("INSERT INTO docs VALUES (?, ?, ?)", (i + 1, f"word{i}", v.tobytes()))
    connection.close()
    uri = f"sqlite-vec:{path}#docs"
    assert "trigger 'docs_ai'" in plan_migration(a_map(), uri, uri).carried
    migrate(uri, uri, overwrite=True)
    connection = connect(path)
    connection.execute(
        "INSERT INTO docs VALUES (99, 'fresh', ?)", (vectors(1, D_NEW)[0].tobytes(),)
    )
    assert connection.execute(
        "SELECT rowid FROM docs_fts WHERE docs_fts MATCH 'fresh'"
    ).fetchall() == [(99,)]
    assert (
        connection.execute("SELECT count(*) FROM docs_fts").fetchone()[0] == 21
    )  # no copy fired it
    connection.close()


def test_float64_on_a_database_store_is_refused_clearly(tmp_path):
    uri = build("sqlite-vec", tmp_path, "docs", vectors(10))
    with pytest.raises(VectorStoreError, match="holds float32"):
        migrate(uri, uri, overwrite=True, dtype="float64")


def test_backup_names_differ_within_one_second(tmp_path):
    # 1,000 draws: 16 random bits each collided with probability 0.9995 (birthday bound)
    assert len({backup_name("docs") for _ in range(1000)}) == 1000
    uri = build("sqlite-vec", tmp_path, "docs", vectors(10))
    first = migrate(uri, uri, overwrite=True).backup
    second = migrate(uri, uri, overwrite=True, map=_square()).backup
    assert first != second


def _square():
    import torch

    from relrep_hf import MigrationMap

    return MigrationMap(torch.eye(D_NEW), torch.zeros(D_NEW))
