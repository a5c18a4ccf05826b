"""Store work on a real local Ray cluster (2 CPUs, the session's: tests/conftest.py): a sharded store
(parquet shards, a datasets folder) migrated shard by shard and compared with the
single-process `migrate_store` of the same shards, resumed after a run that stopped, a worker
that dies, Ray datasets migrated and re-embedded (a tiny BERT saved to a folder) against the
one-process paths, and whitening statistics merged from blocks against
`Statistics.from_embeddings`. The input shards are hashed before and after every run."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from relrep_hf import migrate_store
from relrep_hf.cli import main
from relrep_hf.functional.statistics import Statistics
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.ray_shards import SHARDS_FILE, migrate_shards
from relrep_hf.migration.stores import VectorStoreError
from tests.fixtures.ray_shards import (
    D_OLD,
    SIZES,
    documented,
    hashes as _hashes,
    parquet_shards as _parquet_shards,
    run_killed_driver,
    same_table as _same_table,
    table as _table,
    tiny_bert as _tiny_bert,
    tree_hashes as _tree_hashes,
)

D_NEW = 5


# A driver run as a child process (connected to the session's cluster by RAY_ADDRESS) whose map
# makes each shard's task take a second: the test kills it once a shard is recorded.
SLOW_DRIVER = """
import operator, sys, time
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.ray_shards import migrate_shards

class Second:
    def __reduce_ex__(self, protocol):  # unpickled on a worker: a second's sleep
        return (time.sleep, (1.0,))

class SlowMap(MigrationMap):
    def __reduce_ex__(self, protocol):  # a plain map again, after the sleep
        plain = MigrationMap(self.weight.detach(), self.bias.detach())
        return (operator.itemgetter(1), ((Second(), plain),))

saved = MigrationMap.from_pretrained(sys.argv[1])
migrate_shards(SlowMap(saved.weight.detach(), saved.bias.detach()), sys.argv[2], sys.argv[3])
"""


@pytest.fixture(scope="module")
def migration_map():
    rng = np.random.default_rng(0)
    weight, bias = rng.standard_normal((D_OLD, D_NEW)), rng.standard_normal(D_NEW)
    return MigrationMap(torch.from_numpy(weight).float(), torch.from_numpy(bias).float())


def _documented(error: Exception, folder: Path) -> None:
    """The error's first sentence is the one docs/bad_inputs.md's Ray section gives."""
    documented(error, folder, "## The Ray engine")


# ---------------------------------------------------------------------------------------------
# Refused before Ray starts: every shard is opened and checked on the driver first
# ---------------------------------------------------------------------------------------------


def test_a_shard_of_another_dimension_is_named_and_nothing_is_written(tmp_path, migration_map):
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(5, 5))
    pq.write_table(_table(np.ones((4, D_OLD + 2), np.float32), 100), source / "part-009.parquet")
    before = _hashes(source)
    with pytest.raises(VectorStoreError, match=r"part-009\.parquet.*this shard holds 10-d") as e:
        migrate_shards(migration_map, source, tmp_path / "out")
    _documented(e.value, tmp_path)
    assert _hashes(source) == before and len(paths) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


def test_a_missing_column_is_named(tmp_path, migration_map):
    source = tmp_path / "shards"
    _parquet_shards(source, sizes=(5,))
    with pytest.raises(
        VectorStoreError, match=r"part-000\.parquet' has no vector column 'vec'"
    ) as e:
        migrate_shards(migration_map, source, tmp_path / "out", column="vec")
    _documented(e.value, tmp_path)


def test_the_input_folder_is_never_the_output(tmp_path, migration_map):
    source = tmp_path / "shards"
    _parquet_shards(source, sizes=(5,))
    with pytest.raises(VectorStoreError, match="is the input folder itself") as e:
        migrate_shards(migration_map, source, source, overwrite=True)
    _documented(e.value, tmp_path)


def test_a_folder_without_shards_is_refused(tmp_path, migration_map):
    (tmp_path / "empty").mkdir()
    with pytest.raises(VectorStoreError, match=r"holds no \.parquet shards") as e:
        migrate_shards(migration_map, tmp_path / "empty", tmp_path / "out")
    _documented(e.value, tmp_path)


def test_a_map_whose_report_says_re_embed_is_refused_before_ray_starts(tmp_path, migration_map):
    from relrep_hf.migration.report import MigrationQualityError

    source = tmp_path / "shards"
    _parquet_shards(source, sizes=(5,))
    refused = MigrationMap(migration_map.weight.detach(), migration_map.bias.detach())
    refused.info = {"recommendation": {"action": "re-embed", "reason": "retention@10 0.2"}}
    with pytest.raises(MigrationQualityError, match="recommends re-embedding"):
        migrate_shards(refused, source, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


def test_resume_is_refused_without_the_ray_engine(tmp_path, capsys):
    np.save(tmp_path / "old.npy", np.ones((3, D_OLD), np.float32))
    argv = ["migrate", "map", "--vectors", str(tmp_path / "old.npy"), "--out", "new.npy"]
    assert main([*argv, "--resume"]) == 2
    error = capsys.readouterr().err
    assert "--resume applies to --engine ray" in error
    _documented(ValueError(error.split("error: ", 1)[1].strip()), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.npy"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--shards", "corpus"], "--shards applies to --engine ray"),
        (["--engine", "ray", "--out", "p"], "--engine ray needs --shards (the corpus) and --out"),
    ],
)
def test_onboard_flags_of_the_other_engine_are_refused(tmp_path, capsys, flags, message):
    assert main(["onboard", str(tmp_path / "run"), "--encoder", "minilm", *flags]) == 2
    error = capsys.readouterr().err
    assert message in error
    _documented(ValueError(error.split("error: ", 1)[1].strip()), tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_batch_is_migrated_as_migrate_store_migrates_its_file(tmp_path, migration_map, dtype):
    from relrep_hf.migration.ray_engine import migrate_batch

    table = _table(np.random.default_rng(3).standard_normal((12, D_OLD)).astype(dtype), 0)
    pq.write_table(table, tmp_path / "old.parquet")
    local = pq.read_table(
        migrate_store(migration_map, tmp_path / "old.parquet", tmp_path / "n.parquet")
    )
    ours = migrate_batch(table, migration_map=migration_map, column="embedding", dtype=None)
    assert ours.column("embedding").type.value_type == pa.from_numpy_dtype(dtype)
    _same_table(ours, local)


# ---------------------------------------------------------------------------------------------
# On the local Ray cluster
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_parquet_shards_match_the_single_process_path(tmp_path, ray_cluster, migration_map):
    source = tmp_path / "shards"
    paths = _parquet_shards(source)
    before = _hashes(source)
    out = migrate_shards(migration_map, source, tmp_path / "out", chunk_rows=16)
    assert _hashes(source) == before  # the input shards were only read
    for i, path in enumerate(paths):
        local = migrate_store(migration_map, path, tmp_path / f"local-{i}.parquet")
        _same_table(pq.read_table(out / path.name), pq.read_table(local))
    assert (out / "README.txt").read_text() == "the user's note, carried over"
    listing = json.loads((out / SHARDS_FILE).read_text())
    assert [r["shard"] for r in listing["shards"]] == [p.name for p in paths]
    assert [r["rows"] for r in listing["shards"]] == list(SIZES)
    for record in listing["shards"]:
        assert hashlib.sha256((out / record["shard"]).read_bytes()).hexdigest() == record["sha256"]
    assert not (tmp_path / ".out.ray-shards").exists()  # the work folder is gone
    with pytest.raises(VectorStoreError, match="exists already"):
        migrate_shards(migration_map, source, out)


@pytest.mark.slow
def test_a_datasets_folder_through_the_command(tmp_path, ray_cluster, migration_map):
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((90, D_OLD)).astype(np.float32)
    source = tmp_path / "old_ds"
    datasets.Dataset(_table(vectors, 0)).save_to_disk(str(source), num_shards=3)
    map_folder = tmp_path / "map"
    migration_map.save_pretrained(map_folder)
    before = _hashes(source)
    out = tmp_path / "new_ds"
    args = ["migrate", str(map_folder), "--vectors", str(source), "--out", str(out)]
    assert main([*args, "--engine", "ray", "--chunk-rows", "7"]) == 0
    assert _hashes(source) == before
    local = migrate_store(migration_map, source, tmp_path / "local_ds")
    ours, reference = datasets.load_from_disk(str(out)), datasets.load_from_disk(str(local))
    assert ours.features == reference.features
    assert len(ours.cache_files) == 3  # one new shard per input shard
    _same_table(ours.data.table, reference.data.table)


@pytest.mark.slow
def test_a_stopped_run_resumes_from_its_verified_shards(tmp_path, ray_cluster, migration_map):
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(20, 20, 20))
    good = pq.read_table(paths[2])
    vectors = np.array(good.column("embedding").to_pylist(), np.float32)
    vectors[3, 1] = np.nan
    pq.write_table(good.set_column(2, "embedding", _table(vectors, 40).column(2)), paths[2])
    with pytest.raises(VectorStoreError, match=r"part-002\.parquet.*hold NaN") as e:
        migrate_shards(migration_map, source, tmp_path / "out")
    _documented(e.value, tmp_path)
    work = tmp_path / ".out.ray-shards"
    assert not (tmp_path / "out").exists()
    assert {p.name for p in work.iterdir()} >= {"part-000.parquet", "part-001.parquet"}
    kept = os.stat(work / "part-000.parquet").st_ino
    with open(work / "part-001.parquet", "ab") as file:  # damaged: redone, not trusted
        file.write(b"x")
    pq.write_table(good, paths[2])  # fixed
    with pytest.raises(VectorStoreError, match="Pass resume=True") as e:
        migrate_shards(migration_map, source, tmp_path / "out")
    _documented(e.value, tmp_path)
    before = _hashes(source)
    out = migrate_shards(migration_map, source, tmp_path / "out", resume=True)
    assert _hashes(source) == before
    assert os.stat(out / "part-000.parquet").st_ino == kept  # not migrated again
    for i, path in enumerate(paths):
        local = migrate_store(migration_map, path, tmp_path / f"local-{i}.parquet")
        _same_table(pq.read_table(out / path.name), pq.read_table(local))
    assert not work.exists()


@pytest.mark.slow
def test_a_killed_driver_resumes_from_its_finished_shards(tmp_path, ray_cluster, migration_map):
    source = tmp_path / "shards"
    paths = _parquet_shards(source, sizes=(10,) * 8)
    migration_map.save_pretrained(tmp_path / "map")
    work, out = tmp_path / ".out.ray-shards", tmp_path / "out"
    run_killed_driver(ray_cluster, SLOW_DRIVER, [tmp_path / "map", source, out], work)
    assert not out.exists()
    finished = [p for p in paths if (work / ".done" / f"{p.name}.json").exists()]
    assert 1 <= len(finished) < len(paths)
    kept = {p.name: os.stat(work / p.name).st_ino for p in finished}
    before = _hashes(source)
    migrate_shards(migration_map, source, out, resume=True)
    assert _hashes(source) == before
    assert {name: os.stat(out / name).st_ino for name in kept} == kept  # not migrated again
    for i, path in enumerate(paths):
        local = migrate_store(migration_map, path, tmp_path / f"local-{i}.parquet")
        _same_table(pq.read_table(out / path.name), pq.read_table(local))


class DyingMap(MigrationMap):
    """A real map on the driver; a Ray worker that unpickles it exits at once (as one killed by
    the out-of-memory killer would)."""

    def __reduce_ex__(self, protocol):
        return (os._exit, (1,))


@pytest.mark.slow
def test_a_worker_that_dies_is_retried_then_named(tmp_path, ray_cluster, migration_map):
    source = tmp_path / "shards"
    _parquet_shards(source, sizes=(6,))
    before = _hashes(source)
    dying = DyingMap(migration_map.weight.detach().clone(), migration_map.bias.detach().clone())
    with pytest.raises(VectorStoreError, match=r"part-000\.parquet.*died 2 time") as e:
        migrate_shards(dying, source, tmp_path / "out", max_retries=1)
    _documented(e.value, tmp_path)
    assert _hashes(source) == before
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_ray_dataset_is_migrated_and_its_statistics_merged(tmp_path, ray_cluster, migration_map):
    from relrep_hf.migration.ray_engine import migrate_dataset, statistics_from_dataset

    source = tmp_path / "shards"
    paths = _parquet_shards(source)
    ds = ray_cluster.data.read_parquet([str(p) for p in paths])
    migrated = migrate_dataset(migration_map, ds).to_arrow_refs()
    ours = pa.concat_tables(ray_cluster.get(migrated)).sort_by("id")
    local = [
        migrate_store(migration_map, p, tmp_path / f"l{i}.parquet") for i, p in enumerate(paths)
    ]
    _same_table(ours, pa.concat_tables([pq.read_table(p) for p in local]))

    stats = statistics_from_dataset(ds)  # a block per shard at least
    rows = [pq.read_table(p).column("embedding").to_pylist() for p in paths]
    rows = np.concatenate([np.array(r, np.float32).reshape(-1, D_OLD) for r in rows])
    reference = Statistics.from_embeddings(torch.from_numpy(rows))
    assert stats.count == reference.count == sum(SIZES)
    for ours_part, want in ((stats.mean, reference.mean), (stats.scatter, reference.scatter)):
        scale = want.abs().max()
        assert float((ours_part - want).abs().max() / scale) < 1e-9

    wide = ray_cluster.data.from_arrow(_table(np.ones((3, D_OLD + 1), np.float32), 0))
    with pytest.raises(VectorStoreError, match="holds 9-d vectors, the map takes 8-d") as e:
        migrate_dataset(migration_map, wide)
    _documented(e.value, tmp_path)


@pytest.mark.slow
def test_a_ray_dataset_is_reembedded_as_one_process_embeds_it(tmp_path, ray_cluster):
    from relrep_hf.encoding.encoder_kinds import EmbedRequest, embed_encoders, parse_encoder
    from relrep_hf.migration.ray_engine import reembed_dataset

    spec = _tiny_bert(tmp_path / "bert")
    texts = [" ".join(["row", str(i)] + ["a b c d"[: 1 + i % 7]] * (i % 5)) for i in range(60)]
    table = pa.table({"id": np.arange(60), "text": texts})
    ds = ray_cluster.data.from_arrow([table[:30], table[30:]])  # two blocks: two actors
    embedded = reembed_dataset(ds, spec, batch_size=16, concurrency=2).to_arrow_refs()
    ours = pa.concat_tables(ray_cluster.get(embedded)).sort_by("id")
    assert ours.column("text").to_pylist() == texts
    parsed, _ = parse_encoder(spec)
    request = EmbedRequest(datasets.Dataset.from_dict({"text": texts}), tmp_path / "cache")
    (reference,) = embed_encoders([parsed], ["text"], request)
    want = np.array(reference.dataset["embedding"], dtype=np.float64)
    got = np.array(ours.column("embedding").to_pylist(), dtype=np.float64)
    assert got.shape == want.shape == (60, 16)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="no text column 'body'") as e:
        reembed_dataset(ds, spec, text_column="body")
    _documented(e.value, tmp_path)


# ---------------------------------------------------------------------------------------------
# Onboarding from a corpus on Ray: statistics and support embeddings
# ---------------------------------------------------------------------------------------------


def _corpus(folder: Path, rows: int = 90, dim: int = D_OLD) -> tuple[list[Path], np.ndarray]:
    """Three parquet shards of ``rows`` distinct texts and their float32 vectors."""
    paths = _parquet_shards(folder, sizes=(rows // 3, rows // 3, rows - 2 * (rows // 3)), dim=dim)
    tables = [pq.read_table(p) for p in paths]
    vectors = np.concatenate([np.array(t.column("embedding").to_pylist()) for t in tables])
    return paths, vectors.astype(np.float32)


@pytest.mark.slow
def test_onboarding_statistics_and_support_match_one_process(tmp_path, ray_cluster):
    from relrep_hf import AnchorSet, RelativeProjector
    from relrep_hf.migration.ray_onboarding import (
        onboard_dataset,
        onboarding_from_dataset,
        support_keys,
    )

    paths, vectors = _corpus(tmp_path / "corpus")
    support_rows = [71, 3, 40, 12, 88, 30]  # across the three shards, not in order
    anchor_set = AnchorSet.random([f"row {i}" for i in support_rows], num_anchors=4, seed=0)
    key_column, keys = support_keys(anchor_set)
    ds = ray_cluster.data.read_parquet([str(p) for p in paths], override_num_blocks=3)
    support, stats = onboarding_from_dataset(ds, keys, key_column=key_column)
    # the one-process result: every row's statistics, the support rows in the anchor set's order
    reference = Statistics.from_embeddings(torch.from_numpy(vectors).double())
    assert stats.count == reference.count == 90
    for ours, want in ((stats.mean, reference.mean), (stats.scatter, reference.scatter)):
        assert float((ours - want).abs().max() / want.abs().max()) < 1e-9
    assert torch.equal(support, torch.from_numpy(vectors[support_rows]).double())

    projector = onboard_dataset(anchor_set, ds)
    local = RelativeProjector.from_anchor_set(
        anchor_set, torch.from_numpy(vectors[support_rows]), reference
    )
    rows = torch.from_numpy(vectors[:20])
    with torch.no_grad():
        ours, want = projector(rows), local(rows)
    assert float((ours - want).abs().max() / want.abs().max()) < 1e-5  # float32 buffers

    some = {f"row {i}" for i in range(0, 90, 2)}  # statistics of half the rows
    _, half = onboarding_from_dataset(ds, keys, statistics_keys=some)
    even = Statistics.from_embeddings(torch.from_numpy(vectors[::2]).double())
    assert half.count == 45
    assert float((half.scatter - even.scatter).abs().max() / even.scatter.abs().max()) < 1e-9

    with pytest.raises(ValueError, match=r"lacks 1 of the anchor set's 7 support inputs") as e:
        onboarding_from_dataset(ds, [*keys, "not in the corpus"])
    _documented(e.value, tmp_path)
    with pytest.raises(VectorStoreError, match="no key column 'doc_id'") as e:
        onboarding_from_dataset(ds, keys, key_column="doc_id")
    _documented(e.value, tmp_path)


@pytest.mark.slow
def test_onboarding_from_texts_embeds_them_on_ray(tmp_path, ray_cluster):
    from relrep_hf.encoding.encoder_kinds import EmbedRequest, embed_encoders, parse_encoder
    from relrep_hf.migration.ray_onboarding import onboarding_from_dataset

    spec = _tiny_bert(tmp_path / "bert")
    texts = [" ".join(["row", str(i)] + ["a b c d"[: 1 + i % 7]] * (i % 5)) for i in range(48)]
    ds = ray_cluster.data.from_arrow(
        [pa.table({"id": np.arange(24) + s, "text": texts[s : s + 24]}) for s in (0, 24)]
    )
    keys = [5, 30, 17]
    # one actor (its start imports torch and transformers and loads the model: about 10
    # CPU-s); two actors: test_a_ray_dataset_is_reembedded_as_one_process_embeds_it
    support, stats = onboarding_from_dataset(
        ds, keys, key_column="id", encoder=spec, batch_size=16, concurrency=1
    )
    request = EmbedRequest(datasets.Dataset.from_dict({"text": texts}), tmp_path / "cache")
    (reference,) = embed_encoders([parse_encoder(spec)[0]], ["text"], request)
    embeddings = torch.tensor(np.array(reference.dataset["embedding"]), dtype=torch.float64)
    np.testing.assert_allclose(support.numpy(), embeddings[keys].numpy(), rtol=0, atol=1e-6)
    want = Statistics.from_embeddings(embeddings)
    assert stats.count == 48
    np.testing.assert_allclose(stats.mean.numpy(), want.mean.numpy(), rtol=0, atol=1e-6)


@pytest.mark.slow
def test_a_run_is_onboarded_from_shards_as_the_local_engine_onboards_it(tmp_path, ray_cluster):
    from relrep_hf import RelativeProjector
    from relrep_hf.pipeline.run_folder import run_dataset

    rows, generator = 80, np.random.default_rng(0)
    for name, dim in (("a", 8), ("b", 6), ("new", 7)):
        np.save(tmp_path / f"{name}.npy", generator.standard_normal((rows, dim)))
    run = tmp_path / "run"
    argv = ["--quiet", "embed", str(run), "--limit", str(rows), "--test-size", "20"]
    assert main([*argv, "--embeddings", f"a={tmp_path / 'a.npy'}",
                 "--embeddings", f"b={tmp_path / 'b.npy'}"]) == 0  # fmt: skip
    assert main(["--quiet", "fit", str(run), "--method", "random", "--num-anchors", "5",
                 "--support-size", "12", "--held-out", "b"]) == 0  # fmt: skip
    record = json.loads((run / "run.json").read_text())
    texts = run_dataset(record)[record["dataset"]["column"]]
    train = record["train_rows"]
    assert len({texts[i] for i in train}) == len(train)  # the support is found by its text
    new = np.load(tmp_path / "new.npy").astype(np.float32)
    shards = tmp_path / "shards"
    shards.mkdir()
    for i, part in enumerate(np.array_split(np.array(train), 3)):
        column = pa.FixedSizeListArray.from_arrays(pa.array(new[part].reshape(-1)), 7)
        table = pa.table({"text": [texts[j] for j in part], "embedding": column})
        pq.write_table(table, shards / f"part-{i}.parquet")
    spec = f"new={tmp_path / 'new.npy'}"
    out = tmp_path / "new-projector"
    assert main(["--quiet", "onboard", str(run), "--encoder", spec, "--engine", "ray",
                 "--shards", str(shards / "part-*.parquet"), "--out", str(out),
                 "--column", "embedding"]) == 0  # fmt: skip
    assert main(["--quiet", "onboard", str(run), "--encoder", spec]) == 0  # the local engine
    ours = RelativeProjector.from_pretrained(out)
    local = RelativeProjector.from_pretrained(run / "projectors" / "new")
    assert ours.config.encoder_kind == "precomputed"
    features = torch.from_numpy(new)
    with torch.no_grad():
        got, want = ours(features), local(features)
    assert float((got - want).abs().max() / want.abs().max()) < 1e-5


# ---------------------------------------------------------------------------------------------
# Lance datasets: one Ray task per fragment
# ---------------------------------------------------------------------------------------------


def _lance_table(tmp_path: Path, vectors: np.ndarray) -> Path:
    """A LanceDB database holding table 'docs' (3 fragments): its folder docs.lance."""
    lance = pytest.importorskip("lance")
    db = tmp_path / "db"
    db.mkdir()
    lance.write_dataset(_table(vectors, 0), str(db / "docs.lance"), max_rows_per_file=30)
    return db / "docs.lance"


@pytest.mark.slow
def test_a_lance_dataset_matches_the_single_process_path(tmp_path, ray_cluster, migration_map):
    import lance

    vectors = np.random.default_rng(5).standard_normal((80, D_OLD)).astype(np.float32)
    source = _lance_table(tmp_path, vectors)
    assert len(lance.dataset(str(source)).get_fragments()) == 3
    before = _tree_hashes(source)
    out = migrate_shards(migration_map, source, tmp_path / "new.lance", chunk_rows=7)
    assert _tree_hashes(source) == before  # the input was only read
    local = migrate_store(migration_map, source.parent, tmp_path / "local_db", table="docs")
    reference = lance.dataset(str(Path(local) / "docs.lance")).to_table().sort_by("id")
    ours = lance.dataset(str(out)).to_table().sort_by("id")
    _same_table(ours.select(reference.column_names), reference)
    assert not (tmp_path / ".new.lance.ray-shards").exists()
    # ray.data.read_lance gives a Ray dataset that migrate_dataset maps the same way
    from relrep_hf.migration.ray_engine import migrate_dataset

    ds = ray_cluster.data.read_lance(str(source))
    mapped = pa.concat_tables(ray_cluster.get(migrate_dataset(migration_map, ds).to_arrow_refs()))
    _same_table(mapped.sort_by("id").select(reference.column_names), reference)

    with pytest.raises(VectorStoreError, match="is the input dataset itself") as e:
        migrate_shards(migration_map, source, source, overwrite=True)
    _documented(e.value, tmp_path)


@pytest.mark.slow
def test_a_lance_run_that_stopped_resumes_by_fragment(tmp_path, ray_cluster, migration_map):
    vectors = np.random.default_rng(6).standard_normal((90, D_OLD)).astype(np.float32)
    vectors[75, 2] = np.inf  # in the third fragment
    source = _lance_table(tmp_path, vectors)
    before = _tree_hashes(source)
    out, work = tmp_path / "new.lance", tmp_path / ".new.lance.ray-shards"
    with pytest.raises(VectorStoreError, match=r"fragment 2: column 'embedding' holds NaN") as e:
        migrate_shards(migration_map, source, out)
    _documented(e.value, tmp_path)
    assert _tree_hashes(source) == before and not out.exists()
    done = sorted(p.name for p in (work / ".done").iterdir())
    assert done == ["0.json", "1.json"]  # the fragments that finished are kept
    kept = {p.name: p.stat().st_ino for p in (work / "dataset" / "data").iterdir()}
    with pytest.raises(VectorStoreError, match="Pass resume=True"):
        migrate_shards(migration_map, source, out)
    with pytest.raises(VectorStoreError, match="fragment 2"):  # only fragment 2 runs again
        migrate_shards(migration_map, source, out, resume=True)
    again = {p.name: p.stat().st_ino for p in (work / "dataset" / "data").iterdir()}
    assert {name: again[name] for name in kept} == kept and len(again) == len(kept)

    (tmp_path / "wide").mkdir()
    wide = _lance_table(tmp_path / "wide", np.ones((4, D_OLD + 1), np.float32))
    with pytest.raises(VectorStoreError, match="holds 9-d vectors, the map takes 8-d") as e:
        migrate_shards(migration_map, wide, tmp_path / "w.lance")
    _documented(e.value, tmp_path)
