"""Issue #46 item 1 on the database kinds: Qdrant (collection metadata), Chroma (collection
metadata), pgvector (the ``relrep_hf_spaces`` side table, by oid) and sqlite-vec (the
``relrep_hf_spaces`` side table, by name) record the space a migration leaves their vectors in;
the same map twice and a map from another space are refused with nothing written; a rollback
serves the old vectors' record (none, for a store written before records) again. Real stores:
qdrant-client local mode, chromadb, PostgreSQL + pgvector (pgserver), sqlite-vec."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from relrep_hf import MigrationMap, migrate_store
from relrep_hf.migration import StoreSpaceError, open_store
from relrep_hf.migration.rollback import rollback_store
from relrep_hf.migration.space import map_fingerprint
from relrep_hf.migration.stores.database import parse_location
from tests.fixtures.database_stores import KINDS, build, contents

pytestmark = pytest.mark.slow  # a real database each (PostgreSQL starts in seconds)

D_OLD = D_NEW = 8  # same-width encoders: a second pass would run (issue #46's case)
ROWS = {"qdrant": 12, "chroma": 40, "pgvector": 40, "sqlite-vec": 40}
_names = itertools.count()


def a_map(seed: int, d_in: int, d_out: int, source: str, target: str) -> MigrationMap:
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(d_in, d_out, generator=generator)
    return MigrationMap(weight, torch.zeros(d_out), {"source": source, "target": target})


def migrate(uri: str, migration_map: MigrationMap) -> str:
    return migrate_store(
        migration_map, uri, uri, overwrite=True, chunk_rows=16, show_progress=False
    )


@pytest.fixture
def store(request, tmp_path):
    """An unrecorded store of ``request.param``'s kind (as users and older versions write)."""
    kind = request.param
    where = request.getfixturevalue("postgres") if kind == "pgvector" else tmp_path
    vectors = np.random.default_rng(0).standard_normal((ROWS[kind], D_OLD)).astype(np.float32)
    return build(kind, where, f"space{next(_names)}", vectors)


@pytest.mark.parametrize("store", KINDS, indirect=True)
def test_a_database_store_records_its_space_and_refuses_a_map_twice(store):
    assert open_store(store).read_space() is None  # written before records: unrecorded
    first = a_map(0, D_OLD, D_NEW, "old", "new")
    out = migrate(store, first)
    space = open_store(out).read_space()
    assert (space.name, space.dim) == ("new", D_NEW)
    assert space.map == {"fingerprint": map_fingerprint(first), "source": "old", "target": "new"}
    backup = parse_location(store).with_name(out.backup)
    assert open_store(backup).read_space() is None  # the old vectors keep their own (none)
    before = contents(store)
    with pytest.raises(StoreSpaceError, match="was applied to it already"):
        migrate(store, first)
    with pytest.raises(StoreSpaceError, match="the map takes vectors of 'other'"):
        migrate(store, a_map(1, D_NEW, D_NEW, "other", "third"))
    after = contents(store)
    assert after.keys() == before.keys()
    assert all(np.array_equal(after[i][1], before[i][1]) for i in before)  # nothing written
    second = a_map(2, D_NEW, D_NEW, "new", "third")
    out = migrate(store, second)  # from the recorded space: goes on, its record replaces it
    assert open_store(out).read_space().map["fingerprint"] == map_fingerprint(second)
    rollback_store(store, backup=out.backup)
    assert open_store(store).read_space() == space  # the restored vectors' record again


@pytest.mark.parametrize("store", ["pgvector", "sqlite-vec"], indirect=True)
def test_a_new_table_gets_its_own_record_and_the_input_keeps_none(store):
    new = parse_location(store).with_name(f"{parse_location(store).name}_new")
    out = migrate_store(
        a_map(0, D_OLD, D_NEW, "old", "new"), store, new, chunk_rows=16, show_progress=False
    )
    assert open_store(out).read_space().name == "new"
    assert open_store(store).read_space() is None
