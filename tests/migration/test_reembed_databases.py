"""Issue #46 item 2 on the database kinds: ``reembed_store`` re-embeds a Chroma collection (its
documents), a Qdrant collection (a payload field), a pgvector table and a sqlite-vec table (a
text column) from their own text, written aside and swapped in as ``migrate`` swaps them, the
encoder's space recorded; rows without text refused by id with nothing written; a dry run that
writes nothing; a run SIGKILLed after a committed chunk resumed to the vectors of an
uninterrupted run. Real stores (qdrant-client local mode, chromadb, PostgreSQL + pgvector via
pgserver, sqlite-vec) and the real callable encoder `tests.fixtures.killable_reembed.letters`."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

from relrep_hf import reembed_store
from relrep_hf.cli import main
from relrep_hf.migration import MissingTextError, VectorStoreError, open_store
from relrep_hf.migration.reembed import ReembedEstimate
from relrep_hf.migration.rollback import rollback_store
from relrep_hf.migration.stores.database import parse_location
from relrep_hf.migration.stores.sqlite_vec import connect
from tests.fixtures import killable_reembed
from tests.fixtures.database_stores import KINDS, build, contents, nearest, payload, row_id
from tests.fixtures.killable_reembed import SPEC, letters

pytestmark = pytest.mark.slow  # a real database each (PostgreSQL starts in seconds)

ROWS, D_OLD = 13, 4
NUMBERS = "py:tests.migration.test_reembed_databases:numbers"
TEXT = {"chroma": None, "qdrant": "body", "pgvector": "body", "sqlite-vec": "body"}
_names = itertools.count()


def numbers(texts: list[str]) -> np.ndarray:
    """A real callable encoder that tells every row's text apart (`payload`'s bodies differ
    only in their number, which `letters` does not count): ``[N, 3]``: the number, the
    length, the count of 't'."""
    found = [
        [float("".join(c for c in t if c.isdigit()) or 0), len(t), t.count("t")] for t in texts
    ]
    return np.asarray(found, np.float32)


def body(kind: str, stored: object) -> str:
    """A row's text as `contents` reads it back (Qdrant: its payload; the others: a pair)."""
    return stored["body"] if kind == "qdrant" else stored[0] if kind == "chroma" else stored[1]


@pytest.fixture
def store(request, tmp_path, monkeypatch):
    """A ``request.param`` store of ROWS rows (texts `payload`'s bodies), no space recorded;
    the working directory is ``tmp_path`` (pgvector's staging folder goes there)."""
    monkeypatch.chdir(tmp_path)
    kind = request.param
    where = request.getfixturevalue("postgres") if kind == "pgvector" else tmp_path
    vectors = np.random.default_rng(0).standard_normal((ROWS, D_OLD)).astype(np.float32)
    return build(kind, where, f"texts{next(_names)}", vectors)


def leftovers(tmp_path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".reembed-"))


@pytest.mark.parametrize("store", KINDS, indirect=True)
def test_a_database_store_is_reembedded_in_place_from_its_text(store, tmp_path):
    kind = parse_location(store).kind
    before = contents(store)
    out = reembed_store(store, NUMBERS, text_column=TEXT[kind], chunk_rows=5, show_progress=False)
    assert parse_location(out) == parse_location(store)  # swapped in at the store's name
    assert out.backup is not None  # the old vectors kept aside
    after = contents(store)
    assert sorted(after) == sorted(before) == sorted(row_id(kind, i) for i in range(ROWS))
    for i, (stored, vector) in after.items():
        assert stored == before[i][0]  # ids and payloads carried over
        np.testing.assert_array_equal(vector, numbers([body(kind, stored)])[0])  # its own text
    space = open_store(store).read_space()
    assert (space.name, space.dim, space.map) == (NUMBERS, 3, None)
    assert space.encoder["kind"] == "callable"
    backup = parse_location(store).with_name(out.backup)
    np.testing.assert_array_equal(contents(backup)[row_id(kind, 3)][1], before[row_id(kind, 3)][1])
    text = payload(7)["body"]
    assert nearest(store, numbers([text])[0]) == row_id(kind, 7)  # the database's own search
    assert leftovers(tmp_path) == []  # the staging folder goes once the store is in place
    rollback_store(store, backup=out.backup)  # `relrep-hf rollback`, as after a migration
    restored = contents(store)
    assert all(np.array_equal(restored[i][1], before[i][1]) for i in before)
    assert open_store(store).read_space() is None


@pytest.mark.parametrize("store", ["chroma"], indirect=True)
def test_the_command_reembeds_a_collection_into_a_new_one_of_the_same_database(store, capsys):
    out = parse_location(store).with_name("fresh")
    assert main(["reembed", store, "--encoder", NUMBERS, "--out", out, "--quiet"]) == 0
    assert "Re-embedded" in capsys.readouterr().out
    new = contents(out)
    assert sorted(new) == sorted(row_id("chroma", i) for i in range(ROWS))
    for (document, _), vector in new.values():  # the documents, Chroma's default text
        np.testing.assert_array_equal(vector, numbers([document])[0])
    assert open_store(out).read_space().name == NUMBERS
    assert open_store(store).read_space() is None and open_store(store).dim == D_OLD


@pytest.mark.parametrize("store", ["qdrant"], indirect=True)
def test_texts_joined_by_id_reembed_a_qdrant_collection(store, tmp_path):
    lines = [
        json.dumps({"id": row_id("qdrant", i), "text": f"note {100 + i}"}) for i in range(ROWS)
    ]
    (tmp_path / "texts.jsonl").write_text("\n".join(lines) + "\n")
    reembed_store(store, NUMBERS, texts=tmp_path / "texts.jsonl", show_progress=False)
    new = contents(store)
    for i in range(ROWS):
        np.testing.assert_array_equal(new[row_id("qdrant", i)][1], numbers([f"note {100 + i}"])[0])


@pytest.mark.parametrize("store", ["sqlite-vec", "pgvector"], indirect=True)
def test_rows_without_text_in_a_database_are_refused_by_id_and_nothing_is_written(store):
    location = parse_location(store)
    if location.kind == "pgvector":
        import psycopg

        with psycopg.connect(location.database, autocommit=True) as connection:
            connection.execute(f"UPDATE {location.name} SET body = NULL WHERE id = 4")
            connection.execute(f"UPDATE {location.name} SET body = '  ' WHERE id = 10")
    else:
        connection = connect(location.database)
        connection.execute(f"UPDATE {location.name} SET body = NULL WHERE rowid = 4")
        connection.execute(f"UPDATE {location.name} SET body = '  ' WHERE rowid = 10")
        connection.commit()
        connection.close()
    before = contents(store)
    with pytest.raises(MissingTextError, match=r"2 row\(s\) have no text in 'body'.* ids 4, 10"):
        reembed_store(store, SPEC, text_column="body", show_progress=False)
    after = contents(store)
    assert sorted(after) == sorted(before)
    for i, (stored, vector) in after.items():
        assert stored == before[i][0]
        np.testing.assert_array_equal(vector, before[i][1])
    assert open_store(store).backups() == []


@pytest.mark.parametrize("store", ["qdrant", "chroma"], indirect=True)
def test_a_missing_text_field_is_refused_naming_the_fields(store):
    with pytest.raises(VectorStoreError, match=r"no text column 'title'; its columns are \['id'"):
        reembed_store(store, SPEC, text_column="title", show_progress=False)
    assert open_store(store).read_space() is None


@pytest.mark.parametrize("store", ["chroma"], indirect=True)
def test_max_rows_on_a_database_is_a_dry_run_that_writes_nothing(store, tmp_path):
    before = contents(store)
    estimate = reembed_store(store, SPEC, max_rows=4)
    assert isinstance(estimate, ReembedEstimate)
    assert (estimate.rows, estimate.total_rows) == (4, ROWS)
    after = contents(store)
    assert all(np.array_equal(after[i][1], before[i][1]) for i in before)
    assert open_store(store).backups() == [] and open_store(store).read_space() is None
    assert leftovers(tmp_path) == []


def _wait_for(marker, child, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not marker.exists():
        assert child.is_alive(), f"the re-embed ended before its marker (exit {child.exitcode})"
        assert time.monotonic() < deadline, "the re-embed never reached its marker"
        time.sleep(0.05)


def _hang(store: str, marker: str) -> None:
    os.environ |= {"RELREP_TEST_HANG_AT": "2", "RELREP_TEST_MARKER": marker}
    killable_reembed.calls = 0  # a forked child starts with its parent's count
    reembed_store(store, SPEC, text_column="body", chunk_rows=5, batch_size=5, show_progress=False)


@pytest.mark.parametrize("store", ["sqlite-vec"], indirect=True)
@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_killed_database_reembed_resumes_from_its_committed_chunks(store, tmp_path):
    before = contents(store)
    marker = tmp_path / "embedding-chunk-2"
    child = multiprocessing.get_context("fork").Process(target=_hang, args=(store, str(marker)))
    child.start()
    try:
        _wait_for(marker, child)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(60)
    assert all(np.array_equal(v, before[i][1]) for i, (_, v) in contents(store).items())
    assert len(leftovers(tmp_path)) == 1  # one committed chunk, nothing swapped in
    with pytest.raises(VectorStoreError, match="left 1 committed chunk.*--resume"):
        reembed_store(store, SPEC, text_column="body", chunk_rows=5, batch_size=5)
    killable_reembed.calls = 0
    reembed_store(store, SPEC, text_column="body", chunk_rows=5, batch_size=5, resume=True,
                  show_progress=False)  # fmt: skip
    assert killable_reembed.calls == 2  # chunks 1 and 2 of 0..2: the committed one kept
    for stored, vector in contents(store).values():
        np.testing.assert_array_equal(vector, letters([stored[1]])[0])
    assert open_store(store).read_space().name == SPEC and leftovers(tmp_path) == []


def test_a_faiss_index_holds_no_text_and_is_refused(tmp_path):
    faiss = pytest.importorskip("faiss")
    index = faiss.IndexFlatL2(D_OLD)
    index.add(np.ones((3, D_OLD), np.float32))
    faiss.write_index(index, str(tmp_path / "v.faiss"))
    with pytest.raises(VectorStoreError, match="holds vectors only, no text"):
        reembed_store(tmp_path / "v.faiss", SPEC, tmp_path / "n.faiss")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.faiss"]
