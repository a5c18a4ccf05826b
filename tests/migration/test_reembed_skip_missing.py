"""Issue #46 item 2, ``skip_missing`` (``--skip-missing``) on every kind that holds text: the rows
without text are left out of the NEW store (written aside and swapped in as always), named by
id in the output, never written as zeros; the old store (or its backup) keeps every row, and
``rollback_store`` gives them back with their original vectors and payloads. Real stores:
Chroma, Qdrant local, PostgreSQL + pgvector (pgserver), sqlite-vec, LanceDB, parquet, datasets;
the encoder is the real callable `tests.migration.test_reembed_databases.numbers`."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from relrep_hf.cli import main
from relrep_hf.migration import VectorStoreError, open_store, reembed_store
from relrep_hf.migration.rollback import cleanup_store, rollback_store
from relrep_hf.migration.stores.database import parse_location
from tests.fixtures.database_stores import KINDS, build, contents, row_id
from tests.migration.test_reembed_databases import NUMBERS, TEXT, body, numbers

ROWS, D_OLD = 13, 4
BLANK = (2, 9)  # the rows whose text is emptied: 2 blank (""), 9 missing (NULL / no field)
_names = itertools.count()


def _blank(uri: str) -> None:
    """Row 2's text made empty and row 9's missing, through the database's own client."""
    location = parse_location(uri)
    two, nine = (row_id(location.kind, i) for i in BLANK)
    if location.kind == "chroma":
        import chromadb

        found = chromadb.PersistentClient(path=location.database).get_collection(location.name)
        got = found.get(ids=[two, nine], include=["embeddings", "metadatas"])
        found.upsert(
            ids=got["ids"],
            embeddings=got["embeddings"],
            metadatas=got["metadatas"],
            documents=["", " "],
        )  # fmt: skip (Chroma keeps no None document on upsert)
    elif location.kind == "qdrant":
        from qdrant_client import QdrantClient

        client = QdrantClient(path=location.database)
        try:
            (alias,) = client.get_aliases().aliases
            client.set_payload(alias.collection_name, {"body": ""}, points=[two])
            client.delete_payload(alias.collection_name, ["body"], points=[nine])
        finally:
            client.close()
    elif location.kind == "pgvector":
        import psycopg

        with psycopg.connect(location.database, autocommit=True) as connection:
            connection.execute(f"UPDATE {location.name} SET body = '' WHERE id = %s", (two,))
            connection.execute(f"UPDATE {location.name} SET body = NULL WHERE id = %s", (nine,))
    else:
        from relrep_hf.migration.stores.sqlite_vec import connect

        connection = connect(location.database)
        connection.execute(f"UPDATE {location.name} SET body = '' WHERE rowid = ?", (two,))
        connection.execute(f"UPDATE {location.name} SET body = NULL WHERE rowid = ?", (nine,))
        connection.commit()
        connection.close()


@pytest.fixture
def store(request, tmp_path, monkeypatch):
    """A ``request.param`` store of ROWS rows, rows `BLANK` without text."""
    monkeypatch.chdir(tmp_path)
    kind = request.param
    where = request.getfixturevalue("postgres") if kind == "pgvector" else tmp_path
    vectors = np.random.default_rng(1).standard_normal((ROWS, D_OLD)).astype(np.float32)
    uri = build(kind, where, f"skip{next(_names)}", vectors)
    _blank(uri)
    return uri


@pytest.mark.slow  # a real database each (PostgreSQL starts in seconds)
@pytest.mark.parametrize("store", KINDS, indirect=True)
def test_rows_without_text_are_left_out_of_a_database_store_and_rolled_back(
    store, tmp_path, caplog
):
    kind = parse_location(store).kind
    before = contents(store)
    left_out = [row_id(kind, i) for i in BLANK]
    with caplog.at_level(logging.WARNING):
        out = reembed_store(store, NUMBERS, text_column=TEXT[kind], chunk_rows=4,
                            skip_missing=True, show_progress=False)  # fmt: skip
    named = ", ".join(map(repr, left_out))
    assert f"2 row(s) have no text in {TEXT[kind] or 'documents'!r}" in caplog.text
    assert f"ids {named}; they are left out of the new store" in caplog.text
    after = contents(store)
    assert sorted(after, key=str) == sorted(set(before) - set(left_out), key=str)
    for i, (stored, vector) in after.items():
        assert stored == before[i][0]  # payloads carried over
        np.testing.assert_array_equal(vector, numbers([body(kind, stored)])[0])
    assert out.backup is not None
    kept = contents(parse_location(store).with_name(out.backup))  # the old rows, every one
    assert sorted(kept, key=str) == sorted(before, key=str)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".reembed-")]
    rollback_store(store, backup=out.backup)  # `relrep-hf rollback`
    restored = contents(store)
    assert sorted(restored, key=str) == sorted(before, key=str)
    for i, (stored, vector) in before.items():
        assert restored[i][0] == stored
        np.testing.assert_array_equal(restored[i][1], vector)
    assert open_store(store).read_space() is None


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite-vec"], indirect=True)
def test_the_command_names_the_rows_it_leaves_out(store, capsys):
    assert main(["reembed", store, "--encoder", NUMBERS, "--text-column", "body",
                 "--skip-missing", "--quiet"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    assert "Re-embedded" in captured.out
    assert sorted(contents(store)) == sorted(
        row_id("sqlite-vec", i) for i in range(ROWS) if i not in BLANK
    )


def texts() -> list:
    found: list = [f"stored note {i}: " + "tea and toast " * (i % 5) for i in range(ROWS)]
    found[BLANK[0]], found[BLANK[1]] = "", None
    return found


def _table() -> pa.Table:
    old = np.random.default_rng(0).standard_normal((ROWS, D_OLD)).astype(np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(old.reshape(-1)), D_OLD)
    return pa.table({"id": np.arange(ROWS) * 3, "text": texts(), "embedding": column})


def test_a_parquet_file_in_place_keeps_a_backup_of_every_row_for_rollback(tmp_path):
    old = tmp_path / "docs.parquet"
    pq.write_table(_table(), old)
    original = old.read_bytes()
    assert reembed_store(old, NUMBERS, chunk_rows=4, skip_missing=True, show_progress=False)
    kept = [i for i in range(ROWS) if i not in BLANK]
    new = pq.read_table(old)
    assert new["id"].to_pylist() == [3 * i for i in kept]
    np.testing.assert_array_equal(open_store(old).read_all(), numbers([texts()[i] for i in kept]))
    (backup,) = cleanup_store(old)  # the replaced file, every row, until cleanup
    assert Path(backup).read_bytes() == original
    rollback_store(old)
    assert old.read_bytes() == original


def test_a_folder_store_in_place_is_refused_and_nothing_is_written(tmp_path):
    old = tmp_path / "docs"
    datasets.Dataset(_table()).save_to_disk(str(old))
    before = sorted((p.name, p.read_bytes()) for p in old.iterdir())
    with pytest.raises(VectorStoreError, match="folder store rewritten in place keeps no backup"):
        reembed_store(old, NUMBERS, skip_missing=True, show_progress=False)
    assert sorted((p.name, p.read_bytes()) for p in old.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]


def test_every_row_of_a_chunk_left_out(tmp_path):
    table = _table()
    rows = table["text"].to_pylist()
    rows[4:8] = [None] * 4  # chunk 1 of 4 rows: none has a text
    old = tmp_path / "docs.parquet"
    pq.write_table(table.set_column(1, "text", pa.array(rows)), old)
    out = reembed_store(old, NUMBERS, tmp_path / "new.parquet", chunk_rows=4, skip_missing=True,
                        show_progress=False)  # fmt: skip
    kept = [i for i, text in enumerate(rows) if text]
    assert pq.read_table(out)["id"].to_pylist() == [3 * i for i in kept]
    np.testing.assert_array_equal(open_store(out).read_all(), numbers([rows[i] for i in kept]))


@pytest.mark.slow  # LanceDB's import and table writes
def test_rows_without_text_are_left_out_of_a_lancedb_table(tmp_path):
    import lancedb

    old = np.zeros((ROWS, D_OLD), np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(old.reshape(-1)), D_OLD)
    data = pa.table({"id": list(range(ROWS)), "text": texts(), "vector": column})
    lancedb.connect(str(tmp_path / "db")).create_table("docs", data)
    out = reembed_store(tmp_path / "db", NUMBERS, tmp_path / "db2", table="docs", chunk_rows=4,
                        skip_missing=True, show_progress=False)  # fmt: skip
    kept = [i for i in range(ROWS) if i not in BLANK]
    store = open_store(out, table="docs")
    assert [i for batch in store.values("id") for i in batch] == kept
    np.testing.assert_array_equal(store.read_all(), numbers([texts()[i] for i in kept]))
    assert open_store(tmp_path / "db", table="docs").rows == ROWS  # the input keeps them all
    with pytest.raises(VectorStoreError, match="keeps no backup"):
        reembed_store(tmp_path / "db", NUMBERS, table="docs", skip_missing=True)


def test_a_store_none_of_whose_rows_has_a_text_is_refused_and_nothing_is_left(tmp_path):
    old = tmp_path / "docs.parquet"
    table = _table()
    pq.write_table(table.set_column(1, "text", pa.array([None] * ROWS, pa.string())), old)
    before = old.read_bytes()
    for _ in range(2):  # and again: no staging folder of the first refuses the second
        with pytest.raises(VectorStoreError, match="has no rows to re-embed"):
            reembed_store(old, NUMBERS, tmp_path / "new.parquet", skip_missing=True,
                          show_progress=False)  # fmt: skip
    assert old.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.parquet"]
