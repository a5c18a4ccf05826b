"""The file and folder store cases of issue #37 ("migration a user can trust with a production
store"), each on real files: an unrelated output never replaced, overflow caught after the cast
to the store's dtype, one run per output, dead runs' partial files removed, nothing of a store
changed but its vectors (FAISS norms, LanceDB indexes, a datasets format, parquet field
metadata), and a store kind registered by a user run end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from relrep_hf import migrate_store
from relrep_hf.cli import main
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.stores import (
    STORE_KINDS,
    StoreKind,
    VectorStoreError,
    open_store,
    register_store_kind,
    rewrite_store,
)
from relrep_hf.migration.stores.npy import NpyStore
from relrep_hf.utils.locking import FolderLockedError, folder_lock
from tests.fixtures.migration_inputs import D_NEW, D_OLD, migration_map, write_store


@pytest.fixture
def vectors():
    return np.random.default_rng(0).standard_normal((40, D_OLD)).astype(np.float32)


def _expected(vectors: np.ndarray, scale: float = 1.0) -> np.ndarray:
    return vectors.astype(np.float64) @ (np.ones((D_OLD, D_NEW)) * scale)


# --- --overwrite replaces only a store of the same kind ----------------------------------------


@pytest.mark.parametrize(
    "kind, out", [("npy", "notes.npy"), ("npy", "notes.txt"), ("datasets", "notes")]
)
def test_overwrite_never_replaces_what_is_not_a_store_of_the_kind(kind, out, vectors, tmp_path):
    old = write_store(kind, tmp_path / ("old.npy" if kind == "npy" else "old_ds"), vectors)
    target = tmp_path / out
    if out == "notes":
        target.mkdir()
        (target / "keep.txt").write_text("mine")
    else:
        target.write_text("my notes")
    with pytest.raises(
        VectorStoreError, match=r"is not a store of the input.s kind \(\w+\).*never another"
    ):
        migrate_store(migration_map(), old, target, overwrite=True, show_progress=False)
    if out == "notes":
        assert [p.name for p in target.iterdir()] == ["keep.txt"]
    else:
        assert target.read_text() == "my notes"


def test_the_command_refuses_to_overwrite_notes(vectors, tmp_path, capsys):
    migration_map().save_pretrained(tmp_path / "map")
    old = write_store("npy", tmp_path / "old.npy", vectors)
    (tmp_path / "notes.txt").write_text("my notes")
    argv = ["--quiet", "migrate", str(tmp_path / "map"), "--vectors", str(old)]
    assert main([*argv, "--out", str(tmp_path / "notes.txt"), "--overwrite"]) == 2
    assert "is not a store of the input's kind (npy)" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "my notes"


# --- overflow: checked after the cast to the output's dtype ------------------------------------


@pytest.mark.parametrize("kind", ["npy", "safetensors", "parquet", "datasets", "lancedb"])
def test_float16_overflow_is_refused_and_float32_asked_for_works(kind, vectors, tmp_path):
    big = (vectors * 100).astype(np.float16)
    big[[3, 17]] = 30000  # finite in float16; the map sums 4 of them: 120000 > 65504
    old = write_store(kind, tmp_path / f"old{_suffix(kind)}", big)
    new = tmp_path / f"new{_suffix(kind)}"
    with pytest.raises(
        VectorStoreError, match=r"overflow float16 \(rows 3, 17\).*--dtype float32"
    ) as e:
        migrate_store(migration_map(), old, new, show_progress=False)
    assert "old" in str(e.value) and not new.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [old.name]  # no partial file left
    migrate_store(migration_map(), old, new, dtype="float32", show_progress=False)
    store = open_store(new)
    assert store.dtype == np.float32
    got = store.read_all()
    np.testing.assert_allclose(got, _expected(big.astype(np.float32)), rtol=1e-3)


def _suffix(kind: str) -> str:
    return {
        "npy": ".npy",
        "safetensors": ".safetensors",
        "parquet": ".parquet",
        "faiss": ".faiss",
    }.get(kind, "")


@pytest.mark.parametrize("kind", ["npy", "faiss"])
def test_float32_overflow_through_large_weights_is_refused(kind, vectors, tmp_path):
    old = write_store(kind, tmp_path / f"old{_suffix(kind)}", vectors)
    huge = MigrationMap(torch.full((D_OLD, D_NEW), 3e38), torch.zeros(D_NEW))
    advice = "--dtype float64" if kind == "npy" else "weights: they are too large"
    with pytest.raises(VectorStoreError, match=f"overflow float32.*{advice}"):
        migrate_store(huge, old, tmp_path / f"new{_suffix(kind)}", show_progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [old.name]


def test_a_dtype_the_kind_cannot_hold_is_refused(vectors, tmp_path):
    old = write_store("faiss", tmp_path / "old.faiss", vectors)
    with pytest.raises(VectorStoreError, match=r"faiss store .* holds float32"):
        migrate_store(migration_map(), old, tmp_path / "new.faiss", dtype="float16")


# --- one run per output; dead runs' partial files --------------------------------------------


def test_a_second_run_on_the_same_out_is_refused_while_the_first_runs(vectors, tmp_path):
    old = write_store("npy", tmp_path / "old.npy", vectors)
    with (
        folder_lock(tmp_path / "new.npy"),  # what a first run holds while it writes
        pytest.raises(FolderLockedError, match="right now"),
    ):
        migrate_store(migration_map(), old, tmp_path / "new.npy", show_progress=False)
    assert not (tmp_path / "new.npy").exists()


def test_an_out_that_appears_meanwhile_is_not_replaced_without_overwrite(vectors, tmp_path):
    store = open_store(write_store("npy", tmp_path / "old.npy", vectors))
    out = tmp_path / "new.npy"

    def transform(chunk, result=None):  # another writer finishes while this run writes
        if not out.exists():
            np.save(out, np.zeros((2, 2), np.float32))
        mapped = chunk[:, :D_NEW] * 1.0
        if result is None:
            return mapped
        result[...] = mapped
        return result

    with pytest.raises(VectorStoreError, match="appeared while the store was written"):
        rewrite_store(store, out, transform, D_NEW, chunk_rows=7, show_progress=False)
    np.testing.assert_array_equal(np.load(out), np.zeros((2, 2)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.npy", "old.npy"]


@pytest.mark.slow
def test_dead_runs_partial_files_go_and_live_ones_stay(vectors, tmp_path):
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    stale = tmp_path / f".new.npy.partial-{host}-{dead.pid}-0badc0de.npy"
    live = tmp_path / f".new.npy.partial-{host}-{os.getppid()}-0badc0de.npy"
    other = tmp_path / f".new.npy.partial-elsewhere-{dead.pid}-0badc0de.npy"  # another host's
    for path in (stale, live, other):
        path.write_bytes(b"x" * 100)
    old = write_store("npy", tmp_path / "old.npy", vectors)
    migrate_store(migration_map(), old, tmp_path / "new.npy", show_progress=False)
    assert not stale.exists() and live.exists() and other.exists()


# --- nothing but the vectors changes ---------------------------------------------------------


def test_a_faiss_ip_index_is_renormalised_only_when_every_row_was_unit(tmp_path):
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((1500, D_OLD)).astype(np.float32)
    rows[:1024] /= np.linalg.norm(rows[:1024], axis=1, keepdims=True)  # later rows: not unit
    index = faiss.IndexFlatIP(D_OLD)
    index.add(rows)
    faiss.write_index(index, str(tmp_path / "ip.faiss"))
    migrate_store(
        migration_map(), tmp_path / "ip.faiss", tmp_path / "new.faiss", show_progress=False
    )
    got = open_store(tmp_path / "new.faiss").read_all()
    np.testing.assert_allclose(got, _expected(rows), rtol=1e-5, atol=1e-5)  # not unit


def test_lancedb_scalar_and_text_indexes_are_rebuilt_and_a_vector_index_named(tmp_path):
    import lancedb  # here, not at collection: 2-3 CPU s that every xdist worker paid

    rows = np.random.default_rng(2).standard_normal((300, D_OLD)).astype(np.float32)
    db = lancedb.connect(str(tmp_path / "db"))
    table = db.create_table("docs", _arrow(rows, vector="vector"))
    table.create_scalar_index("id", index_type="BTREE")
    table.create_scalar_index("tag", index_type="BITMAP")
    table.create_fts_index("text", with_position=True)
    table.create_index(vector_column_name="vector", index_type="IVF_FLAT", num_partitions=2)
    with pytest.warns(UserWarning, match=r"index 'vector_idx' \(IvfFlat.*not rebuilt"):
        migrate_store(migration_map(), tmp_path / "db", tmp_path / "new", show_progress=False)
    new = lancedb.connect(str(tmp_path / "new")).open_table("docs")
    kinds = {i.name: (i.index_type, i.columns) for i in new.list_indices()}
    assert kinds == {
        "id_idx": ("BTree", ["id"]),
        "tag_idx": ("Bitmap", ["tag"]),
        "text_idx": ("FTS", ["text"]),
    }
    assert len(new.search("row", query_type="fts").limit(5).to_list()) == 5


def _arrow(rows: np.ndarray, vector: str = "embedding", **metadata: str) -> pa.Table:
    field = pa.field(vector, pa.list_(pa.float32(), rows.shape[1]), metadata=metadata or None)
    column = pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), rows.shape[1])
    ids = np.arange(len(rows))
    schema = pa.schema([("id", pa.int64()), ("text", pa.string()), ("tag", pa.string()), field])
    texts = [f"row {i}" for i in ids]
    return pa.table([ids, texts, [f"t{i % 3}" for i in ids], column], schema=schema)


def test_a_datasets_store_keeps_its_format(vectors, tmp_path):
    dataset = datasets.Dataset(_arrow(vectors))
    dataset.set_format("numpy", columns=["embedding", "id"])
    dataset.save_to_disk(tmp_path / "old_ds")
    migrate_store(migration_map(), tmp_path / "old_ds", tmp_path / "new_ds", show_progress=False)
    new = datasets.load_from_disk(str(tmp_path / "new_ds"))
    assert new.format["type"] == "numpy" and new.format["columns"] == ["embedding", "id"]
    assert isinstance(new[0]["embedding"], np.ndarray) and new[0]["embedding"].shape == (D_NEW,)


def test_parquet_field_metadata_names_the_new_dimension(vectors, tmp_path):
    pq.write_table(_arrow(vectors, dim=str(D_OLD), model="old-encoder"), tmp_path / "old.parquet")
    migrate_store(migration_map(), tmp_path / "old.parquet", tmp_path / "new.parquet")
    field = pq.read_schema(tmp_path / "new.parquet").field("embedding")
    assert field.metadata == {b"dim": str(D_NEW).encode(), b"model": b"old-encoder"}


def test_a_datasets_store_migrates_into_a_folder_named_relative_to_the_cwd(
    vectors, tmp_path, monkeypatch
):
    datasets.Dataset(_arrow(vectors)).save_to_disk(tmp_path / "ds")
    monkeypatch.chdir(tmp_path)
    assert migrate_store(migration_map(), "ds", "ds_new", show_progress=False).name == "ds_new"
    np.testing.assert_allclose(
        open_store(tmp_path / "ds_new").read_all(), _expected(vectors), rtol=1e-5, atol=1e-5
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "ds_new"]


def test_a_parquet_store_ragged_across_chunks_is_named(tmp_path):
    first = pa.table({"embedding": [[1.0] * D_OLD] * 5})
    second = pa.table({"embedding": [[1.0] * (D_OLD + 2)] * 5})
    with pq.ParquetWriter(tmp_path / "ragged.parquet", first.schema) as writer:
        writer.write_table(first)
        writer.write_table(second)
    with pytest.raises(VectorStoreError, match=r"from row 5 are 6-d, those before 4-d"):
        migrate_store(
            migration_map(), tmp_path / "ragged.parquet", tmp_path / "new.parquet", chunk_rows=5
        )
    assert not (tmp_path / "new.parquet").exists()


def test_an_empty_datasets_store_migrates_to_an_empty_one(tmp_path):
    features = datasets.Features(
        {
            "id": datasets.Value("int64"),
            "embedding": datasets.List(datasets.Value("float32"), length=D_OLD),
        }
    )
    datasets.Dataset.from_dict({"id": [], "embedding": []}, features=features).save_to_disk(
        tmp_path / "empty"
    )
    migrate_store(migration_map(), tmp_path / "empty", tmp_path / "new", show_progress=False)
    store = open_store(tmp_path / "new")
    assert (store.rows, store.dim) == (0, D_NEW)


# --- a store kind registered by a user ------------------------------------------------------


class TextStore(NpyStore):
    """A toy kind: vectors as text lines of a ``.vec`` file (read whole; small stores)."""

    kind = "vec"

    def __init__(self, path, **_):
        self.path = path
        self.matrix = np.loadtxt(path, ndmin=2, dtype=np.float32)
        self.rows, self.dim = self.matrix.shape
        self.dtype = self.matrix.dtype

    def chunks(self, chunk_rows=32768):
        for start in range(0, self.rows, chunk_rows):
            yield self.matrix[start : start + chunk_rows]

    def write(self, staging, transform, dim, chunk_rows, *, dtype=None):
        parts = [transform(chunk) for chunk in self.chunks(chunk_rows)]
        np.savetxt(staging, np.concatenate(parts) if parts else np.empty((0, dim)))


def test_a_registered_store_kind_works_end_to_end(vectors, tmp_path, capsys):
    from relrep_hf.migration.stores.base import existing_path

    kind = StoreKind(
        "vec", lambda loc: str(loc).endswith(".vec"), existing_path(TextStore), "a .vec file"
    )
    register_store_kind(kind)
    try:
        np.savetxt(tmp_path / "old.vec", vectors)
        assert open_store(tmp_path / "old.vec").kind == "vec"
        migrate_store(migration_map(), tmp_path / "old.vec", tmp_path / "new.vec", chunk_rows=7)
        np.testing.assert_allclose(np.loadtxt(tmp_path / "new.vec"), _expected(vectors), rtol=1e-5)
        migration_map().save_pretrained(tmp_path / "map")
        argv = ["--quiet", "migrate", str(tmp_path / "map"), "--vectors", str(tmp_path / "old.vec")]
        assert main([*argv, "--out", str(tmp_path / "cli.vec")]) == 0
        np.testing.assert_allclose(np.loadtxt(tmp_path / "cli.vec"), _expected(vectors), rtol=1e-5)
    finally:
        STORE_KINDS.unregister("vec")
    with pytest.raises(VectorStoreError, match="not a vector store"):
        open_store(tmp_path / "old.vec")


def test_store_kinds_are_registered_in_one_place_and_unregistered_by_name(vectors, tmp_path):
    """The package's kinds are `BUILTIN_KINDS`, one per module, registered by one call (not by
    importing their modules); `unregister_store_kind` takes one out, and the call puts it back."""
    import importlib

    from relrep_hf import unregister_store_kind
    from relrep_hf.migration import stores

    assert list(STORE_KINDS)[: len(stores.BUILTIN_KINDS)] == [
        "npy", "safetensors", "parquet", "faiss", "datasets", "lancedb",
        "qdrant", "chroma", "pgvector", "sqlite-vec",
    ]  # fmt: skip
    folder = Path(stores.__file__).parent
    calls = sorted(p.name for p in folder.glob("*.py") if "register_store_kind(" in p.read_text())
    assert calls == ["__init__.py", "base.py"]  # no kind's module registers itself on import
    np.save(tmp_path / "v.npy", vectors)
    taken = unregister_store_kind("npy")
    try:
        importlib.import_module("relrep_hf.migration.stores.npy")
        assert "npy" not in STORE_KINDS
        with pytest.raises(VectorStoreError, match="not a vector store"):
            open_store(tmp_path / "v.npy")
        with pytest.raises(ValueError, match="Unknown store kind 'npy'. Registered: 'safetensors'"):
            unregister_store_kind("npy")
        with pytest.raises(ValueError, match="takes a StoreKind, got str"):
            register_store_kind("npy")
    finally:
        stores.register_builtin_store_kinds()
    assert STORE_KINDS["npy"].name == taken.name == "npy"
    assert open_store(tmp_path / "v.npy").rows == len(vectors)


def test_two_runs_at_once_on_one_new_out_give_one_store_and_one_error(tmp_path):
    """Two forked runs of the same migration to the same new file, no overwrite: exactly one
    succeeds; the other is refused (locked, or the file exists), never a silent replacement."""
    rows = np.random.default_rng(3).standard_normal((20000, D_OLD)).astype(np.float32)
    old = write_store("npy", tmp_path / "old.npy", rows)
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                migrate_store(migration_map(), old, tmp_path / "new.npy", chunk_rows=100)
                code = 0
            except (VectorStoreError, FolderLockedError):
                code = 2
            finally:
                os._exit(code)
        children.append(pid)
    codes = sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children)
    assert codes == [0, 2]
    np.testing.assert_allclose(np.load(tmp_path / "new.npy"), _expected(rows), rtol=1e-5, atol=1e-5)
    # the winner's record of the new vectors' space (a .npy file's sidecar) beside them
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "new.npy",
        "new.npy.space.json",
        "old.npy",
    ]


def test_the_command_writes_the_dtype_asked_for(tmp_path):
    migration_map().save_pretrained(tmp_path / "map")
    old = write_store("npy", tmp_path / "old.npy", np.full((3, D_OLD), 30000, np.float16))
    argv = ["--quiet", "migrate", str(tmp_path / "map"), "--vectors", str(old)]
    assert main([*argv, "--out", str(tmp_path / "new.npy")]) == 2  # overflows float16
    assert main([*argv, "--out", str(tmp_path / "new.npy"), "--dtype", "float32"]) == 0
    new = np.load(tmp_path / "new.npy")
    assert new.dtype == np.float32 and (new == 120000).all()


def test_a_parquet_file_written_by_datasets_is_read_by_datasets_after_migration(tmp_path):
    features = datasets.Features(
        {
            "id": datasets.Value("int64"),
            "embedding": datasets.List(datasets.Value("float32"), length=D_OLD),
        }
    )
    rows = np.random.default_rng(4).standard_normal((6, D_OLD)).astype(np.float32)
    dataset = datasets.Dataset.from_dict(
        {"id": list(range(6)), "embedding": rows.tolist()}, features=features
    )
    dataset.to_parquet(str(tmp_path / "old.parquet"))
    migrate_store(
        migration_map(), tmp_path / "old.parquet", tmp_path / "new.parquet", dtype="float64"
    )
    recorded = json.loads(pq.read_schema(tmp_path / "new.parquet").metadata[b"huggingface"])
    embedding = recorded["info"]["features"]["embedding"]
    assert (embedding["length"], embedding["feature"]["dtype"]) == (D_NEW, "float64")
    new = datasets.Dataset.from_parquet(
        str(tmp_path / "new.parquet"), cache_dir=str(tmp_path / "cache")
    )
    assert new.features["embedding"] == datasets.List(datasets.Value("float64"), length=D_NEW)
    np.testing.assert_allclose(np.array(new["embedding"]), _expected(rows), rtol=1e-5, atol=1e-5)
