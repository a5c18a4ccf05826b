"""Issue #46 item 2: ``reembed_store``, a store re-embedded from its text (a column, or texts
joined by id), written aside and swapped in with its new space recorded; rows without text
refused by id; a dry run that writes nothing; a run SIGKILLed after a committed chunk resumed
to the very bytes of an uninterrupted run. The encoder is a real callable encoder
(`tests.fixtures.killable_reembed.letters`, quick), and the real MiniLM in the slow test."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from relrep_hf import MigrationMap, migrate_store, reembed_store
from relrep_hf.migration import MissingTextError, StoreSpaceError, VectorStoreError, open_store
from relrep_hf.migration.reembed import ReembedEstimate
from tests.fixtures import killable_reembed
from tests.fixtures.killable_reembed import SPEC, letters, reembed_and_hang

ROWS, D_OLD = 23, 4


def texts(rows: int = ROWS) -> list[str]:
    return [f"stored note {i}: " + "tea and toast " * (i % 5) for i in range(rows)]


def table(rows: list, *, ids=None) -> pa.Table:
    old = np.random.default_rng(0).standard_normal((len(rows), D_OLD)).astype(np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(old.reshape(-1)), D_OLD)
    ids = np.arange(len(rows), dtype=np.int64) * 3 if ids is None else ids
    return pa.table({"id": ids, "text": rows, "embedding": column})


def write(kind: str, path, rows: list, **kw):
    if kind == "parquet":
        pq.write_table(table(rows, **kw), path)
    else:
        datasets.Dataset(table(rows, **kw)).save_to_disk(str(path))
    return path


NAMES = {"parquet": "docs.parquet", "datasets": "docs"}


@pytest.mark.parametrize("kind", list(NAMES))
def test_a_store_is_reembedded_from_its_text_column_and_records_the_space(kind, tmp_path):
    old = write(kind, tmp_path / NAMES[kind], texts())
    out = tmp_path / ("new_" + NAMES[kind])
    assert reembed_store(old, SPEC, out, chunk_rows=5, show_progress=False) == out
    store = open_store(out)
    np.testing.assert_array_equal(store.read_all(), letters(texts()))
    assert (store.rows, store.dim) == (ROWS, 8)
    space = store.read_space()
    assert space.name == SPEC and space.dim == 8 and space.map is None
    assert space.encoder["kind"] == "callable" and space.encoder["normalized"] is False
    assert open_store(old).read_space() is None  # the input, untouched and unrecorded
    new_ids = store.values("id") if kind == "parquet" else [datasets.load_from_disk(str(out))["id"]]
    assert [i for batch in new_ids for i in batch] == list(range(0, 3 * ROWS, 3))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([old.name, out.name])


def test_in_place_reembed_replaces_the_store(tmp_path):
    old = write("parquet", tmp_path / "docs.parquet", texts())
    assert reembed_store(old, SPEC, show_progress=False) == old
    np.testing.assert_array_equal(open_store(old).read_all(), letters(texts()))
    assert pq.read_table(old)["text"].to_pylist() == texts()


def test_texts_joined_by_id_from_a_jsonl_file(tmp_path):
    ids = np.array([7, 3, 11, 5], dtype=np.int64)
    old = write("parquet", tmp_path / "docs.parquet", [None] * 4, ids=ids)
    by_id = {5: "five", 7: "seven", 11: "eleven", 3: "three"}
    lines = [json.dumps({"id": k, "text": v}) for k, v in by_id.items()]
    (tmp_path / "texts.jsonl").write_text("\n".join(lines) + "\n")
    out = reembed_store(
        old, SPEC, tmp_path / "new.parquet", texts=tmp_path / "texts.jsonl", show_progress=False
    )
    expected = letters([by_id[int(i)] for i in ids])
    np.testing.assert_array_equal(open_store(out).read_all(), expected)


@pytest.mark.parametrize("missing", [None, "", "   "])
def test_rows_without_text_are_refused_by_id_and_nothing_is_written(missing, tmp_path):
    rows = texts()
    rows[4] = rows[17] = missing
    old = write("parquet", tmp_path / "docs.parquet", rows)
    with pytest.raises(
        MissingTextError, match=r"2 row\(s\) have no text .* ids 12, 51\."
    ) as caught:
        reembed_store(old, SPEC, tmp_path / "new.parquet", show_progress=False)
    assert caught.value.ids == [12, 51]
    assert [p.name for p in tmp_path.iterdir()] == ["docs.parquet"]


@pytest.mark.parametrize("kind", list(NAMES))
def test_skip_missing_leaves_the_rows_without_text_out_and_names_them(kind, tmp_path, caplog):
    rows = texts()
    rows[2] = rows[9] = None
    old = write(kind, tmp_path / NAMES[kind], rows)
    out = tmp_path / ("new_" + NAMES[kind])
    reembed_store(old, SPEC, out, chunk_rows=4, skip_missing=True, show_progress=False)
    kept = [i for i in range(ROWS) if i not in (2, 9)]
    np.testing.assert_array_equal(open_store(out).read_all(), letters([rows[i] for i in kept]))
    new_ids = [i for batch in open_store(out).values("id") for i in batch]
    assert new_ids == [3 * i for i in kept]
    assert "2 row(s) have no text in 'text' (missing, empty or blank), ids 6, 27" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([old.name, out.name])


def test_an_id_without_a_text_in_the_file_is_refused_by_id(tmp_path):
    old = write("parquet", tmp_path / "docs.parquet", [None] * 3)
    (tmp_path / "texts.jsonl").write_text('{"id": 0, "text": "zero"}\n{"id": 6, "text": "six"}\n')
    with pytest.raises(MissingTextError, match="no text in the file of texts .* ids 3"):
        reembed_store(old, SPEC, tmp_path / "n.parquet", texts=tmp_path / "texts.jsonl")


def test_a_store_with_no_text_is_refused(tmp_path):
    np.save(tmp_path / "v.npy", np.ones((3, 4), np.float32))
    with pytest.raises(VectorStoreError, match="holds vectors only, no text"):
        reembed_store(tmp_path / "v.npy", SPEC, tmp_path / "n.npy")
    old = write("parquet", tmp_path / "docs.parquet", texts(3))
    with pytest.raises(VectorStoreError, match="no text column 'body'"):
        reembed_store(old, SPEC, tmp_path / "n.parquet", text_column="body")


def test_max_rows_is_a_dry_run_that_writes_nothing(tmp_path):
    old = write("parquet", tmp_path / "docs.parquet", texts())
    before = old.read_bytes()
    estimate = reembed_store(old, SPEC, tmp_path / "n.parquet", max_rows=6)
    assert isinstance(estimate, ReembedEstimate)
    assert (estimate.rows, estimate.total_rows) == (6, ROWS) and estimate.seconds > 0
    assert estimate.projected_seconds == pytest.approx(estimate.seconds * ROWS / 6)
    assert "rows/s" in str(estimate) and "Nothing was written" in str(estimate)
    assert [p.name for p in tmp_path.iterdir()] == ["docs.parquet"] and old.read_bytes() == before


def test_a_map_must_start_from_the_recorded_encoder(tmp_path):
    old = write("parquet", tmp_path / "docs.parquet", texts())
    reembed_store(old, SPEC, show_progress=False)
    weight, bias = torch.eye(8)[:, :3], torch.zeros(3)
    other = MigrationMap(weight, bias, {"source": "minilm-mean-L-1", "target": "e5"})
    with pytest.raises(StoreSpaceError, match="the map takes vectors of 'minilm-mean-L-1'"):
        migrate_store(other, old, tmp_path / "new.parquet")
    right = MigrationMap(weight, bias, {"source": SPEC, "target": "e5"})
    migrate_store(right, old, tmp_path / "new.parquet", show_progress=False)
    assert open_store(tmp_path / "new.parquet").read_space().map["source"] == SPEC


def _wait_for(marker, child, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not marker.exists():
        assert child.is_alive(), f"the re-embed ended before its marker (exit {child.exitcode})"
        assert time.monotonic() < deadline, "the re-embed never reached its marker"
        time.sleep(0.05)


@pytest.mark.parametrize("kind", list(NAMES))
@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_run_killed_after_a_chunk_resumes_to_the_bytes_of_an_uninterrupted_one(kind, tmp_path):
    old = write(kind, tmp_path / NAMES[kind], texts())
    whole = reembed_store(old, SPEC, tmp_path / ("whole_" + NAMES[kind]), chunk_rows=5,
                          batch_size=5, show_progress=False)  # fmt: skip
    out = tmp_path / ("resumed_" + NAMES[kind])
    marker = tmp_path / "embedding-chunk-3"
    child = multiprocessing.get_context("fork").Process(
        target=reembed_and_hang, args=(str(old), str(out), str(marker), 3, 5)
    )
    child.start()
    try:
        _wait_for(marker, child)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(60)
    assert not out.exists()
    (staging,) = [p for p in tmp_path.iterdir() if p.name.startswith(".reembed-")]
    assert json.loads((staging / "progress.json").read_text())["chunks"] == 2
    with pytest.raises(VectorStoreError, match="left 2 committed chunk.*--resume"):
        reembed_store(old, SPEC, out, chunk_rows=5, batch_size=5, show_progress=False)
    killable_reembed.calls = 0
    reembed_store(old, SPEC, out, chunk_rows=5, batch_size=5, resume=True, show_progress=False)
    assert killable_reembed.calls == 3  # chunks 2, 3 and 4 of 0..4: the two committed kept
    np.testing.assert_array_equal(open_store(out).read_all(), open_store(whole).read_all())
    if kind == "parquet":
        assert out.read_bytes() == whole.read_bytes()
    else:
        assert datasets.load_from_disk(str(out))[:] == datasets.load_from_disk(str(whole))[:]
    assert not staging.exists()


@pytest.mark.slow
def test_the_real_minilm_reembeds_a_parquet_store(tmp_path):
    from relrep_hf.encoding.encoder_kinds import EmbedRequest, embed_encoders, parse_encoder

    rows = texts(40)
    old = write("parquet", tmp_path / "docs.parquet", rows)
    out = reembed_store(old, "minilm:mean", tmp_path / "new.parquet", chunk_rows=16,
                        show_progress=False)  # fmt: skip
    spec, _ = parse_encoder("minilm:mean")
    data = datasets.Dataset.from_dict({"text": rows})
    request = EmbedRequest(data, tmp_path / "cache", show_progress=False)
    (direct,) = embed_encoders([spec], ["text"], request)
    expected = np.asarray(direct.dataset.with_format("numpy")["embedding"])
    np.testing.assert_allclose(open_store(out).read_all(), expected, rtol=0, atol=1e-5)
    space = open_store(out).read_space()
    assert space.encoder["id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert (space.encoder["pooling"], space.dim) == ("mean", 384)


@pytest.mark.slow  # LanceDB's import and table writes: 34 s on the shared 2 cores
def test_a_lancedb_table_is_reembedded_and_records_its_space(tmp_path):
    import lancedb

    rows = texts(7)
    old = np.zeros((7, D_OLD), np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(old.reshape(-1)), D_OLD)
    data = pa.table({"id": list(range(7)), "text": rows, "vector": column})
    lancedb.connect(str(tmp_path / "db")).create_table("docs", data)
    out = reembed_store(tmp_path / "db", SPEC, tmp_path / "db2", table="docs", chunk_rows=3,
                        show_progress=False)  # fmt: skip
    store = open_store(out, table="docs")
    np.testing.assert_array_equal(store.read_all(), letters(rows))
    assert store.read_space().name == SPEC  # in the table's schema metadata
