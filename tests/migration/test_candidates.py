"""The migration map's candidates and their choice by cross-validated recall
(`relrep_hf.migration.candidates`), `relrep_hf.fit_migration`, and the map as an artifact:
saved as one safetensors file with a card, loaded back, pushed to and pulled from a Hub."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import relrep_hf
from relrep_hf.functional.least_squares import AffineMap
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.migration.candidates import CANDIDATES, fit_standardised_procrustes
from relrep_hf.migration.map import MIGRATION_MAP_FILE, MigrationMap
from relrep_hf.migration.selection import BLEND, select_migration_map
from relrep_hf.utils.file_checks import ArtifactFileError
from tests.fixtures.hub_server import LocalHub
from tests.fixtures.synthetic import migration_pair


def test_an_exact_affine_pair_is_recovered_and_scores_one():
    old, new, truth = migration_pair(200)
    selection = select_migration_map(old, new, candidates=("affine", "procrustes"))
    torch.testing.assert_close(selection.maps["affine"].weight, truth.weight)
    assert selection.cv_recall["affine"] == 1.0
    assert selection.chosen == "affine"  # a tie (retrieval is easy here): the first listed wins
    residual = (selection.maps["procrustes"](old) - new).norm() / new.norm()
    assert residual > 0.05  # a general affine map is not a scaled rotation


def test_a_good_prior_wins_where_the_pairs_alone_cannot_fit_the_map():
    # 20 rows of a 24-d space: least squares is underdetermined; the prior is the true map
    old, new, truth = migration_pair(20, noise=0.05)
    selection = select_migration_map(old, new, prior=truth, folds=4)
    assert set(selection.cv_recall) == {*CANDIDATES, BLEND}
    assert selection.chosen in ("anchors", "shrunk")
    test_old, test_new, _ = migration_pair(300, seed=1)
    test_new = test_old @ truth.weight + truth.bias

    def recall(name: str) -> float:
        return retrieval_metrics(selection.maps[name](test_old), test_new, ks=(1,))["recall@1"]

    assert recall(selection.chosen) > recall("affine") + 0.1
    # shrunk toward a useless prior (zero map) chooses a penalty as ridge would, not infinity
    useless = AffineMap(torch.zeros_like(truth.weight), torch.zeros_like(truth.bias))
    old, new, _ = migration_pair(400, noise=0.05)
    selection = select_migration_map(old, new, prior=useless)
    assert selection.cv_recall["shrunk"] > selection.cv_recall["anchors"] + 0.5


def test_ridge_and_shrunk_share_one_decomposition_per_fold_and_fit_the_same_maps(monkeypatch):
    """`shared_solves`: the candidates fitted on one fold's rows decompose its Gram matrix once
    (ridge, shrunk and low_rank each did), and the maps are bit for bit those fitted alone."""
    from relrep_hf.migration import candidates as module

    old, new, truth = migration_pair(60, noise=0.1)
    priors = {"prior": truth}
    alone = [module._ridge(old, new, None), module._shrunk(old, new, priors)]
    calls = []
    eigh = torch.linalg.eigh
    monkeypatch.setattr(torch.linalg, "eigh", lambda m: calls.append(m.shape) or eigh(m))
    with module.shared_solves():
        shared = [module._ridge(old, new, None), module._shrunk(old, new, priors)]
        module._low_rank(old, new, None)
        assert len(calls) == 1  # one decomposition for the three candidates
        other = old.clone()  # other rows (equal values, another tensor): decomposed again
        module._ridge(other, new, None)
        assert len(calls) == 2
        other.mul_(2.0)  # rows changed in place are decomposed again, not read from the cache
        doubled = module._ridge(other, new, None)
        assert len(calls) == 3
    for one, two in zip(alone, shared, strict=True):
        assert [s for s, _ in one] == [s for s, _ in two]
        for (_, a), (_, b) in zip(one, two, strict=True):
            assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    # the doubled rows' ridge map is the halved map of the rows (the penalty scales with them)
    torch.testing.assert_close(doubled[3][1].weight * 2, alone[0][3][1].weight)
    module._ridge(old, new, None)  # outside the block nothing is kept: decomposed again
    assert len(calls) == 4
    calls.clear()
    select_migration_map(old, new, prior=truth, folds=4, candidates=("ridge", "shrunk"))
    assert len(calls) == 4 + 1  # one per fold, one for the fit on all rows


def test_standardised_procrustes_recovers_a_rotation_between_rescaled_coordinates():
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(300, 12, generator=generator, dtype=torch.float64)
    # whitened rows (identity sample covariance), so both spaces standardise exactly
    white = torch.linalg.qr(rows - rows.mean(dim=0)).Q * 299**0.5  # [300, 12]
    rotation = torch.linalg.qr(torch.randn(12, 12, generator=generator, dtype=torch.float64)).Q
    scale_old = torch.linspace(0.5, 4.0, 12, dtype=torch.float64)
    scale_new = torch.linspace(3.0, 0.2, 12, dtype=torch.float64)
    old, new = white * scale_old + 1.0, (white @ rotation) * scale_new - 2.0
    fitted = fit_standardised_procrustes(old, new)
    torch.testing.assert_close(fitted(old), new, atol=1e-8, rtol=1e-8)
    # plain Procrustes cannot undo the per-coordinate scales
    from relrep_hf.functional.least_squares import fit_procrustes

    assert (fit_procrustes(old, new)(old) - new).norm() > 0.1 * new.norm()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"candidates": ("affine", "magic")}, "Unknown migration candidate 'magic'. Registered"),
        ({"candidates": ()}, "candidates is empty"),
        ({"candidates": ("shrunk",)}, r"candidates \['shrunk'\] need the anchor path"),
        ({"folds": 1}, "folds must be an int"),
        ({"criterion": "mrr"}, "Invalid criterion 'mrr'. Valid: recall, retention, both"),
        (
            {"prior": AffineMap(torch.zeros(3, 16), torch.zeros(16))},
            "prior map .prior. must be an AffineMap of 24 -> 16 dimensions .the rows'., got "
            "'3 -> 16'",
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    old, new, _ = migration_pair(30)
    with pytest.raises(ValueError, match=match):
        select_migration_map(old, new, **kwargs)
    with pytest.raises(ValueError, match="paired rows"):
        select_migration_map(old, new[:-1])


def test_fit_migration_returns_a_map_in_the_rows_dtype_with_every_score(tmp_path):
    old, new, _ = migration_pair(120, noise=0.1)
    migration_map = relrep_hf.fit_migration(old.float().numpy(), new.float().numpy())
    assert isinstance(migration_map, MigrationMap) and migration_map.weight.dtype == torch.float32
    info = migration_map.info
    assert info["rows"] == 120 and info["chosen"] in info["cv_recall"]
    assert (
        set(info["cv_recall"])
        == set(info["cv_retention@10"])
        == {"affine", "ridge", "procrustes", BLEND}
    )
    mapped = migration_map.apply(old.float().numpy())
    assert mapped.dtype == np.float32 and mapped.shape == (120, 16)
    torch.testing.assert_close(torch.from_numpy(mapped), migration_map(old.float()))
    with pytest.raises(ValueError, match="source must be the old encoder's RelativeProjector"):
        relrep_hf.fit_migration(old, new, source=object())


def test_the_map_round_trips_as_one_small_file_and_a_card(tmp_path):
    old, new, _ = migration_pair(120, noise=0.1)
    migration_map = relrep_hf.fit_migration(
        old.float(), new.float(), source_name="minilm", target_name="e5"
    )
    migration_map.save_pretrained(tmp_path / "map")
    assert sorted(p.name for p in (tmp_path / "map").iterdir()) == [
        "README.md",
        "manifest.json",
        MIGRATION_MAP_FILE,
    ]
    loaded = MigrationMap.from_pretrained(tmp_path / "map")
    torch.testing.assert_close(loaded.weight, migration_map.weight, rtol=0, atol=0)
    assert loaded.info == json.loads(json.dumps(migration_map.info))
    card = (tmp_path / "map" / "README.md").read_text()
    assert "minilm -> e5" in card and f"**{migration_map.info['chosen']}**" in card
    assert "library_name: relrep_hf" in card


def test_a_file_that_is_not_a_map_is_refused_by_name(tmp_path):
    from safetensors.torch import save_file

    (tmp_path / "map").mkdir()
    save_file({"weights": torch.zeros(2, 2)}, str(tmp_path / "map" / MIGRATION_MAP_FILE))
    with pytest.raises(ArtifactFileError, match=r"migration_map\.safetensors.*not a migration"):
        MigrationMap.from_pretrained(tmp_path / "map")
    (tmp_path / "map" / MIGRATION_MAP_FILE).write_bytes(b"\x10\x00")
    with pytest.raises(ArtifactFileError, match="not a valid safetensors file"):
        MigrationMap.from_pretrained(tmp_path / "map")
    with pytest.raises(ValueError, match="NaN"):
        MigrationMap(torch.full((2, 2), float("nan")), torch.zeros(2))


@pytest.mark.slow  # 6.5 CPU s more than an empty test, measured
def test_the_map_is_pushed_to_and_loaded_from_a_hub(tmp_path, monkeypatch):
    """Saved, loaded, pushed and pulled into an empty cache, in this process pointed at the local
    Hub (`point_at`: a client interpreter only cost an import of torch and relrep_hf)."""
    from tests.fixtures.hub_encoders import point_at

    old, new, _ = migration_pair(120, noise=0.1)
    migration_map = relrep_hf.fit_migration(old.float(), new.float(), source_name="a")
    migration_map.save_pretrained(tmp_path / "map")
    old = old.float().numpy()
    with LocalHub() as hub:
        point_at(monkeypatch, hub, cache=tmp_path / "cache")
        local = relrep_hf.MigrationMap.from_pretrained(tmp_path / "map")
        local.push_to_hub("tester/a-to-b", token=hub.token)
        pulled = relrep_hf.MigrationMap.from_pretrained("tester/a-to-b", token=hub.token)
        assert pulled.info == local.info, (pulled.info, local.info)
        assert np.array_equal(pulled.apply(old), local.apply(old))
        assert "README.md" in hub.server.repo("tester/a-to-b").resolve("main").files
    # downloaded from the server into the empty cache, not read from the saved folder
    assert list(
        (tmp_path / "cache").glob(f"models--tester--a-to-b/snapshots/*/{MIGRATION_MAP_FILE}")
    )


def test_a_candidate_is_registered_and_unregistered_by_name():
    from relrep_hf import (
        MigrationCandidate,
        register_migration_candidate,
        unregister_migration_candidate,
    )
    from relrep_hf.functional.least_squares import fit_affine
    from relrep_hf.migration.candidates import MIGRATION_CANDIDATES

    toy = MigrationCandidate("toy", lambda old, new, _: [({}, fit_affine(old, new))], default=False)
    register_migration_candidate(toy)
    try:
        assert MIGRATION_CANDIDATES["toy"] is toy
        with pytest.raises(ValueError, match="'toy' is registered already"):
            register_migration_candidate(toy)
    finally:
        assert unregister_migration_candidate("toy") is toy
    assert "toy" not in MIGRATION_CANDIDATES
    with pytest.raises(ValueError, match="Unknown migration candidate 'toy'. Registered: 'affine'"):
        unregister_migration_candidate("toy")
