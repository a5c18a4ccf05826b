"""Property tests of store migration (issue #37) over store kinds x dtypes x chunk sizes x map
scales x an existing output, and over kill points.

The properties: a migration either writes the map applied row by row (to the dtype's
tolerance) with nothing else changed (ids, other columns, metadata), or raises an error of
ours with the old store and any existing output byte-identical; and a run SIGKILLed at any
chunk leaves the output absent or intact, and no partial file once the next run is done.
Small stores and few examples: the whole file takes seconds.
"""

from __future__ import annotations

import hashlib
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from relrep_hf import migrate_store
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.migrate import affine_chunks
from relrep_hf.migration.stores import VectorStoreError, open_store, rewrite_store
from relrep_hf.utils.locking import FolderLockedError
from tests.fixtures.migration_inputs import D_NEW, D_OLD, write_store

SETTINGS = settings(
    max_examples=24,
    deadline=None,
    derandomize=True,  # the same cases on every run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
NAMES = {
    "npy": "v.npy",
    "safetensors": "v.safetensors",
    "parquet": "v.parquet",
    "datasets": "v_ds",
    "faiss": "v.faiss",
    "lancedb": "v_db",
}
DTYPES = {"faiss": ["float32"]}  # a flat index holds float32 only
TOLERANCE = {"float16": 2e-2, "float32": 1e-5, "float64": 1e-10}


def tree_digest(path: Path) -> str | None:
    """One sha256 over every file under ``path`` (names and bytes); None if it is absent."""
    if not path.exists():
        return None
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path.parent)).encode() + file.read_bytes())
    return digest.hexdigest()


def others(kind: str, path: Path) -> dict:
    """Everything of a store but its vectors: ids, texts, metadata."""
    if kind == "safetensors":
        from safetensors import safe_open

        with safe_open(str(path), "np") as file:
            return {"ids": file.get_tensor("ids").tolist(), "meta": file.metadata()}
    if kind == "faiss":
        import faiss

        index = faiss.read_index(str(path))
        return {"ids": faiss.vector_to_array(index.id_map).tolist(), "metric": index.metric_type}
    if kind in ("parquet", "datasets", "lancedb"):
        store = open_store(path)
        rows = [b.select(["id", "text"]).to_pylist() for b in store.batches(1000)]
        return {"rows": [row for batch in rows for row in batch]}
    return {}


def leftovers(folder: Path, names: set[str]) -> list[str]:
    """Whatever is in ``folder`` beyond ``names`` and a .npy or FAISS store's record of its space
    (``NAME.space.json``): partial files, staging folders, locks."""
    sidecars = {f"{name}.space.json" for name in names if name.endswith((".npy", ".faiss"))}
    stores = names | sidecars
    return sorted(p.name for p in folder.iterdir() if p.name not in stores)


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(sorted(NAMES)))
    dtype = draw(st.sampled_from(DTYPES.get(kind, ["float16", "float32", "float64"])))
    rows = draw(st.integers(1 if kind == "lancedb" else 0, 30))
    chunk_rows = draw(st.integers(1, 12))
    scale = draw(st.sampled_from([1.0, 1.0, 1e4, 1e37]))  # 1e4: float16 overflows
    existing = draw(st.sampled_from([None, "store", "notes"]))
    overwrite = draw(st.booleans())
    return kind, dtype, rows, chunk_rows, scale, existing, overwrite


@SETTINGS
@given(case=cases())
def test_a_migration_is_the_map_row_by_row_or_an_error_that_changes_nothing(case, tmp_path_factory):
    kind, dtype, rows, chunk_rows, scale, existing, overwrite = case
    folder = tmp_path_factory.mktemp(kind)
    rng = np.random.default_rng(rows)
    vectors = rng.standard_normal((rows, D_OLD)).astype(dtype)
    old = write_store(kind, folder / NAMES[kind], vectors)
    out = folder / ("new_" + NAMES[kind])
    if existing == "store":
        write_store(kind, out, vectors[:2] if len(vectors) > 1 else np.ones((2, D_OLD), dtype))
    elif existing == "notes":
        out.write_text("my notes")
    weight = torch.from_numpy(rng.standard_normal((D_OLD, D_NEW)) * scale)
    bias = torch.from_numpy(rng.standard_normal(D_NEW))
    migration_map = MigrationMap(weight.to(torch.float64), bias.to(torch.float64))
    before_old, before_out = tree_digest(old), tree_digest(out)
    others_before = others(kind, old)
    try:
        migrate_store(
            migration_map, old, out, chunk_rows=chunk_rows, overwrite=overwrite, show_progress=False
        )
    except (VectorStoreError, FolderLockedError) as error:
        assert str(old) in str(error) or str(out) in str(error), error
        assert tree_digest(old) == before_old and tree_digest(out) == before_out
        assert leftovers(folder, {old.name, out.name}) == []
        assert existing is not None or scale > 1, f"refused a plain migration: {error}"
        return
    assert existing is None or (overwrite and existing == "store"), "replaced what it must not"
    assert tree_digest(old) == before_old
    store = open_store(out)
    assert (store.rows, store.kind, str(store.dtype)) == (rows, kind, dtype)
    expected = vectors.astype(np.float64) @ weight.numpy() + bias.numpy()
    assert store.rows == 0 or store.dim == D_NEW
    got = store.read_all().astype(np.float64)
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * 10 * scale)
    assert others(kind, out) == others_before
    assert leftovers(folder, {old.name, out.name}) == []


@pytest.mark.slow
@settings(SETTINGS, max_examples=10)
@given(
    kind=st.sampled_from(["npy", "safetensors", "parquet", "datasets", "faiss", "lancedb"]),
    kill_at=st.integers(0, 5),  # 30 rows, 5 a chunk: 6 chunks
    existing=st.booleans(),
)
def test_a_run_killed_at_any_chunk_leaves_out_intact_and_the_next_run_cleans_up(
    kind, kill_at, existing, tmp_path_factory
):
    """A forked child migrates, SIGKILLs itself before its ``kill_at``-th chunk's transform
    returns; then ``out`` is absent or as it was, and the next run succeeds and leaves no
    partial file."""
    folder = tmp_path_factory.mktemp(kind)
    vectors = np.random.default_rng(kill_at).standard_normal((30, D_OLD)).astype(np.float32)
    old = write_store(kind, folder / NAMES[kind], vectors)
    out = folder / ("new_" + NAMES[kind])
    if existing:
        write_store(kind, out, vectors[:3])
    before_old, before_out = tree_digest(old), tree_digest(out)
    migration_map = MigrationMap(torch.randn(D_OLD, D_NEW), torch.randn(D_NEW))
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            transform = affine_chunks(migration_map, np.dtype(np.float32))
            calls = 0

            def dying(chunk, result=None):
                nonlocal calls
                if calls == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                calls += 1
                return transform(chunk) if result is None else transform(chunk, result)

            store = open_store(old)
            rewrite_store(
                store, out, dying, D_NEW, chunk_rows=5, overwrite=True, show_progress=False
            )
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert tree_digest(old) == before_old and tree_digest(out) == before_out
    migrate_store(migration_map, old, out, chunk_rows=5, overwrite=True, show_progress=False)
    assert leftovers(folder, {old.name, out.name}) == []
    got = open_store(out).read_all()
    np.testing.assert_allclose(got, migration_map.apply(vectors), rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the forked child is safe from the parent's thread pools
    yield
    torch.set_num_threads(threads)
