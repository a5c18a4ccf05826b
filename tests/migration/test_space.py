"""Issue #46 item 1: every file and folder store (FAISS in a sidecar, LanceDB in its table's
schema metadata; the databases' in test_database_space.py) records the space its vectors are in (a map's
fingerprint, source and target after ``migrate``), and a map that does not start from that
space is refused: the same map twice, a store already in the map's target, a map from another
encoder. Stores written before records existed read as unrecorded and migrate as before."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from relrep_hf import MigrationMap, migrate_store
from relrep_hf.migration import StoreSpace, StoreSpaceError, open_store
from relrep_hf.migration.space import SPACE_KEY, map_fingerprint
from relrep_hf.migration.stores import rewrite_store
from relrep_hf.migration.stores.npy import space_sidecar
from tests.fixtures.migration_inputs import write_store

D = 4
NAMES = {
    "npy": "docs.npy",
    "safetensors": "docs.safetensors",
    "parquet": "docs.parquet",
    "datasets": "docs",
    "faiss": "docs.faiss",
    "lancedb": "docs_db",
}


def a_map(seed: int, source: str | None = "old", target: str | None = "new") -> MigrationMap:
    generator = torch.Generator().manual_seed(seed)
    weight, bias = torch.randn(D, D, generator=generator), torch.zeros(D)
    return MigrationMap(weight, bias, {"source": source, "target": target})


# LanceDB's first import and table write: 12 s on the shared 2 cores
@pytest.fixture(
    params=[pytest.param(k, marks=pytest.mark.slow) if k == "lancedb" else k for k in NAMES]
)
def store(request, tmp_path):
    """An unrecorded store of each file kind (written as users and older versions write)."""
    rows = np.random.default_rng(0).standard_normal((9, D)).astype(np.float32)
    return write_store(request.param, tmp_path / NAMES[request.param], rows)


def test_space_records_round_trip_and_a_broken_one_is_named():
    space = StoreSpace("e5", 384, encoder={"id": "intfloat/e5", "pooling": "mean"}, aliases=("x",))
    assert StoreSpace.from_json(space.to_json(), where="here") == space
    assert space.names() == {"e5", "x"}
    with pytest.raises(StoreSpaceError, match="here: its record of the space .* is unreadable"):
        StoreSpace.from_json('{"name": "e5"}', where="here")
    # the fingerprint is the map's values: another map, another fingerprint
    assert map_fingerprint(a_map(0)) == map_fingerprint(a_map(0)) != map_fingerprint(a_map(1))


def test_a_migrated_store_records_the_map_and_refuses_it_a_second_time(store, tmp_path):
    assert open_store(store).read_space() is None  # written before records: unrecorded
    migration_map = a_map(0)
    migrate_store(migration_map, store, store, overwrite=True, show_progress=False)
    space = open_store(store).read_space()
    assert (space.name, space.dim) == ("new", D)
    assert space.map == {"fingerprint": map_fingerprint(migration_map), "source": "old",
                         "target": "new"}  # fmt: skip
    before = open_store(store).read_all()
    with pytest.raises(StoreSpaceError, match="was applied to it already"):
        migrate_store(migration_map, store, store, overwrite=True, show_progress=False)
    with pytest.raises(StoreSpaceError, match="in 'new' .* already, the map's target"):
        migrate_store(a_map(1), store, store, overwrite=True, show_progress=False)
    with pytest.raises(StoreSpaceError, match="the map takes vectors of 'other'"):
        migrate_store(a_map(2, "other", "third"), store, tmp_path / ("x" + store.name))
    np.testing.assert_array_equal(open_store(store).read_all(), before)  # nothing written
    # a map from the recorded space goes on, and its record replaces the old one
    migrate_store(a_map(3, "new", "third"), store, store, overwrite=True, show_progress=False)
    assert open_store(store).read_space().map["source"] == "new"


def test_a_map_naming_no_source_is_checked_by_its_fingerprint_only(store):
    anonymous = a_map(0, None, None)
    migrate_store(anonymous, store, store, overwrite=True, show_progress=False)
    assert open_store(store).read_space().name == f"map {map_fingerprint(anonymous)}"
    migrate_store(a_map(1, None, None), store, store, overwrite=True, show_progress=False)
    with pytest.raises(StoreSpaceError, match="was applied to it already"):
        migrate_store(a_map(1, None, None), store, store, overwrite=True, show_progress=False)


def double(chunk: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    if out is None:
        return chunk * 2.0
    np.multiply(chunk, 2.0, out=out)
    return out


def test_a_rewrite_without_a_space_drops_the_old_record(store, tmp_path):
    migrate_store(a_map(0), store, store, overwrite=True, show_progress=False)
    out = tmp_path / ("plain_" + store.name)
    rewrite_store(open_store(store), out, double, D, show_progress=False)
    assert open_store(out).read_space() is None  # never the old vectors' record


def test_a_npy_file_replaced_by_other_means_reads_unrecorded(tmp_path):
    path = write_store("npy", tmp_path / "docs.npy", np.ones((3, D), np.float32))
    migrate_store(a_map(0), path, path, overwrite=True, show_progress=False)
    assert open_store(path).read_space() is not None
    np.save(path, np.zeros((3, D), np.float32))  # the user writes the file again
    assert open_store(path).read_space() is None
    space_sidecar(path).write_text("{not json")
    with pytest.raises(StoreSpaceError, match="not a readable record"):
        open_store(path).read_space()


def test_a_broken_record_in_a_parquet_file_is_named(tmp_path):
    import pyarrow.parquet as pq

    path = write_store("parquet", tmp_path / "docs.parquet", np.ones((3, D), np.float32))
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({SPACE_KEY: json.dumps({"format": 99})}), path)
    with pytest.raises(StoreSpaceError, match="docs.parquet: its record .* is unreadable"):
        migrate_store(a_map(0), path, tmp_path / "new.parquet")
