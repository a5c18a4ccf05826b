"""Anchor kinds beyond the paper: full support and the shared linear compression (closed form),
the similarity settings an anchor set carries, and its content fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from relrep_hf import AnchorSet, ParamTrainer, ParamTrainingArguments, RelativeProjector, Statistics
from relrep_hf.anchors.shared_linear.trainer import (
    SharedLinearTuningArguments,
    fine_tune_shared_linear,
)
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.functional.shared_linear import (
    feature_factor,
    full_support_features,
    normalize_features,
    shared_linear_map,
)
from relrep_hf.functional.statistics import whitening_matrix
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    check_head_matches_projector,
)
from relrep_hf.utils.defaults import SHRINKAGE_GRID
from tests.fixtures.hub_encoders import point_at
from tests.fixtures.hub_server import LocalHub
from tests.fixtures.synthetic import affine_spaces

REPO = Path(__file__).resolve().parents[2]
K = 60
SUPPORT = [f"input {i}" for i in range(K)]
SUPPORT_ROWS = torch.arange(K)


@pytest.fixture(scope="module")
def spaces():
    return affine_spaces(("e0", "e1", "e2", "e3"), n=800, d=12)


def fit(spaces, names=("e0", "e1", "e2"), num_anchors=8, **kwargs) -> AnchorSet:
    fit_embeddings = {n: spaces[n][:600] for n in names}
    return AnchorSet.shared_linear(
        SUPPORT, fit_embeddings, num_anchors, support_rows=SUPPORT_ROWS, **kwargs
    )


@pytest.mark.parametrize("shrinkage", [None, 0.0, 0.15])  # None: the default, from the data
def test_closed_form_is_the_top_eigenvectors_of_a_direct_decomposition(spaces, shrinkage):
    kwargs = {} if shrinkage is None else {"shrinkage": shrinkage}
    anchor_set = fit(spaces, num_anchors=8, **kwargs)
    selection = anchor_set.training["shrinkage_selection"]
    if shrinkage is None:  # chosen by cross-validation, recorded with every candidate's score
        assert selection["method"] == "cross-validation" and 3 <= len(selection["scores"]) <= len(
            SHRINKAGE_GRID
        )
        scores = {float(s): v for s, v in selection["scores"].items()}
        best = max(scores, key=lambda s: (scores[s], -s))  # ties: the least shrinkage
        assert anchor_set.shrinkage == selection["chosen"] == best
    else:
        assert anchor_set.shrinkage == shrinkage and selection["method"] == "fixed"
    lam = anchor_set.shrinkage
    direct = np.zeros((K, K))
    for name in ("e0", "e1", "e2"):  # the formula, written out in numpy float64
        x = spaces[name][:600].double().numpy()
        mu = x.mean(axis=0)
        cov = np.cov(x, rowvar=False)
        d = cov.shape[0]
        shrunk = (1 - lam) * cov + (lam * np.trace(cov) / d + 5e-8) * np.eye(d)
        values, vectors = np.linalg.eigh(shrunk)
        whitening = vectors @ np.diag(values**-0.5) @ vectors.T
        r = ((x - mu) @ whitening) @ ((x[:K] - mu) @ whitening).T
        direct += r.T @ r
    values, vectors = np.linalg.eigh(direct)
    top = vectors[:, ::-1][:, :8]
    u = anchor_set.mixture.double().numpy().T
    # the same subspace (projectors agree), and each column the same eigenvector up to sign
    np.testing.assert_allclose(u @ u.T, top @ top.T, atol=1e-5)
    np.testing.assert_allclose(np.abs(u.T @ top), np.eye(8), atol=1e-5)
    assert anchor_set.mixing == "linear" and anchor_set.strategy == "shared_linear"


def test_support_of_every_fit_row_is_maxvar_generalized_cca(spaces):
    """K = N with exact whitening: U spans the top eigenvectors of the sum of the encoders'
    projections onto their column spaces (MAXVAR), and a held-out encoder's projector is the
    least-squares fit of its rows to U (onboarding is a regression, no gradient step)."""
    rows = torch.arange(300)
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(300, 12, generator=generator, dtype=torch.float64)
    noisy = {  # shared signal plus each encoder's own noise: distinct canonical correlations
        f"e{i}": base @ torch.randn(12, 10 + i, generator=generator, dtype=torch.float64)
        + torch.randn(300, 10 + i, generator=generator, dtype=torch.float64)
        for i in range(4)
    }
    fit_embeddings = {n: noisy[n] for n in ("e0", "e1", "e2")}
    support = [f"input {i}" for i in range(300)]
    anchor_set = AnchorSet.shared_linear(
        support, fit_embeddings, 8, support_rows=rows, shrinkage=0.0, eps=0.0
    )
    total = np.zeros((300, 300))
    for x in fit_embeddings.values():
        centred = (x - x.mean(0)).double().numpy()
        total += centred @ np.linalg.pinv(centred)  # the projection onto its column space
    _, vectors = np.linalg.eigh(total)
    top = vectors[:, ::-1][:, :8]
    u = anchor_set.mixture.double().numpy().T
    np.testing.assert_allclose(u @ u.T, top @ top.T, atol=1e-5)
    x = noisy["e3"]
    projector = RelativeProjector.from_anchor_set(
        anchor_set, x, Statistics.from_embeddings(x), eps=0.0, dtype=torch.float64
    )
    centred = (x - x.mean(0)).numpy()
    least_squares = centred @ np.linalg.lstsq(centred, u, rcond=None)[0]
    # float32 mixture: the comparison is to 1e-5 of the features' scale
    scale = np.abs(least_squares).max() * 299
    # the covariance divides by N - 1
    np.testing.assert_allclose(projector(x).numpy(), 299 * least_squares, atol=1e-5 * scale)


def test_normalizations_change_the_fit_not_the_onboarding(spaces):
    # with exact whitening, affine copies of one space have equal features and nothing to
    # weigh: the paper's shrinkage makes them differ
    plain = fit(spaces, normalization="none", shrinkage=0.15)
    for normalization in ("encoder", "row"):
        other = fit(spaces, normalization=normalization, shrinkage=0.15)
        assert other.training["normalization"] == normalization
        assert other.fingerprint != plain.fingerprint
    with pytest.raises(ValueError, match="Invalid normalization 'l2'"):
        fit(spaces, normalization="l2")


def test_linear_projector_equals_features_then_u(spaces):
    anchor_set = fit(spaces, num_anchors=8)
    x = spaces["e3"]
    stats = Statistics.from_embeddings(x[:600])
    # float64 projectors: the comparison is of the algebra, not of float32 rounding
    projector = RelativeProjector.from_anchor_set(
        anchor_set, x[SUPPORT_ROWS], stats, dtype=torch.float64
    )
    assert projector.config.num_anchors == 8
    two_step = (
        full_support_features(x[600:], x[SUPPORT_ROWS], stats, shrinkage=anchor_set.shrinkage)
        @ anchor_set.mixture.T.double()
    )
    torch.testing.assert_close(projector(x[600:].double()), two_step, rtol=1e-5, atol=1e-5)
    # full support is the first step alone
    full = RelativeProjector.from_anchor_set(
        AnchorSet.full_support(SUPPORT), x[SUPPORT_ROWS], stats, dtype=torch.float64
    )
    torch.testing.assert_close(
        full(x[600:].double()), full_support_features(x[600:], x[SUPPORT_ROWS], stats),
        rtol=1e-5, atol=1e-5,
    )  # fmt: skip


def test_onboarding_a_held_out_encoder_needs_no_gradient_step(spaces):
    anchor_set = fit(spaces, names=("e0", "e1", "e2"), num_anchors=8)
    with torch.no_grad():  # any backward would raise: nothing here builds a graph
        projectors = {
            name: RelativeProjector.from_anchor_set(
                anchor_set, x[SUPPORT_ROWS], Statistics.from_embeddings(x[:600])
            )
            for name, x in spaces.items()
        }
    assert not any(p.requires_grad for p in projectors["e3"].parameters())
    relative = {name: projectors[name](x[600:]) for name, x in spaces.items()}
    assert not relative["e3"].requires_grad
    # the held-out encoder lines up with the training ones (chance is 1/200)
    assert retrieval_metrics(relative["e0"], relative["e3"])["recall@1"] > 0.5


def test_every_kind_records_its_mixing_and_round_trips(spaces, tmp_path):
    kinds = all_kinds(spaces)
    assert {k.mixing for k in kinds.values()} == {"stochastic", "one_hot", "identity", "linear"}
    for name, anchor_set in kinds.items():
        anchor_set.save_pretrained(tmp_path / name)
        loaded = AnchorSet.from_pretrained(tmp_path / name)
        assert torch.equal(loaded.mixture, anchor_set.mixture), name
        assert (loaded.mixing, loaded.strategy) == (anchor_set.mixing, anchor_set.strategy)
        assert loaded.similarity_settings == anchor_set.similarity_settings
        assert loaded.fingerprint == anchor_set.fingerprint, name
        recorded = json.loads((tmp_path / name / "anchor_set.json").read_text())
        assert recorded["fingerprint"] == anchor_set.fingerprint


def all_kinds(spaces) -> dict[str, AnchorSet]:
    support = [spaces[n][SUPPORT_ROWS] for n in ("e0", "e1")]
    mixture = torch.softmax(torch.randn(5, K, generator=torch.Generator().manual_seed(0)), dim=1)
    return {
        "param": AnchorSet(mixture, SUPPORT, shrinkage=0.4),
        "random": AnchorSet.random(SUPPORT, 5),
        "kmeans": AnchorSet.kmeans(SUPPORT, support, 5),
        "farthest_point": AnchorSet.farthest_point(SUPPORT, support, 5),
        "full_support": AnchorSet.full_support(SUPPORT, shrinkage=0.3),
        "shared_linear": fit(spaces, num_anchors=5),
    }


@pytest.mark.slow
def test_every_kind_round_trips_through_the_hub(spaces, tmp_path, monkeypatch):
    """Each kind saved, loaded, pushed and downloaded again into an empty cache, in this process
    pointed at the local Hub (a client interpreter only cost an import of torch and relrep_hf)."""
    kinds = all_kinds(spaces)
    for name, anchor_set in kinds.items():
        anchor_set.save_pretrained(tmp_path / "sets" / name)
    result = {}
    with LocalHub() as hub:
        point_at(monkeypatch, hub)
        for folder in sorted((tmp_path / "sets").iterdir()):
            local = AnchorSet.from_pretrained(folder)
            repo_id = f"tester/{folder.name.replace('_', '-')}"
            local.push_to_hub(repo_id, token=hub.token)
            pulled = AnchorSet.from_pretrained(repo_id, cache_dir=tmp_path / "cache")
            result[folder.name] = {"equal": bool((pulled.mixture == local.mixture).all()),
                                   "mixing": pulled.mixing, "fingerprint": pulled.fingerprint,
                                   "settings": pulled.similarity_settings,
                                   "repo_id": pulled.repo_id}  # fmt: skip
    assert len(list((tmp_path / "cache").glob("models--tester--*"))) == len(kinds)  # downloaded
    assert set(result) == set(kinds)
    for name, anchor_set in kinds.items():
        assert result[name]["equal"], name
        assert result[name]["mixing"] == anchor_set.mixing
        assert result[name]["fingerprint"] == anchor_set.fingerprint
        assert result[name]["settings"] == anchor_set.similarity_settings
        assert result[name]["repo_id"] == f"tester/{name.replace('_', '-')}"


def test_closed_form_bad_inputs(spaces):
    with pytest.raises(ValueError, match="at least 2 training encoders"):
        fit(spaces, names=("e0",))
    with pytest.raises(ValueError, match="support size K=60, got 0"):
        fit(spaces, num_anchors=0)
    rank_deficient = [torch.ones(10, 5, dtype=torch.float64), torch.ones(10, 5).double()]
    with pytest.raises(ValueError, match="rank 1 < num_anchors=2"):
        shared_linear_map(rank_deficient, 2)
    nan = {n: spaces[n][:600].clone() for n in ("e0", "e1")}
    nan["e1"][100, 3] = float("nan")
    with pytest.raises(ValueError, match="'e1' fit embeddings: NaN"):
        AnchorSet.shared_linear(SUPPORT, nan, 4, support_rows=SUPPORT_ROWS)
    with pytest.raises(ValueError, match="support_rows has 3 rows but there are 60"):
        AnchorSet.shared_linear(SUPPORT, nan, 4, support_rows=[0, 1, 2])
    anchor_set = fit(spaces)
    with pytest.raises(ValueError, match="pass the encoder's mean"):
        anchor_set.anchors(spaces["e0"][SUPPORT_ROWS])
    with pytest.raises(ValueError, match="cannot use it"):
        RelativeProjector.from_anchor_set(
            anchor_set, spaces["e0"][SUPPORT_ROWS], None, similarity="cosine"
        )
    with pytest.raises(ValueError, match="identity matrix"):
        AnchorSet(torch.eye(3) * 2, ["a", "b", "c"], mixing="identity")


# ---- issue 15, bug 1: the similarity settings the anchors were fitted with ------------------


def test_param_shrinkage_reaches_every_projector(spaces, tmp_path):
    args = ParamTrainingArguments(
        str(tmp_path / "run"), num_anchors=4, support_size=K, num_train_epochs=1,
        train_batch_size=256, save_strategy="no", disable_tqdm=True, shrinkage=0.6, eps=1e-6,
    )  # fmt: skip
    anchor_set = ParamTrainer(args, {n: spaces[n][:600] for n in ("e0", "e1")}).train()
    assert (anchor_set.shrinkage, anchor_set.eps) == (0.6, 1e-6)
    anchor_set.save_pretrained(tmp_path / "anchors")
    loaded = AnchorSet.from_pretrained(tmp_path / "anchors")
    x = spaces["e3"]
    stats = Statistics.from_embeddings(x[:600])
    projector = RelativeProjector.from_anchor_set(loaded, x[: loaded.support_size], stats)
    assert (projector.config.shrinkage, projector.config.eps) == (0.6, 1e-6)
    expected = whitening_matrix(stats, shrinkage=0.6, eps=1e-6).float()
    torch.testing.assert_close(projector.whitening, expected)
    # told otherwise, onboarding uses what it is told
    other = RelativeProjector.from_anchor_set(
        loaded, x[: loaded.support_size], stats, shrinkage=0.2
    )
    assert other.config.shrinkage == 0.2


def test_anchor_sets_saved_before_settings_were_recorded_read_them_from_training(tmp_path):
    AnchorSet.random(SUPPORT, 4).save_pretrained(tmp_path)
    description = json.loads((tmp_path / "anchor_set.json").read_text())
    for key in ("mixing", "similarity", "shrinkage", "eps", "fingerprint"):
        del description[key]
    description["training"]["shrinkage"] = 0.5
    (tmp_path / "anchor_set.json").write_text(json.dumps(description))
    (tmp_path / "manifest.json").unlink()  # saved before manifests were written, too
    loaded = AnchorSet.from_pretrained(tmp_path)
    assert (loaded.mixing, loaded.shrinkage) == ("one_hot", 0.5)


# ---- issue 15, bug 3: a head checks the content of the anchor set, local ones too ----------


def test_fingerprint_tells_local_anchor_sets_apart(spaces):
    x = spaces["e0"]
    stats = Statistics.from_embeddings(x[:600])
    a, b = AnchorSet.random(SUPPORT, 6, seed=0), AnchorSet.random(SUPPORT, 6, seed=1)
    assert a.fingerprint == AnchorSet.random(SUPPORT, 6, seed=0).fingerprint
    assert a.fingerprint != b.fingerprint
    assert (
        a.fingerprint
        != AnchorSet.random(SUPPORT, 6, seed=0)
        .__class__(a.mixture, SUPPORT, strategy="random", shrinkage=0.3)
        .fingerprint
    )
    assert a.fingerprint != AnchorSet(a.mixture, [s + "!" for s in SUPPORT]).fingerprint
    projector_a = RelativeProjector.from_anchor_set(a, x[SUPPORT_ROWS], stats)
    projector_b = RelativeProjector.from_anchor_set(b, x[SUPPORT_ROWS], stats)
    assert projector_a.config.anchor_set_id == ""  # local: nothing else tells them apart
    head = RelativeHeadForClassification.for_projector(projector_a, num_labels=2)
    assert head.config.anchor_set_fingerprint == a.fingerprint
    check_head_matches_projector(head.config, projector_a.config)
    with pytest.raises(ValueError, match="features still mean different things"):
        check_head_matches_projector(head.config, projector_b.config)


@pytest.mark.parametrize("normalization", ["none", "encoder"])
@pytest.mark.parametrize("own_statistics", [True, False])
def test_feature_factor_is_a_square_root_of_the_features_gram(
    spaces, normalization, own_statistics
):
    x = spaces["e1"][:600]
    stats = Statistics.from_embeddings(x if own_statistics else spaces["e1"][200:])
    r = normalize_features(
        full_support_features(x, x[SUPPORT_ROWS], stats, shrinkage=0.0), normalization
    )
    factor = feature_factor(x, x[SUPPORT_ROWS], stats, shrinkage=0.0, normalization=normalization)
    assert factor.shape == (K, 12)
    gram = r.T @ r
    torch.testing.assert_close(factor @ factor.T, gram, rtol=1e-8, atol=1e-8 * gram.abs().max())
    with pytest.raises(ValueError, match="use shared_linear_map"):
        feature_factor(x, x[SUPPORT_ROWS], stats, normalization="row")


def test_fine_tuning_lowers_the_info_nce_and_keeps_the_kind(spaces):
    fit_embeddings = {n: spaces[n][:600] for n in ("e0", "e1", "e2")}
    closed = AnchorSet.shared_linear(SUPPORT, fit_embeddings, 8, support_rows=SUPPORT_ROWS)
    args = SharedLinearTuningArguments(num_train_epochs=4, train_batch_size=128)
    tuned = fine_tune_shared_linear(closed, fit_embeddings, support_rows=SUPPORT_ROWS, args=args)
    assert tuned.mixing == "linear" and tuned.mixture.shape == closed.mixture.shape
    assert not torch.equal(tuned.mixture, closed.mixture)
    assert tuned.fingerprint != closed.fingerprint
    loss = tuned.metrics["fine_tuning_loss"]
    assert loss["last"] < loss["first"]
    assert tuned.training["fine_tuning"]["epochs"] == 4
    x = spaces["e3"]  # a held-out encoder is onboarded as for any anchor set
    projector = RelativeProjector.from_anchor_set(tuned, x[SUPPORT_ROWS], x[:600])
    assert projector(x[600:]).shape == (200, 8)
    with pytest.raises(ValueError, match="Only a 'linear' anchor set"):
        fine_tune_shared_linear(
            AnchorSet.random(SUPPORT, 4), fit_embeddings, support_rows=SUPPORT_ROWS
        )


# ---- the default holds where the data is thin: never a refusal (issue #22) -----------------


def test_more_anchors_than_the_rank_are_capped_with_one_warning():
    """Two encoders of 16 and 24 dims support at most 40 anchors: m = 50 is capped, and the
    anchor set, its projectors and a head all use the cap."""
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(400, 8, generator=generator)
    spaces = {
        f"e{d}": base @ torch.randn(8, d, generator=generator) + 0.3 * torch.randn(400, d)
        for d in (16, 24, 20)
    }
    train = {n: spaces[n] for n in ("e16", "e24")}
    with pytest.warns(UserWarning, match=r"asked for 50 anchors .* rank 40 .* capped at 40") as w:
        anchor_set = AnchorSet.shared_linear(SUPPORT, train, 50, support_rows=SUPPORT_ROWS)
    assert len([x for x in w if "capped" in str(x.message)]) == 1
    assert anchor_set.num_anchors == 40 and anchor_set.training["requested_num_anchors"] == 50
    projector = RelativeProjector.from_anchor_set(
        anchor_set, spaces["e20"][SUPPORT_ROWS], spaces["e20"]
    )
    assert projector(spaces["e20"][:5]).shape == (5, 40)
    assert projector.config.num_anchors == 40


@pytest.mark.parametrize("shrinkage", ["auto", 0.0, 0.15])
def test_no_more_fit_rows_than_dims_fits_and_exact_whitening_warns(shrinkage):
    """100 fit rows of 128 dims: the default chooses shrinkage from those rows; a fixed 0 fits
    too, with the statistics' warning that the unseen directions are whitened by eps alone."""
    generator = torch.Generator().manual_seed(1)
    base = torch.randn(100, 10, generator=generator)
    train = {f"e{i}": base @ torch.randn(10, 128, generator=generator) for i in range(2)}
    train = {n: x + 0.1 * torch.randn(x.shape, generator=generator) for n, x in train.items()}
    if shrinkage == 0.0:
        with pytest.warns(UserWarning, match="no more rows than dimensions"):
            anchor_set = AnchorSet.shared_linear(SUPPORT, train, 8, support_rows=SUPPORT_ROWS,
                                                 shrinkage=shrinkage)  # fmt: skip
    else:
        anchor_set = AnchorSet.shared_linear(
            SUPPORT, train, 8, support_rows=SUPPORT_ROWS, shrinkage=shrinkage
        )
    assert anchor_set.num_anchors == 8 and bool(torch.isfinite(anchor_set.mixture).all())
    if shrinkage == "auto":  # few rows per dimension: the selector shrinks
        assert anchor_set.shrinkage > 0


def test_an_encoder_of_rank_one_is_fitted_not_refused():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(300, 12, generator=generator)
    rank_one = torch.randn(300, 1, generator=generator) @ torch.randn(1, 6, generator=generator)
    train = {"full": x, "rank one": rank_one}
    anchor_set = AnchorSet.shared_linear(SUPPORT, train, 10, support_rows=SUPPORT_ROWS)
    assert 1 <= anchor_set.num_anchors <= 10
    assert bool(torch.isfinite(anchor_set.mixture).all())


def test_shrinkage_must_be_auto_or_a_fraction(spaces):
    for bad in ("best", -0.1, 1.5, True):
        with pytest.raises(ValueError, match="'auto'"):
            fit(spaces, shrinkage=bad)
