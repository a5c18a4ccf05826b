"""Issue #46 item 1's embedding-function half: a real Chroma collection and a real LanceDB table
created with an embedding function (registered offline, tests/fixtures/embedding_functions.py)
embed query texts with the old model. The plan names the function; migrate and reembed refuse
it with nothing written unless forced; a forced run writes the new store without it (and with
its space recorded). Chroma's default function, which every collection has, is carried."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relrep_hf import MigrationMap, migrate_store, reembed_store
from relrep_hf.migration import open_store
from relrep_hf.migration.migrate import plan_migration
from relrep_hf.migration.plan import StorePlanError
from tests.fixtures.embedding_functions import (
    CHROMA_FUNCTION,
    LANCE_FUNCTION,
    chroma_collection,
    lance_table,
)
from tests.fixtures.killable_reembed import SPEC

pytestmark = pytest.mark.slow  # chromadb's and lancedb's imports and writes: seconds each

D = 8
TEXTS = [f"note {i} " + "tea " * (i % 4) for i in range(9)]


def a_map() -> MigrationMap:
    weight = torch.randn(D, D, generator=torch.Generator().manual_seed(0))
    return MigrationMap(weight, torch.zeros(D), {"source": "old", "target": "new"})


def chroma_function(uri: str) -> dict | None:
    return open_store(uri).collection.configuration_json.get("embedding_function")


def test_a_chroma_collection_with_an_embedding_function_is_refused_unless_forced(tmp_path):
    uri = chroma_collection(tmp_path / "chroma", "docs", TEXTS)
    before = open_store(uri).read_all()
    plan = plan_migration(a_map(), uri, uri).text()
    assert (
        f"NOT carried (refused unless --force):\n    - the embedding function {CHROMA_FUNCTION!r}"
        in plan
    )
    with pytest.raises(StorePlanError, match=f"embedding function '{CHROMA_FUNCTION}'"):
        migrate_store(a_map(), uri, uri, overwrite=True, show_progress=False)
    store = open_store(uri)  # nothing written: the same vectors, the function, no other collection
    np.testing.assert_array_equal(store.read_all(), before)
    assert chroma_function(uri)["name"] == CHROMA_FUNCTION
    assert store.names() == ["docs"]
    out = migrate_store(a_map(), uri, uri, overwrite=True, force=True, show_progress=False)
    assert chroma_function(out) in (None, {"type": "legacy"})  # not the old model's any more
    assert open_store(out).read_space().map["source"] == "old"
    assert chroma_function(uri.replace("#docs", f"#{out.backup}"))["name"] == CHROMA_FUNCTION


def test_chromas_default_function_is_carried_and_named_in_the_plan(tmp_path):
    from tests.fixtures.database_stores import build

    uri = build("chroma", tmp_path, "plain", np.ones((4, D), np.float32))
    assert "Chroma's default embedding function" in plan_migration(a_map(), uri, uri).text()
    out = migrate_store(a_map(), uri, uri, overwrite=True, show_progress=False)
    assert chroma_function(out)["name"] == "default"


def test_a_lancedb_table_with_an_embedding_function_is_refused_unless_forced(tmp_path):
    folder = lance_table(tmp_path / "db", "docs", TEXTS)
    store = open_store(folder)
    before = store.read_all()
    assert LANCE_FUNCTION.encode() in store.schema.metadata[b"embedding_functions"]
    with pytest.raises(StorePlanError, match=f"embedding function '{LANCE_FUNCTION}'"):
        migrate_store(a_map(), folder, folder, overwrite=True, show_progress=False)
    with pytest.raises(StorePlanError, match=f"embedding function '{LANCE_FUNCTION}'"):
        reembed_store(folder, SPEC, overwrite=True, show_progress=False)
    np.testing.assert_array_equal(open_store(folder).read_all(), before)  # nothing written
    migrate_store(a_map(), folder, folder, overwrite=True, force=True, show_progress=False)
    migrated = open_store(folder)
    assert b"embedding_functions" not in (migrated.schema.metadata or {})
    assert migrated.read_space().map["target"] == "new"
    out = reembed_store(folder, SPEC, tmp_path / "db2", show_progress=False)
    assert open_store(out).read_space().name == SPEC  # no function to refuse any more
