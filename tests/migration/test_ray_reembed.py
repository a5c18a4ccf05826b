"""``reembed_shards`` (``relrep-hf reembed --engine ray``): a sharded store re-embedded from its
text by encoder actors on a real local Ray cluster (2 CPUs, the ``ray_cluster`` fixture), shard
by shard, compared with the single-process `reembed_store` of the same shards (vectors and the
space recorded); rows without text refused with the local path's message before Ray starts; a
worker that dies on a chosen shard retried, then named, and the run resumed by shard. The
encoder is the real callable encoder `tests.fixtures.killable_reembed.letters` (quick), a BERT
built from a config, and the real MiniLM on 2 actors. The input shards are hashed before and
after every run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from relrep_hf import reembed_store
from relrep_hf.cli import main
from relrep_hf.migration.ray_reembed import reembed_shards
from relrep_hf.migration.ray_shards import SHARDS_FILE
from relrep_hf.migration.reembed_texts import MissingTextError
from relrep_hf.migration.space import SPACE_KEY
from relrep_hf.migration.stores import VectorStoreError
from tests.fixtures.killable_reembed import DYING_SPEC, DYING_TEXT, SLOW_SPEC, SPEC
from tests.fixtures.ray_shards import (
    REPO,
    documented,
    hashes as _hashes,
    parquet_shards as _parquet_shards,
    run_killed_driver,
    same_table as _same_table,
    table as _table,
    tiny_bert as _tiny_bert,
)


def _documented(error: Exception, folder: Path) -> None:
    """The error's first sentence is the one docs/bad_inputs.md's section gives."""
    documented(error, folder, "## Re-embedding on Ray")


def _cli_error(capsys, tmp_path: Path) -> ValueError:
    error = capsys.readouterr().err
    return ValueError(error.split("error: ", 1)[1].strip())


def _space(path: Path) -> dict:
    return json.loads(pq.read_schema(path).metadata[SPACE_KEY.encode()])


# ---------------------------------------------------------------------------------------------
# Refused on the driver, before Ray starts
# ---------------------------------------------------------------------------------------------


def test_rows_without_text_are_refused_by_id_as_the_local_path_refuses_them(tmp_path):
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(5, 6))
    table = pq.read_table(paths[1])
    texts = table.column("text").to_pylist()
    texts[2], texts[4] = None, "  "
    pq.write_table(table.set_column(1, "text", pa.array(texts, pa.string())), paths[1])
    before = _hashes(source)
    with pytest.raises(MissingTextError, match=r"2 row\(s\) have no text .* ids 7, 9") as e:
        reembed_shards(source, SPEC, tmp_path / "out")
    _documented(e.value, tmp_path)
    with pytest.raises(MissingTextError) as local:
        reembed_store(paths[1], SPEC, tmp_path / "local.parquet")
    assert str(e.value) == str(local.value)  # the local path's message, word for word
    assert _hashes(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


def test_a_missing_text_column_is_named(tmp_path):
    source = tmp_path / "shards"
    _parquet_shards(source, sizes=(5,))
    with pytest.raises(VectorStoreError, match="has no text column 'body'") as e:
        reembed_shards(source, SPEC, tmp_path / "out", text_column="body")
    _documented(e.value, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--engine", "ray", "--texts", "t.jsonl", "--out", "o"],
            "--texts applies to --engine local",
        ),
        (["--engine", "ray"], "--engine ray writes the new shards into a new folder"),
        (["--address", "auto"], "--address applies to --engine ray"),
        (["--engine", "ray", "--num-workers", "0", "--out", "o"], "--num-workers must be 1 or"),
    ],
)
def test_flags_of_the_other_engine_are_refused(tmp_path, capsys, flags, message):
    source = tmp_path / "shards"
    _parquet_shards(source, sizes=(5,))
    before = _hashes(source)
    assert main(["reembed", str(source), "--encoder", SPEC, *flags]) == 2
    error = _cli_error(capsys, tmp_path)
    assert message in str(error)
    _documented(error, tmp_path)
    assert _hashes(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


def test_migrate_takes_the_same_cluster_flags(tmp_path, capsys):
    np.save(tmp_path / "old.npy", np.ones((3, 8), np.float32))
    argv = ["migrate", "map", "--vectors", str(tmp_path / "old.npy"), "--out", "new.npy"]
    assert main([*argv, "--address", "auto"]) == 2
    assert "--address applies to --engine ray" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.npy"]


def test_a_dry_run_projects_the_whole_store_and_writes_nothing(tmp_path, capsys):
    source = tmp_path / "shards"
    _parquet_shards(source, sizes=(5, 6, 7))
    before = _hashes(source)
    argv = ["reembed", str(source), "--encoder", SPEC, "--engine", "ray", "--max-rows", "8"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Embedded 8 rows in" in printed  # across the first two shards
    assert "the whole store (18 rows) would take about" in printed
    assert "Nothing was written." in printed
    assert _hashes(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


# What an encoder actor runs (`ShardEncoder`, the plain class Ray makes an actor), in a fresh
# interpreter: one shard embedded by a callable encoder and written, and the heavy modules loaded
ACTOR = """
import sys
from pathlib import Path
from relrep_hf.migration.ray_reembed import ShardEncoder
shard, work, spec = sys.argv[1:]
(Path(work) / ".done").mkdir(parents=True)
options = {"column": None, "text_column": "text", "chunk_rows": 4, "batch_size": 4}
record = ShardEncoder(spec, options | {"dtype": "float32"}).embed_shard("parquet", shard, work)
print(record["rows"], sorted(m for m in ("torch", "transformers") if m in sys.modules))
"""


@pytest.mark.slow  # a fresh interpreter that imports datasets and pyarrow: about 3 s
def test_an_encoder_actor_of_a_callable_loads_neither_torch_nor_transformers(tmp_path):
    """Every actor start and restart of a callable encoder (these tests' `letters`) pays no
    torch import (it paid one only to ask for CUDA, which such an encoder takes no part in)."""
    import subprocess
    import sys

    (path,) = _parquet_shards(tmp_path / "shards", sizes=(9,))
    work = tmp_path / "work"
    command = [sys.executable, "-c", ACTOR, str(path), str(work), SPEC]
    run = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == ["9 []"]
    local = reembed_store(path, SPEC, tmp_path / "local.parquet", chunk_rows=4)
    _same_table(pq.read_table(work / path.name), pq.read_table(local))
    assert _space(work / path.name) == _space(local)


# ---------------------------------------------------------------------------------------------
# On the local Ray cluster: 2 encoder actors
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_parquet_shards_match_the_single_process_reembed(tmp_path):
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(40, 25, 0, 33))
    before = _hashes(source)
    out = reembed_shards(source, SPEC, tmp_path / "out", chunk_rows=16, num_workers=2)
    assert _hashes(source) == before  # the input shards were only read
    for i, path in enumerate(paths):
        ours = out / path.name
        if not pq.read_metadata(path).num_rows:  # an empty shard: the new schema, no rows
            assert pq.read_table(ours).num_rows == 0
            assert _space(ours) == _space(out / paths[0].name)
            continue
        local = reembed_store(path, SPEC, tmp_path / f"local-{i}.parquet", chunk_rows=16)
        _same_table(pq.read_table(ours), pq.read_table(local))
        assert _space(ours) == _space(local)  # the space recorded as the local path records it
    assert (out / "README.txt").read_text() == "the user's note, carried over"
    listing = json.loads((out / SHARDS_FILE).read_text())
    assert [r["rows"] for r in listing["shards"]] == [40, 25, 0, 33]
    assert not (tmp_path / ".out.ray-shards").exists()  # the work folder is gone
    with pytest.raises(VectorStoreError, match="exists already"):
        reembed_shards(source, SPEC, out)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_transformers_encoder_gives_the_single_process_vectors(tmp_path):
    spec = _tiny_bert(tmp_path / "bert")  # a BertModel from a config, saved with its tokenizer
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(20, 13))
    before = _hashes(source)
    # one actor (each actor's start imports torch and transformers: about 10 CPU-s); the
    # parquet, MiniLM and dying-worker tests run two
    out = reembed_shards(source, spec, tmp_path / "out", chunk_rows=8, batch_size=4, num_workers=1)
    assert _hashes(source) == before
    for i, path in enumerate(paths):
        local = reembed_store(
            path, spec, tmp_path / f"local-{i}.parquet", chunk_rows=8, batch_size=4
        )
        _same_table(pq.read_table(out / path.name), pq.read_table(local))  # to 1e-6
        assert _space(out / path.name) == _space(local)
        assert _space(local)["encoder"]["kind"] == "transformers"


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_the_real_minilm_on_two_actors_gives_the_single_process_vectors(tmp_path):
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(12, 9))
    out = reembed_shards(source, "minilm:mean", tmp_path / "out", chunk_rows=8, num_workers=2)
    for i, path in enumerate(paths):
        local = reembed_store(path, "minilm:mean", tmp_path / f"local-{i}.parquet", chunk_rows=8)
        _same_table(pq.read_table(out / path.name), pq.read_table(local))  # to 1e-6
        assert _space(out / path.name) == _space(local)
        assert _space(local)["encoder"]["id"] == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_datasets_folder_through_the_command(tmp_path):
    vectors = np.random.default_rng(2).standard_normal((60, 4)).astype(np.float32)
    source = tmp_path / "old_ds"
    datasets.Dataset(_table(vectors, 0)).save_to_disk(str(source), num_shards=3)
    before = _hashes(source)
    out = tmp_path / "new_ds"
    argv = ["--quiet", "reembed", str(source), "--encoder", SPEC, "--out", str(out)]
    assert main([*argv, "--engine", "ray", "--num-workers", "1", "--chunk-rows", "7"]) == 0
    assert _hashes(source) == before
    local = reembed_store(source, SPEC, tmp_path / "local_ds", chunk_rows=7)
    ours, reference = datasets.load_from_disk(str(out)), datasets.load_from_disk(str(local))
    assert ours.features == reference.features
    assert len(ours.cache_files) == 3  # one new shard per input shard
    _same_table(ours.data.table, reference.data.table)
    space = "store_space.json"
    assert (out / space).read_text() == (Path(local) / space).read_text()


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_worker_that_dies_is_retried_then_named_and_the_run_resumes(tmp_path):
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(6, 6, 6))
    good = pq.read_table(paths[1])
    texts = good.column("text").to_pylist()
    dying = good.set_column(1, "text", pa.array([DYING_TEXT, *texts[1:]], pa.string()))
    pq.write_table(dying, paths[1])
    before = _hashes(source)
    out, work = tmp_path / "out", tmp_path / ".out.ray-shards"
    with pytest.raises(VectorStoreError, match=r"part-001\.parquet.*died 2 time") as e:
        reembed_shards(source, DYING_SPEC, out, num_workers=2, max_retries=1)
    _documented(e.value, tmp_path)
    assert _hashes(source) == before and not out.exists()  # nothing in place of the input
    done = sorted(p.name for p in (work / ".done").iterdir())
    assert done == ["part-000.parquet.json", "part-002.parquet.json"]  # kept for a resume
    kept = {name: os.stat(work / name).st_ino for name in ("part-000.parquet", "part-002.parquet")}
    with pytest.raises(VectorStoreError, match="earlier run of this re-embed stopped") as e:
        reembed_shards(source, DYING_SPEC, out)
    _documented(e.value, tmp_path)
    pq.write_table(good, paths[1])  # the cause fixed
    # one actor for the one shard left (each actor's start: a worker process importing Ray,
    # datasets and the re-embed modules, about 4 CPU-s)
    reembed_shards(source, DYING_SPEC, out, resume=True, num_workers=1)
    assert {name: os.stat(out / name).st_ino for name in kept} == kept  # not embedded again
    for i, path in enumerate(paths):
        local = reembed_store(path, SPEC, tmp_path / f"local-{i}.parquet")
        _same_table(pq.read_table(out / path.name), pq.read_table(local))


# A driver run as a child process (connected to the module's cluster by RAY_ADDRESS), whose
# encoder takes a second a shard: the test kills it once a shard is recorded. One actor, here
# and in the resume: each actor's start is a worker process importing Ray, datasets and the
# re-embed modules (about 4 CPU-s), and the number of actors is not what this test is about.
SLOW_DRIVER = """
import sys
from relrep_hf.migration.ray_reembed import reembed_shards
reembed_shards(sys.argv[1], sys.argv[2], sys.argv[3], chunk_rows=10, num_workers=1)
"""


@pytest.mark.slow
def test_a_killed_driver_resumes_from_its_finished_shards(tmp_path, ray_cluster):
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(10,) * 5)  # killed after 1: 4 seconds to go
    work, out = tmp_path / ".out.ray-shards", tmp_path / "out"
    run_killed_driver(ray_cluster, SLOW_DRIVER, [source, SLOW_SPEC, out], work)
    assert not out.exists()
    finished = [p for p in paths if (work / ".done" / f"{p.name}.json").exists()]
    assert 1 <= len(finished) < len(paths)
    kept = {p.name: os.stat(work / p.name).st_ino for p in finished}
    before = _hashes(source)
    reembed_shards(source, SLOW_SPEC, out, chunk_rows=10, num_workers=1, resume=True)
    assert _hashes(source) == before
    assert {name: os.stat(out / name).st_ino for name in kept} == kept  # not embedded again
    for i, path in enumerate(paths):
        local = reembed_store(path, SPEC, tmp_path / f"local-{i}.parquet", chunk_rows=10)
        _same_table(pq.read_table(out / path.name), pq.read_table(local))


# ---------------------------------------------------------------------------------------------
# Ray Data (`reembed_dataset`, onboarding): a worker that dies is retried, then its batch named
# ---------------------------------------------------------------------------------------------


def test_a_batch_is_named_by_its_shard_file_else_by_its_ids():
    from relrep_hf.migration.ray_engine import describe_batch

    texts = pa.array(["a", "b", "c"])
    paths = pa.array(["/data/part-1.parquet", "/data/part-1.parquet", "/data/part-2.parquet"])
    named = describe_batch(pa.table({"text": texts, "path": paths}), "text")
    assert named == "shard '/data/part-1.parquet', '/data/part-2.parquet'"
    by_ids = describe_batch(pa.table({"id": [30, 31, 59], "text": texts}), "text")
    assert by_ids == "the rows of ids 30 to 59 of the Ray dataset"
    assert describe_batch(pa.table({"text": texts}), "text") == (
        "the batch of 3 rows of the Ray dataset from text 'a'"
    )


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_worker_that_dies_while_onboarding_is_retried_then_its_shard_named(tmp_path):
    import ray

    from relrep_hf.migration.ray_onboarding import onboarding_from_dataset

    source = tmp_path / "corpus"
    paths = _parquet_shards(source, sizes=(6, 6, 6))
    table = pq.read_table(paths[1])
    texts = table.column("text").to_pylist()
    pq.write_table(
        table.set_column(1, "text", pa.array([*texts[:3], DYING_TEXT, *texts[4:]])), paths[1]
    )
    before = _hashes(source)
    ds = ray.data.read_parquet([str(p) for p in paths], include_paths=True)
    with pytest.raises(VectorStoreError, match=r"part-001\.parquet': the Ray worker re-embed") as e:
        onboarding_from_dataset(
            ds, ["row 0", "row 13"], encoder=DYING_SPEC, chunk_rows=6, max_retries=1, concurrency=1
        )
    assert "died 2 time(s)" in str(e.value)
    _documented(e.value, tmp_path)
    assert _hashes(source) == before
