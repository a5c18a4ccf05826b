"""The quality gate (issue #46, item 5): the held-out report recommends nothing from too few rows
and gives 95% intervals (Wilson, bootstrap; checked against hand-computed values), it measures
the direction it is asked for, and a map whose own report says re-embed is refused by
``migrate_store``, ``relrep-hf migrate`` and ``relrep-hf bridge --map`` unless forced."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from relrep_hf import MigrationMap, migrate_store
from relrep_hf.cli import main
from relrep_hf.functional.least_squares import AffineMap
from relrep_hf.functional.retention import bootstrap_interval, wilson_interval
from relrep_hf.migration.report import (
    MIN_HELD_OUT_ROWS,
    MigrationQualityError,
    migration_report,
)


def rotated(rows: int):
    """Old rows, the same rows rotated (the new space), near-copies as queries, and the maps."""
    generator = torch.Generator().manual_seed(0)
    old = torch.randn(rows, 16, generator=generator, dtype=torch.float64)
    rotation = torch.linalg.qr(torch.randn(16, 16, generator=generator, dtype=torch.float64)).Q
    new, zero = old @ rotation, torch.zeros(16, dtype=torch.float64)
    queries = new + 0.01 * torch.randn(rows, 16, generator=generator, dtype=torch.float64)
    wrong = AffineMap(torch.zeros(16, 16, dtype=torch.float64), torch.ones(16).double())
    return old, new, queries, AffineMap(rotation, zero), AffineMap(rotation.T, zero), wrong


def test_wilson_and_bootstrap_intervals_by_hand():
    # 3 of 3, z = 1.959964: centre (1 + z^2/6) / (1 + z^2/3) = 1.640243 / 2.280486 = 0.719251,
    # half-width z sqrt(z^2/36) / (1 + z^2/3) = 0.640242 / 2.280486 = 0.280748: [0.438503, 1]
    low, high = wilson_interval(3, 3)
    assert low == pytest.approx(0.438503, abs=1e-6) and high == 1.0
    assert wilson_interval(0, 10)[0] == 0.0
    # 45 of 50: p = 0.9; centre (0.9 + 0.0384146) / 1.0768292 = 0.871461; half-width
    # z sqrt(0.0018 + 0.000384146) / 1.0768292 = 0.0915985 / 1.0768292 = 0.085063:
    # [0.786398, 0.956524]
    assert wilson_interval(45, 50) == pytest.approx((0.786398, 0.956524), abs=1e-6)
    assert bootstrap_interval(torch.full((20,), 0.7)) == pytest.approx((0.7, 0.7))
    values = torch.tensor([0.0, 1.0] * 50)
    low, high = bootstrap_interval(values)
    assert low < 0.5 < high and high - low == pytest.approx(0.2, abs=0.05)  # 2 x 1.96 x 0.05
    with pytest.raises(ValueError, match="successes <= n"):
        wilson_interval(4, 3)


def test_three_held_out_rows_recommend_nothing():
    old, new, queries, truth, bridge, _ = rotated(3)
    report = migration_report(old, new, queries, {"truth": truth}, "truth", bridge)
    assert report["migrate"]["retention@10"] == pytest.approx(1.0)  # what the old report took
    advice = report["recommendation"]
    assert advice["action"] == "undecided"
    assert f"only 3 held-out rows, fewer than the {MIN_HELD_OUT_ROWS}" in advice["reason"]
    assert report["migrate"]["intervals"]["recall@1"][0] < 0.5  # 3 of 3: [0.44, 1]


def test_enough_rows_recommend_with_intervals_around_the_measures():
    old, new, queries, truth, bridge, wrong = rotated(MIN_HELD_OUT_ROWS)
    report = migration_report(old, new, queries, {"truth": truth, "wrong": wrong}, "truth", bridge)
    assert report["recommendation"]["action"] == "migrate"
    for search in ("migrate", "bridge", "wrong"):
        for metric in ("recall@1", "retention@10"):
            low, high = report[search]["intervals"][metric]
            assert low <= report[search][metric] <= high
    assert report["wrong"]["intervals"]["retention@10"][1] < 0.3


def test_the_queries_direction_measures_mapped_old_vectors_searching_the_new_store():
    old, new, _, truth, bridge, wrong = rotated(MIN_HELD_OUT_ROWS)
    maps = {"truth": truth, "wrong": wrong}
    report = migration_report(old, new, new, maps, "truth", bridge, direction="queries")
    assert report["direction"] == "queries" and "bridge" not in report
    assert report["truth"]["recall@1"] == 1.0 and report["truth"]["retention@10"] == 1.0
    assert report["recommendation"]["action"] == "migrate"
    report = migration_report(old, new, new, maps, "wrong", direction="queries")
    assert report["recommendation"]["action"] == "re-embed"
    with pytest.raises(ValueError, match="Invalid direction 'sideways'"):
        migration_report(old, new, new, maps, "truth", direction="sideways")


def reembed_map(folder) -> MigrationMap:
    advice = {"action": "re-embed", "reason": "no map keeps enough (retention@10 0.512)"}
    migration_map = MigrationMap(torch.eye(4), torch.zeros(4), {"recommendation": advice})
    migration_map.save_pretrained(folder)
    return migration_map


def test_a_map_whose_report_says_reembed_is_refused_unless_forced(tmp_path, capsys):
    reembed_map(tmp_path / "map")
    vectors = tmp_path / "old.npy"
    np.save(vectors, np.ones((5, 4), np.float32))
    with pytest.raises(MigrationQualityError, match=r"recommends re-embedding \(no map keeps"):
        migrate_store(tmp_path / "map", vectors, tmp_path / "new.npy", show_progress=False)
    assert not (tmp_path / "new.npy").exists()
    args = ["migrate", str(tmp_path / "map"), "--vectors", str(vectors), "--out"]
    assert main([*args, str(tmp_path / "cli.npy")]) == 2
    assert "recommends re-embedding" in capsys.readouterr().err
    assert not (tmp_path / "cli.npy").exists()
    assert main([*args, str(tmp_path / "cli.npy"), "--force"]) == 0
    assert np.load(tmp_path / "cli.npy").shape == (5, 4)


def undecided_map(folder, rows: int = 12) -> MigrationMap:
    """The true map of `rotated` with the report measured on ``rows`` held-out rows recorded, as
    ``fit-migration --save-map`` records it: too few rows, so the report recommends nothing."""
    old, new, queries, truth, bridge, _ = rotated(rows)
    report = migration_report(old, new, queries, {"truth": truth}, "truth", bridge)
    info = {"held_out": {"rows": report["rows"]}, "recommendation": report["recommendation"]}
    migration_map = MigrationMap(truth.weight.float(), truth.bias.float(), info)
    migration_map.save_pretrained(folder)
    return migration_map


def test_a_map_whose_report_recommends_nothing_is_refused_unless_forced(tmp_path, capsys):
    migration_map = undecided_map(tmp_path / "map")
    assert migration_map.info["recommendation"]["action"] == "undecided"
    vectors = tmp_path / "old.npy"
    np.save(vectors, np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32))
    before = vectors.read_bytes()
    expected = rf"measured on 12 held-out rows, fewer than the {MIN_HELD_OUT_ROWS} a recommendation"
    with pytest.raises(MigrationQualityError, match=expected):
        migrate_store(tmp_path / "map", vectors, tmp_path / "new.npy", show_progress=False)
    assert not (tmp_path / "new.npy").exists()
    args = ["migrate", str(tmp_path / "map"), "--vectors", str(vectors), "--out"]
    assert main([*args, str(tmp_path / "cli.npy")]) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "the migration was refused and nothing was written" in error
    assert f"--test-size {MIN_HELD_OUT_ROWS}" in error and "--force" in error
    assert not (tmp_path / "cli.npy").exists() and sorted(os.listdir(tmp_path)) == [
        "map",
        "old.npy",
    ]
    assert main([*args, str(tmp_path / "cli.npy"), "--force"]) == 0
    np.testing.assert_allclose(
        np.load(tmp_path / "cli.npy"), migration_map.apply(np.load(vectors)), atol=1e-6
    )
    assert vectors.read_bytes() == before


@pytest.mark.slow  # the bridge command imports sentence-transformers
def test_bridge_refuses_a_map_that_recommends_nothing(tmp_path, capsys):
    undecided_map(tmp_path / "map")
    argv = ["bridge", "--map", str(tmp_path / "map"), "--model", str(tmp_path / "no-model"),
            "--out", str(tmp_path / "bridged")]  # fmt: skip
    assert main(argv) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "measured on 12 held-out rows" in error and "the bridge was refused" in error
    assert not (tmp_path / "bridged").exists()


@pytest.mark.slow  # the bridge command imports sentence-transformers
def test_bridge_refuses_such_a_map_before_loading_the_model(tmp_path, capsys):
    reembed_map(tmp_path / "map")
    argv = ["bridge", "--map", str(tmp_path / "map"), "--model", str(tmp_path / "no-model"),
            "--out", str(tmp_path / "bridged")]  # fmt: skip
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "the bridge was refused" in error and "--force" in error
    assert not (tmp_path / "bridged").exists()
