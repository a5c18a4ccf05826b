"""`relrep_hf.fit_migration` and the choice it makes (`relrep_hf.migration.selection`): the
candidates' registry (a toy candidate chosen when it wins), the device the fit runs on, the
criterion, the held-out report's recommendation and the errors of bad arguments."""

from __future__ import annotations

import pytest
import torch

import relrep_hf
from relrep_hf.functional.least_squares import AffineMap
from relrep_hf.migration.candidates import (
    MIGRATION_CANDIDATES,
    MigrationCandidate,
    default_candidates,
    register_migration_candidate,
)
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.report import RECALL_FLOOR, RETENTION_FLOOR, migration_report, recommend
from relrep_hf.migration.selection import BLEND, select_migration_map
from tests.fixtures.synthetic import migration_pair


@pytest.fixture
def oracle():
    """A toy candidate that knows the true map of `migration_pair(20)`: registered for the test."""
    _, _, truth = migration_pair(20)

    def fit(old, new, priors):
        return [({}, AffineMap(truth.weight.to(old.device), truth.bias.to(old.device)))]

    register_migration_candidate(MigrationCandidate("oracle", fit, help="the true map"))
    try:
        yield truth
    finally:
        MIGRATION_CANDIDATES.unregister("oracle")


def test_a_registered_candidate_is_fitted_and_chosen_when_it_wins(oracle):
    # 20 rows of a 24-d space with noise: the pairwise maps cannot recover the map
    old, new, _ = migration_pair(20, noise=0.3)
    assert default_candidates()[-1] == "oracle"
    migration_map = relrep_hf.fit_migration(old, new, folds=4)
    assert migration_map.info["chosen"] == "oracle"
    assert set(migration_map.info["cv_recall"]) == {
        "affine",
        "ridge",
        "procrustes",
        "oracle",
        BLEND,
    }
    torch.testing.assert_close(migration_map.weight, oracle.weight)
    with pytest.raises(ValueError, match="migration candidate 'oracle' is registered already"):
        register_migration_candidate(MigrationCandidate("oracle", lambda *a: []))


def test_low_rank_is_measured_only_when_named_and_recovers_a_low_rank_map():
    generator = torch.Generator().manual_seed(3)
    old = torch.randn(400, 24, generator=generator, dtype=torch.float64)
    # a rank-4 map into 16-d: reduced-rank regression keeps its directions, drops the noise
    weight = torch.randn(24, 4, generator=generator, dtype=torch.float64)
    weight = weight @ torch.randn(4, 16, generator=generator, dtype=torch.float64)
    new = old @ weight + 0.5 * torch.randn(400, 16, generator=generator, dtype=torch.float64)
    assert "low_rank" not in default_candidates()
    selection = select_migration_map(old, new, candidates=("affine", "low_rank"))
    assert selection.settings["low_rank"]["rank"] == 8  # 8 is the smallest rank of the grid
    assert torch.linalg.matrix_rank(selection.maps["low_rank"].weight) == 8


@pytest.mark.parametrize("criterion", ["recall", "retention", "both"])
def test_the_criterion_decides_the_choice(criterion):
    old, new, _ = migration_pair(200, noise=2.0)
    selection = select_migration_map(old, new, criterion=criterion, folds=4)
    scores = {
        "recall": selection.cv_recall,
        "retention": selection.cv_retention,
        "both": {
            c: (selection.cv_recall[c] + selection.cv_retention[c]) / 2 for c in selection.maps
        },
    }[criterion]
    assert scores[selection.chosen] == max(scores.values())
    assert all(0.0 <= v <= 1.0 for v in selection.cv_retention.values())
    assert selection.criterion == criterion


def test_the_fit_runs_on_the_rows_device(device):
    old, new, truth = migration_pair(60, noise=0.05)
    old, new = old.float().to(device), new.float().to(device)
    prior = AffineMap(truth.weight.float(), truth.bias.float())  # on the CPU: moved to the rows'
    migration_map = relrep_hf.fit_migration(old, new, prior=prior, folds=3)
    assert migration_map.weight.device.type == device.type
    assert migration_map.weight.dtype == torch.float32
    assert set(migration_map.info["cv_recall"]) == {
        BLEND,
        "affine",
        "ridge",
        "procrustes",
        "anchors",
        "shrunk",
    }
    selection = select_migration_map(old, new, prior=lambda rows: prior, folds=3)
    assert all(m.weight.device.type == device.type for m in selection.maps.values())
    assert migration_map(old).device.type == device.type


def test_the_report_recommends_by_the_floors():
    # new = old rotated: cosine geometry is kept, so migrate and bridge are both exact
    generator = torch.Generator().manual_seed(0)
    old = torch.randn(300, 16, generator=generator, dtype=torch.float64)
    rotation = torch.linalg.qr(torch.randn(16, 16, generator=generator, dtype=torch.float64)).Q
    new, zero = old @ rotation, torch.zeros(16, dtype=torch.float64)
    truth, bridge = AffineMap(rotation, zero), AffineMap(rotation.T, zero)
    queries = new + 0.01 * torch.randn(300, 16, generator=generator, dtype=torch.float64)
    wrong = AffineMap(torch.zeros(16, 16, dtype=torch.float64), torch.ones(16).double())
    report = migration_report(old, new, queries, {"truth": truth, "wrong": wrong}, "truth", bridge)
    assert report["truth"]["retention@10"] == pytest.approx(1.0)
    assert report["wrong"]["retention@10"] < 0.2 and report["wrong"]["fraction"] < 0.1
    assert report["migrate"]["candidate"] == "truth"
    # migrate and bridge both exact (a tie): migrate, the store joins the new encoder's space
    assert report["recommendation"]["action"] == "migrate"
    report = migration_report(old, new, queries, {"wrong": wrong}, "wrong", bridge)
    assert report["recommendation"]["action"] == "bridge"
    report = migration_report(old, new, queries, {"wrong": wrong}, "wrong")
    advice = report["recommendation"]
    assert advice["action"] == "re-embed" and "retention@10 >= 0.9" in advice["reason"]
    # just under a floor is re-embed; at the floors, migrate
    at = {"migrate": {"retention@10": RETENTION_FLOOR, "fraction": RECALL_FLOOR}}
    assert recommend(at)["action"] == "migrate"
    under = {"migrate": {"retention@10": RETENTION_FLOOR - 1e-3, "fraction": 1.0}}
    assert recommend(under)["action"] == "re-embed"


def test_projectors_that_are_not_projectors_are_named():
    old, new, truth = migration_pair(40)
    target = MigrationMap(truth.weight, truth.bias)
    with pytest.raises(
        ValueError, match="target must be the new encoder's RelativeProjector.*prior="
    ):
        relrep_hf.fit_migration(old, new, source=None, target=target)
    with pytest.raises(ValueError, match=r"candidates \['anchors'\] need the anchor path"):
        relrep_hf.fit_migration(old, new, candidates=("anchors",))


def test_a_blend_of_two_candidates_that_err_apart_is_chosen():
    """Two toy candidates, the true map plus and minus one perturbation: their even blend is the
    true map, scored from their out-of-fold predictions, chosen, and refitted as that blend."""
    old, new, truth = migration_pair(200, seed=4)
    push = 0.5 * torch.randn(truth.weight.shape, generator=torch.Generator().manual_seed(5))

    def toy(sign: float):
        def fit(o, n, priors):
            weight = truth.weight.to(o.device) + sign * push.double().to(o.device)
            return [({}, AffineMap(weight, truth.bias.to(o.device)))]

        return fit

    for name, sign in (("plus", 1.0), ("minus", -1.0)):
        register_migration_candidate(MigrationCandidate(name, toy(sign), default=False))
    try:
        selection = select_migration_map(old, new, folds=4, candidates=("plus", "minus"))
    finally:
        MIGRATION_CANDIDATES.unregister("plus")
        MIGRATION_CANDIDATES.unregister("minus")
    assert selection.chosen == BLEND
    assert selection.settings[BLEND] == {"of": ["plus", "minus"], "weight": 0.5}
    assert selection.cv_recall[BLEND] > max(
        selection.cv_recall["plus"], selection.cv_recall["minus"]
    )
    torch.testing.assert_close(selection.map.weight, truth.weight)
