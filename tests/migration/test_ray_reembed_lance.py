"""``reembed_shards`` (``relrep-hf reembed --engine ray``) over a Lance dataset (a LanceDB
table's ``TABLE.lance`` folder, 3 fragments), fragment by fragment, on a real local Ray cluster
(the ``ray_cluster`` fixture, 2 encoder actors), compared with the local `reembed_store` of the
same LanceDB table: the rows, the vectors (to 1e-6) and the space recorded in the schema. Rows
without text, an index and an embedding function are refused on the driver before Ray starts;
a killed driver resumes by fragment; a worker that dies is retried, then its fragment named.
The encoder is the real callable encoder `tests.fixtures.killable_reembed.letters`. The input
dataset's files are hashed before and after every run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from relrep_hf import reembed_store
from relrep_hf.cli import main
from relrep_hf.migration.ray_reembed import reembed_shards
from relrep_hf.migration.reembed_texts import MissingTextError
from relrep_hf.migration.space import SPACE_KEY
from relrep_hf.migration.stores import VectorStoreError
from tests.fixtures.killable_reembed import DYING_SPEC, DYING_TEXT, SLOW_SPEC, SPEC
from tests.fixtures.ray_shards import (
    documented,
    run_killed_driver,
    same_table as _same_table,
    table as _table,
    tree_hashes as _tree_hashes,
)

lance = pytest.importorskip("lance")


def _documented(error: Exception, folder: Path) -> None:
    """The error's first sentence is the one docs/bad_inputs.md's section gives."""
    documented(error, folder, "## Re-embedding on Ray")


def _lance_table(tmp_path: Path, rows: int, texts: dict[int, str | None] | None = None) -> Path:
    """A LanceDB database ``db`` holding table 'docs' (fragments of 30 rows, 8-d vectors), with
    the texts of the rows ``texts`` replaced: its folder ``db/docs.lance``."""
    vectors = np.random.default_rng(3).standard_normal((rows, 8)).astype(np.float32)
    table = _table(vectors, 0)
    if texts:
        column = table.column("text").to_pylist()
        for row, text in texts.items():
            column[row] = text
        table = table.set_column(1, "text", pa.array(column, pa.string()))
    (tmp_path / "db").mkdir()
    lance.write_dataset(table, str(tmp_path / "db" / "docs.lance"), max_rows_per_file=30)
    return tmp_path / "db" / "docs.lance"


def _space(dataset: Path) -> dict:
    return json.loads(lance.dataset(str(dataset)).schema.metadata[SPACE_KEY.encode()])


def _same_as_local(ours: Path, local_db: Path) -> None:
    """``ours`` holds the rows, vectors (to 1e-6) and space of the local re-embed's table."""
    reference = lance.dataset(str(local_db / "docs.lance")).to_table().sort_by("id")
    _same_table(lance.dataset(str(ours)).to_table().sort_by("id"), reference)
    assert _space(ours) == _space(local_db / "docs.lance")


# ---------------------------------------------------------------------------------------------
# Refused on the driver, before Ray starts
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # the local engine opens the LanceDB table: about 5 s here
def test_rows_without_text_are_refused_by_id(tmp_path):
    source = _lance_table(tmp_path, 70, {33: None, 61: " "})  # fragments 1 and 2
    before = _tree_hashes(source)
    with pytest.raises(MissingTextError, match=r"2 row\(s\) have no text .* ids 33, 61") as e:
        reembed_shards(source, SPEC, tmp_path / "new.lance")
    _documented(e.value, tmp_path)
    assert e.value.ids == [33, 61]
    with pytest.raises(MissingTextError) as local:
        reembed_store(source.parent, SPEC, tmp_path / "local_db")
    assert local.value.ids == e.value.ids  # the rows the local engine refuses
    assert _tree_hashes(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db"]


def test_an_index_or_an_embedding_function_is_sent_to_the_local_engine(tmp_path):
    source = _lance_table(tmp_path, 40)
    dataset = lance.dataset(str(source))
    dataset.create_scalar_index("id", "BTREE")
    before = _tree_hashes(source)
    with pytest.raises(VectorStoreError, match=r"has the index\(es\) \['id_idx'\]") as e:
        reembed_shards(source, SPEC, tmp_path / "new.lance")
    assert "with the local engine" in str(e.value)
    _documented(e.value, tmp_path)
    assert _tree_hashes(source) == before and not (tmp_path / "new.lance").exists()

    # LanceDB's record of an embedding function filling the vector column (as its registry
    # writes it in the schema): the local engine names it in its plan, refused unless --force
    functions = [{"name": "sentence-transformers", "model": {}, "source_column": "text",
                  "vector_column": "embedding"}]  # fmt: skip
    table = _table(np.ones((4, 8), np.float32), 0)
    table = table.replace_schema_metadata({"embedding_functions": json.dumps(functions)})
    (tmp_path / "fn").mkdir()
    lance.write_dataset(table, str(tmp_path / "fn" / "docs.lance"))
    with pytest.raises(VectorStoreError, match=r"has the embedding function\(s\)") as e:
        reembed_shards(tmp_path / "fn" / "docs.lance", SPEC, tmp_path / "new.lance")
    _documented(e.value, tmp_path)
    assert not (tmp_path / "new.lance").exists()


def test_a_dry_run_projects_the_whole_dataset_and_writes_nothing(tmp_path, capsys):
    source = _lance_table(tmp_path, 70)
    before = _tree_hashes(source)
    argv = ["reembed", str(source), "--encoder", SPEC, "--engine", "ray", "--max-rows", "8"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Embedded 8 rows in" in printed
    assert "the whole store (70 rows) would take about" in printed
    assert _tree_hashes(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db"]


# ---------------------------------------------------------------------------------------------
# On the local Ray cluster: 2 encoder actors
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_lance_dataset_matches_the_local_reembed_of_its_table(tmp_path):
    source = _lance_table(tmp_path, 70)
    assert len(lance.dataset(str(source)).get_fragments()) == 3
    before = _tree_hashes(source)
    out = tmp_path / "new.lance"
    argv = ["--quiet", "reembed", str(source), "--encoder", SPEC, "--out", str(out)]
    assert main([*argv, "--engine", "ray", "--num-workers", "2", "--chunk-rows", "16"]) == 0
    assert _tree_hashes(source) == before  # the input dataset was only read
    local = reembed_store(source.parent, SPEC, tmp_path / "local_db", chunk_rows=16)
    _same_as_local(out, Path(local))
    assert _space(out)["dim"] == 8 and _space(out)["encoder"]["kind"] == "callable"
    assert len(lance.dataset(str(out)).get_fragments()) == 3  # one new fragment per fragment
    assert not (tmp_path / ".new.lance.ray-shards").exists()  # the work folder is gone
    with pytest.raises(VectorStoreError, match="exists already"):
        reembed_shards(source, SPEC, out)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_worker_that_dies_is_retried_then_its_fragment_named(tmp_path):
    source = _lance_table(tmp_path, 70, {40: DYING_TEXT})  # fragment 1
    before = _tree_hashes(source)
    out, work = tmp_path / "new.lance", tmp_path / ".new.lance.ray-shards"
    with pytest.raises(VectorStoreError, match=r"docs\.lance#fragment-1'.*died 2 time") as e:
        reembed_shards(source, DYING_SPEC, out, num_workers=2, max_retries=1)
    _documented(e.value, tmp_path)
    assert _tree_hashes(source) == before and not out.exists()
    assert sorted(p.name for p in (work / ".done").iterdir()) == ["0.json", "2.json"]


# A driver run as a child process (connected to the module's cluster by RAY_ADDRESS), whose
# encoder takes a second a chunk: the test kills it once a fragment is recorded. One actor, here
# and in the resume: each actor's start is a worker process importing Ray, datasets and the
# re-embed modules (about 4 CPU-s), and the number of actors is not what this test is about (two:
# the dying-worker test and the match with the local engine).
SLOW_DRIVER = """
import sys
from relrep_hf.migration.ray_reembed import reembed_shards
reembed_shards(sys.argv[1], sys.argv[2], sys.argv[3], chunk_rows=30, num_workers=1)
"""


@pytest.mark.slow
def test_a_killed_driver_resumes_by_fragment(tmp_path, ray_cluster):
    source = _lance_table(tmp_path, 150)  # 5 fragments
    work, out = tmp_path / ".new.lance.ray-shards", tmp_path / "new.lance"
    run_killed_driver(ray_cluster, SLOW_DRIVER, [source, SLOW_SPEC, out], work)
    assert not out.exists()
    finished = sorted(p.name for p in (work / ".done").glob("*.json"))
    assert 1 <= len(finished) < 5
    records = [json.loads((work / ".done" / name).read_text()) for name in finished]
    data = work / "dataset" / "data"
    kept = {name: (data / name).stat().st_ino for r in records for name in r["files"]}
    before = _tree_hashes(source)
    with pytest.raises(VectorStoreError, match="earlier run of this re-embed stopped"):
        reembed_shards(source, SLOW_SPEC, out, chunk_rows=30)
    reembed_shards(source, SLOW_SPEC, out, chunk_rows=30, num_workers=1, resume=True)
    assert _tree_hashes(source) == before
    written = {p.name: p.stat().st_ino for p in (out / "data").iterdir()}
    assert {name: written[name] for name in kept} == kept  # not embedded again
    local = reembed_store(source.parent, SLOW_SPEC, tmp_path / "local_db", chunk_rows=30)
    _same_as_local(out, Path(local))
