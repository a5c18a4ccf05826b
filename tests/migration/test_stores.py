"""Stored vectors migrated in chunks: real .npy, .safetensors, parquet, datasets, FAISS and
LanceDB files, each rewritten through an affine map with every other column carried over, and
the bad inputs (wrong dimension, NaN rows, an index of another kind or metric, an existing
output) refused with nothing written."""

from __future__ import annotations

import os

import datasets
import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.numpy import load_file, save_file

from relrep_hf import migrate_store
from relrep_hf.cli import main
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.stores import VectorStoreError, open_store

ROWS, D_OLD, D_NEW, CHUNK = 1000, 8, 5, 300  # 300 does not divide 1000: a short last chunk


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((ROWS, D_OLD)).astype(np.float32)
    weight, bias = rng.standard_normal((D_OLD, D_NEW)), rng.standard_normal(D_NEW)
    migration_map = MigrationMap(torch.from_numpy(weight).float(), torch.from_numpy(bias).float())
    expected = (vectors.astype(np.float64) @ weight + bias).astype(np.float32)
    return vectors, migration_map, expected


def _table(vectors: np.ndarray, fixed: bool = True) -> pa.Table:
    column = (
        pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
        if fixed
        else pa.array(list(vectors))
    )
    ids = np.arange(len(vectors)) * 3
    return pa.table({"id": ids, "text": [f"row {i}" for i in ids], "embedding": column})


def _write(kind: str, path, vectors: np.ndarray) -> None:
    if kind == "npy":
        np.save(path, vectors)
    elif kind == "safetensors":
        save_file({"embedding": vectors, "ids": np.arange(ROWS) * 3}, str(path), {"note": "kept"})
    elif kind in ("parquet", "parquet-lists"):
        pq.write_table(_table(vectors, fixed=kind == "parquet"), path)
    elif kind == "datasets":
        datasets.Dataset(_table(vectors)).save_to_disk(path)
    elif kind == "faiss":
        index = faiss.IndexIDMap2(faiss.IndexFlatL2(vectors.shape[1]))
        index.add_with_ids(vectors, np.arange(len(vectors)) * 3)
        faiss.write_index(index, str(path))
    elif kind == "lancedb":
        import lancedb  # here, not at collection: 2-3 CPU s that every xdist worker paid

        db = lancedb.connect(str(path))
        db.create_table("docs", _table(vectors).rename_columns(["id", "text", "vector"]))
        db.create_table("other", _table(vectors[:3]))


NAMES = {
    "npy": "old.npy",
    "safetensors": "old.safetensors",
    "parquet": "old.parquet",
    "parquet-lists": "lists.parquet",
    "datasets": "old_ds",
    "faiss": "old.faiss",
    "lancedb": "old_db",
}


def _ids(kind: str, path):
    if kind == "safetensors":
        return load_file(str(path))["ids"]
    if kind.startswith("parquet"):
        return pq.read_table(path)["id"].to_numpy()
    if kind == "datasets":
        return np.asarray(datasets.load_from_disk(str(path))["id"])
    if kind == "faiss":
        index = faiss.read_index(str(path))  # kept alive while its ids are copied
        return faiss.vector_to_array(index.id_map)
    if kind == "lancedb":
        import lancedb

        table = lancedb.connect(str(path)).open_table("docs").to_arrow()
        return table["id"].to_numpy()
    return None


@pytest.mark.parametrize("kind", list(NAMES))
def test_every_store_is_migrated_in_chunks_with_its_other_columns(kind, data, tmp_path):
    vectors, migration_map, expected = data
    old = tmp_path / NAMES[kind]
    _write(kind, old, vectors)
    new = tmp_path / ("new_" + NAMES[kind])
    table = {"table": "docs"} if kind == "lancedb" else {}
    migrate_store(migration_map, old, new, chunk_rows=CHUNK, show_progress=False, **table)
    store = open_store(new, **table)
    assert (store.rows, store.dim) == (ROWS, D_NEW)
    np.testing.assert_allclose(store.read_all(), expected, rtol=1e-5, atol=1e-5)
    ids = _ids(kind, new)
    if ids is not None:
        np.testing.assert_array_equal(np.sort(ids), np.arange(ROWS) * 3)
    np.testing.assert_array_equal(open_store(old, **table).read_all(), vectors)  # as it was
    # .npy and FAISS: their space's record beside them
    sidecar = [f"{new.name}.space.json"] if kind in ("npy", "faiss") else []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([old.name, new.name, *sidecar])
    if kind == "lancedb":  # the database's other table comes along
        import lancedb

        assert lancedb.connect(str(new)).open_table("other").count_rows() == 3
    if kind == "safetensors":
        with open(new, "rb") as file:
            assert b'"note":"kept"' in file.read(400)


def test_a_cosine_index_gets_unit_vectors_and_keeps_its_metric(data, tmp_path):
    vectors, migration_map, _ = data
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(D_OLD)
    index.add(unit)
    faiss.write_index(index, str(tmp_path / "cos.faiss"))
    migrate_store(migration_map, tmp_path / "cos.faiss", tmp_path / "new.faiss")
    out = faiss.read_index(str(tmp_path / "new.faiss"))
    assert out.metric_type == faiss.METRIC_INNER_PRODUCT and out.ntotal == ROWS
    got = open_store(tmp_path / "new.faiss").read_all()
    mapped = migration_map.apply(unit)
    np.testing.assert_allclose(
        got, mapped / np.linalg.norm(mapped, axis=1, keepdims=True), atol=1e-5
    )


def test_an_existing_output_is_refused_and_overwrite_replaces_it_whole(data, tmp_path):
    vectors, migration_map, expected = data
    np.save(tmp_path / "old.npy", vectors)
    np.save(tmp_path / "new.npy", np.zeros((3, D_NEW), np.float32))  # a store of the kind
    with pytest.raises(VectorStoreError, match=r"new\.npy.*exists already.*overwrite"):
        migrate_store(migration_map, tmp_path / "old.npy", tmp_path / "new.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "new.npy"), np.zeros((3, D_NEW)))
    migrate_store(migration_map, tmp_path / "old.npy", tmp_path / "new.npy", overwrite=True)
    np.testing.assert_allclose(np.load(tmp_path / "new.npy"), expected, rtol=1e-5, atol=1e-5)
    # in place: the store is replaced only once the new one is complete
    migrate_store(migration_map, tmp_path / "old.npy", tmp_path / "old.npy", overwrite=True)
    np.testing.assert_allclose(np.load(tmp_path / "old.npy"), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kind", ["npy", "safetensors", "parquet", "datasets", "faiss"]
)  # LanceDB refuses NaN vectors itself
def test_nan_rows_are_refused_and_nothing_is_written(kind, data, tmp_path):
    vectors, migration_map, _ = data
    broken = vectors.copy()
    broken[[5, 700]] = np.nan  # the second one in the third chunk: the first chunks went out
    old, new = tmp_path / NAMES[kind], tmp_path / ("new_" + NAMES[kind])
    _write(kind, old, broken)
    _write(kind, new, vectors[:10])  # an existing store, which overwrite must leave whole
    table = {"table": "docs"} if kind == "lancedb" else {}
    before = open_store(new, **table).read_all()
    with pytest.raises(VectorStoreError, match=r"NaN or infinite values \(rows (5|700)\)") as error:
        migrate_store(migration_map, old, new, chunk_rows=CHUNK, overwrite=True, **table)
    assert NAMES[kind] in str(error.value)
    np.testing.assert_array_equal(open_store(new, **table).read_all(), before)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".relrep")) == sorted(
        [old.name, new.name]
    )
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name or "staging" in p.name]


def test_vectors_of_the_wrong_dimension_are_refused(data, tmp_path):
    _, migration_map, _ = data
    np.save(tmp_path / "old.npy", np.ones((4, D_OLD + 1), np.float32))
    with pytest.raises(VectorStoreError, match=r"old\.npy.*takes 8-d.*holds 9-d"):
        migrate_store(migration_map, tmp_path / "old.npy", tmp_path / "new.npy")
    assert not (tmp_path / "new.npy").exists()


def test_faiss_indexes_of_another_kind_or_metric_are_refused(data, tmp_path):
    vectors, migration_map, _ = data
    faiss.write_index(faiss.IndexFlat(D_OLD, faiss.METRIC_L1), str(tmp_path / "l1.faiss"))
    with pytest.raises(VectorStoreError, match=r"l1\.faiss.*metric.*METRIC_L2"):
        migrate_store(migration_map, tmp_path / "l1.faiss", tmp_path / "new.faiss")
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatL2(D_OLD), D_OLD, 4)
    ivf.train(vectors)
    faiss.write_index(ivf, str(tmp_path / "ivf.faiss"))
    with pytest.raises(VectorStoreError, match=r"ivf\.faiss.*IndexIVFFlat.*train"):
        migrate_store(migration_map, tmp_path / "ivf.faiss", tmp_path / "new.faiss")
    assert not (tmp_path / "new.faiss").exists()


def test_unknown_stores_and_columns_are_named(data, tmp_path):
    vectors, migration_map, _ = data
    pq.write_table(_table(vectors).rename_columns(["id", "text", "emb"]), tmp_path / "x.parquet")
    with pytest.raises(VectorStoreError, match=r"x\.parquet.*no vector column.*--column"):
        open_store(tmp_path / "x.parquet")
    assert open_store(tmp_path / "x.parquet", column="emb").dim == D_OLD
    (tmp_path / "x.csv").write_text("1,2\n")
    with pytest.raises(VectorStoreError, match=r"x\.csv.*not a vector store"):
        open_store(tmp_path / "x.csv")
    with pytest.raises(VectorStoreError, match="must be a store of the input's kind"):
        migrate_store(migration_map, tmp_path / "x.parquet", tmp_path / "y.npy", column="emb")


def test_migrate_command_streams_a_saved_map(data, tmp_path, capsys):
    vectors, migration_map, expected = data
    migration_map.save_pretrained(tmp_path / "map")
    _write("parquet", tmp_path / "old.parquet", vectors)
    argv = ["--quiet", "migrate", str(tmp_path / "map"), "--vectors", str(tmp_path / "old.parquet")]
    argv += ["--out", str(tmp_path / "new.parquet"), "--chunk-rows", "128"]
    assert main(argv) == 0
    got = open_store(tmp_path / "new.parquet").read_all()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    mtime = os.stat(tmp_path / "new.parquet").st_mtime_ns
    assert main(argv) == 2  # exists: refused, untouched
    assert "exists already" in capsys.readouterr().err
    assert os.stat(tmp_path / "new.parquet").st_mtime_ns == mtime


@pytest.mark.slow
def test_a_killed_migration_leaves_the_old_store_whole(data, tmp_path):
    """SIGKILL in the middle of an in-place migration: the store is still the old one."""
    import signal
    import subprocess
    import sys
    import time

    vectors, migration_map, _ = data
    many = np.tile(vectors, (200, 1))  # 200,000 rows, one row per chunk: seconds of work
    np.save(tmp_path / "store.npy", many)
    migration_map.save_pretrained(tmp_path / "map")
    script = (
        "from relrep_hf.migration import migrate_store; "
        f"migrate_store({str(tmp_path / 'map')!r}, {str(tmp_path / 'store.npy')!r}, "
        f"{str(tmp_path / 'store.npy')!r}, chunk_rows=1, overwrite=True, show_progress=False); "
        "print('finished')"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.glob(".store.npy.partial-*")):
        time.sleep(0.05)  # the new store is being written aside
    assert list(tmp_path.glob(".store.npy.partial-*")), "the migration never started writing"
    time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    np.testing.assert_array_equal(np.load(tmp_path / "store.npy"), many)
