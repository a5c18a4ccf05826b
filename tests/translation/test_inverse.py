"""The inverse of a relative projection: exact round trips, warnings, the cosine norm."""

import warnings

import pytest
import torch

from relrep_hf.functional.statistics import Statistics
from relrep_hf.translation.inverse import (
    IllConditionedInversionWarning,
    InversionWarning,
    UnderdeterminedInversionWarning,
    invert,
    relative_inverse,
    relative_inverses,
)
from tests.fixtures.translation_data import F64, D, anisotropic, generator, make_projector


@pytest.mark.parametrize("similarity", ["wip", "inner"])
@pytest.mark.parametrize("m", [D, 3 * D])
@pytest.mark.parametrize("shrinkage", [0.0, 0.15, 0.9])
def test_round_trip_is_exact_when_anchors_span_the_space(similarity, m, shrinkage):
    x = anisotropic(200, seed=1)
    anchors = anisotropic(m, seed=2, shift=-3.0)
    # Statistics of some other affine distribution: the round trip must not depend on them.
    stats = Statistics.from_embeddings(anisotropic(300, seed=3, shift=5.0))
    projector = make_projector(
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
    x = anisotropic(300, seed=4)
    projector = make_projector(x[: 2 * D], Statistics.from_embeddings(x), dtype=torch.float32)
    inverse = relative_inverse(projector)
    assert inverse.weight.dtype == torch.float32
    batch = x[:40].float().reshape(4, 10, D)  # [..., d]
    back = inverse(projector(batch))
    assert back.shape == (4, 10, D)
    scale = (x - x.mean(0)).norm(dim=1).mean()
    assert (back.double() - batch.double()).norm(dim=-1).max() < 1e-4 * scale


def test_cosine_recovers_direction_and_requested_norm():
    x = anisotropic(100, seed=5)
    anchors = anisotropic(2 * D, seed=6)
    projector = make_projector(anchors, similarity="cosine")
    back = invert(projector(x), projector, target_norm=3.0)
    cosines = torch.nn.functional.cosine_similarity(back, x, dim=-1)
    assert cosines.min() > 1 - 1e-6
    torch.testing.assert_close(back.norm(dim=-1), torch.full((100,), 3.0, dtype=F64))


def test_cosine_norm_defaults_to_anchors_and_reads_statistics():
    x = anisotropic(500, seed=7)
    projector = make_projector(x[: 2 * D], similarity="cosine")
    inverse = relative_inverse(projector)
    assert inverse.target_norm == pytest.approx(x[: 2 * D].norm(dim=1).mean().item())
    from_stats = relative_inverse(projector, target_norm=Statistics.from_embeddings(x))
    rms = x.square().sum(dim=1).mean().sqrt().item()
    assert from_stats.target_norm == pytest.approx(rms, rel=1e-12)
    assert not inverse.affine
    with pytest.raises(ValueError, match="not an affine map"):
        inverse.as_affine_map()


def test_target_norm_is_rejected_where_the_norm_is_recovered():
    x = anisotropic(100, seed=8)
    projector = make_projector(x[: 2 * D], Statistics.from_embeddings(x))
    with pytest.raises(ValueError, match="target_norm only applies to 'cosine'"):
        relative_inverse(projector, target_norm=2.0)


@pytest.mark.parametrize("similarity", ["euclidean", "l1", "linf"])
def test_distances_are_not_invertible(similarity):
    x = anisotropic(50, seed=9)
    projector = make_projector(x[: 2 * D], similarity=similarity)
    with pytest.raises(ValueError, match="not invertible by this method; use 'wip', 'inner'"):
        relative_inverse(projector)


def test_fewer_anchors_than_dimensions_warn_and_give_the_min_norm_solution():
    x = anisotropic(300, seed=10)
    m = D // 2
    projector = make_projector(x[:m], Statistics.from_embeddings(x))
    with pytest.warns(UnderdeterminedInversionWarning) as record:
        inverse = relative_inverse(projector)
    message = str(record[0].message)
    assert f"m={m}" in message and f"d={D}" in message and f"rank {m} <" in message
    assert inverse.rank == m and not inverse.exact
    # Any r is reachable with m < d independent anchors: projecting the inverse gives r back.
    relative = torch.randn(20, m, generator=generator(11), dtype=F64) * 5
    torch.testing.assert_close(projector(inverse(relative)), relative, rtol=0, atol=1e-6)
    # ... and the solution is the minimum-norm one in whitened coordinates.
    whitened = (inverse(relative) - projector.mean) @ projector.whitening
    expected = torch.linalg.lstsq(
        projector.whitened_anchors, relative.T, driver="gelsd"
    ).solution.T  # min ||x_w|| s.t. x_w A_w^T = r
    torch.testing.assert_close(whitened, expected, rtol=0, atol=1e-8)


def test_rank_deficient_anchors_warn_with_the_rank():
    x = anisotropic(300, seed=12)
    anchors = torch.cat([x[:5], x[:5], x[:5]])  # m = 15 >= d but rank 5
    with pytest.warns(UnderdeterminedInversionWarning, match=r"rank 5 < d=12"):
        relative_inverse(make_projector(anchors, Statistics.from_embeddings(x)))


def test_nearly_collinear_anchors_warn_with_the_condition_number():
    g = generator(13)
    anchors = torch.randn(3 * D, D, generator=g, dtype=F64)
    anchors[:, -1] = anchors[:, 0] + 1e-7 * torch.randn(3 * D, generator=g, dtype=F64)
    projector = make_projector(anchors, similarity="inner")
    with pytest.warns(IllConditionedInversionWarning) as record:
        inverse = relative_inverse(projector)
    assert inverse.rank == D and inverse.condition_number > 1e6
    assert f"{inverse.condition_number:.3g}" in str(record[0].message)
    with warnings.catch_warnings():  # a ridge is the documented way out
        warnings.simplefilter("error", InversionWarning)
        relative_inverse(projector, ridge=1e-3)


def test_wrong_feature_size_raises():
    x = anisotropic(100, seed=14)
    projector = make_projector(x[: 2 * D], Statistics.from_embeddings(x))
    with pytest.raises(ValueError, match=r"expected 24 .*another anchor set"):
        relative_inverse(projector)(torch.zeros(3, 2 * D + 1, dtype=F64))


def test_a_ridge_path_is_the_inverses_one_ridge_at_a_time():
    """`relative_inverses` shares one decomposition across the ridges (the migration's anchor
    path, 5 ridges per fold) and gives exactly what `relative_inverse` gives per ridge; its
    warnings point at the caller."""
    x = anisotropic(300, seed=15)
    projector = make_projector(x[: D // 2], Statistics.from_embeddings(x))
    ridges = (0.0, 0.1, 10.0)
    with pytest.warns(UnderdeterminedInversionWarning) as record:
        path = relative_inverses(projector, ridges=ridges)
    assert len(record) == len(ridges) and {r.filename for r in record} == {__file__}
    for ridge, inverse in zip(ridges, path, strict=True):
        with pytest.warns(UnderdeterminedInversionWarning) as single:
            alone = relative_inverse(projector, ridge=ridge)
        assert single[0].filename == __file__
        assert inverse.ridge == ridge and inverse.rank == alone.rank
        assert torch.equal(inverse.weight, alone.weight) and torch.equal(inverse.bias, alone.bias)
    assert not torch.equal(path[0].weight, path[-1].weight)
    with pytest.raises(ValueError, match="ridge must be a finite number >= 0, got -1"):
        relative_inverses(projector, ridges=(0.0, -1.0))
