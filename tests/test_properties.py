"""Property tests of the geometry core: statistics, whitening, relative projection.

Hypothesis draws seeds and sizes (d <= 8, n <= 200); the tensors are generated from the seeds
with torch, in float64 unless the dtype is what is being tested. Each property is checked
against a direct computation or an algebraic identity, to a tolerance set by float64 round-off.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from relrep_hf import RelativeProjector, Statistics
from relrep_hf.functional import relative_projection
from relrep_hf.functional.similarities import SIMILARITIES
from relrep_hf.functional.statistics import whiten, whitening_matrix

PROPERTY = settings(max_examples=30, deadline=None)

seeds = st.integers(0, 2**31 - 1)
dims = st.integers(1, 8)


def gaussian(
    seed: int,
    n: int,
    d: int,
    *,
    dtype=torch.float64,
    offset: float = 0.0,
    well_conditioned: bool = False,
) -> torch.Tensor:
    """``n`` rows of correlated Gaussian data around ``offset`` (a random mean of that size).

    A Gaussian mixing matrix is now and then nearly singular (condition number 1e5 for some
    seeds, so a covariance of 1e10): tests whose tolerance assumes a well-conditioned
    covariance ask for ``well_conditioned`` mixing (condition number <= 4)."""
    generator = torch.Generator().manual_seed(seed)
    mixing = torch.randn(d, d, generator=generator, dtype=torch.float64)
    if well_conditioned:
        mixing = random_affine(seed + 7919, d)[0]
    shift = offset * torch.randn(d, generator=generator, dtype=torch.float64)
    rows = torch.randn(n, d, generator=generator, dtype=torch.float64) @ mixing + shift
    return rows.to(dtype)


def direct_statistics(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and scatter of all rows at once, in float64 (the definition)."""
    x = x.to(torch.float64)
    centered = x - x.mean(dim=0)
    return x.mean(dim=0), centered.T @ centered


def assert_same_statistics(actual: Statistics, expected: Statistics, rtol: float = 1e-10) -> None:
    assert actual.count == expected.count
    scale = max(1.0, expected.mean.abs().max().item())
    torch.testing.assert_close(actual.mean, expected.mean, rtol=rtol, atol=rtol * scale)
    spread = max(1.0, expected.scatter.abs().max().item())
    torch.testing.assert_close(actual.scatter, expected.scatter, rtol=rtol, atol=rtol * spread)


def random_affine(seed: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A well-conditioned invertible ``x -> x @ matrix + shift``: rotation, scaling in
    [0.5, 2] (condition number <= 4), rotation, and a shift of norm ~10."""
    generator = torch.Generator().manual_seed(seed)
    q1 = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))[0]
    q2 = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))[0]
    scale = 0.5 + 1.5 * torch.rand(d, generator=generator, dtype=torch.float64)
    shift = 10 * torch.randn(d, generator=generator, dtype=torch.float64)
    return q1 @ torch.diag(scale) @ q2, shift


# ---------------------------------------------------------------------------- shapes and dtypes


@PROPERTY
@given(
    seed=seeds,
    n=st.integers(2, 200),
    d=dims,
    input_dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_statistics_are_float64_with_the_right_shapes(seed, n, d, input_dtype):
    x = gaussian(seed, n, d, dtype=input_dtype)
    stats = Statistics.from_embeddings(x)
    assert stats.count == n and stats.dim == d
    assert stats.mean.shape == (d,) and stats.scatter.shape == (d, d)
    assert stats.mean.dtype == stats.scatter.dtype == torch.float64
    assert stats.covariance().dtype == torch.float64
    mean, scatter = direct_statistics(x)  # x as given (float32 rows promoted exactly)
    torch.testing.assert_close(stats.mean, mean, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(stats.scatter, scatter, rtol=1e-10, atol=1e-9)
    torch.testing.assert_close(stats.scatter, stats.scatter.T, rtol=0, atol=0)


@PROPERTY
@given(
    seed=seeds,
    batch_shape=st.lists(st.integers(1, 5), min_size=0, max_size=2),
    d=dims,
    m=st.integers(1, 8),
    similarity=st.sampled_from(sorted(SIMILARITIES)),
    projector_dtype=st.sampled_from([torch.float32, torch.float64]),
    input_dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_projector_output_has_its_dtype_and_shape(
    seed, batch_shape, d, m, similarity, projector_dtype, input_dtype
):
    support = gaussian(seed, 50 + d, d)
    projector = RelativeProjector.from_statistics(
        support[:m], Statistics.from_embeddings(support), similarity=similarity,
        dtype=projector_dtype,
    )  # fmt: skip
    x = gaussian(seed + 1, max(1, torch.Size(batch_shape).numel()), d, dtype=input_dtype)
    relative = projector(x.reshape(*batch_shape, d))
    assert relative.dtype == projector_dtype
    assert relative.shape == (*batch_shape, m)


# ---------------------------------------------------------------------------- batch splits


@PROPERTY
@given(
    seed=seeds,
    n=st.integers(2, 200),
    d=dims,
    offset=st.sampled_from([0.0, 1.0, 1e4]),
    cuts=st.lists(st.integers(0, 200), max_size=12),
)
def test_any_split_into_batches_gives_the_same_statistics(seed, n, d, offset, cuts):
    x = gaussian(seed, n, d, offset=offset)
    bounds = sorted({0, n, *(c for c in cuts if c <= n)})
    stats = Statistics.empty(d)
    for start, stop in zip(bounds, bounds[1:], strict=False):
        stats = stats.update(x[start:stop])
    mean, scatter = direct_statistics(x)
    # Shifting by a large mean costs digits in the direct scatter too: compare at 1e-9.
    assert_same_statistics(stats, Statistics(n, mean, scatter), rtol=1e-9)
    assert_same_statistics(stats, Statistics.from_embeddings(x, batch_size=max(1, n // 3)))


@PROPERTY
@given(seed=seeds, d=dims, sizes=st.lists(st.integers(0, 60), min_size=3, max_size=3))
def test_merge_is_associative_and_commutative(seed, d, sizes):
    parts = [gaussian(seed + i, size, d, offset=3.0) for i, size in enumerate(sizes)]
    a, b, c = (Statistics.empty(d).update(part) for part in parts)
    assert_same_statistics(a.merge(b), b.merge(a))
    assert_same_statistics((a + b) + c, a + (b + c))
    assert_same_statistics((a + b) + c, (c + a) + b)
    if sum(sizes) > 0:
        mean, scatter = direct_statistics(torch.cat(parts))
        assert_same_statistics((a + b) + c, Statistics(sum(sizes), mean, scatter), rtol=1e-9)
    assert_same_statistics(a + Statistics.empty(d), a, rtol=0)


# ---------------------------------------------------------------------------- affine maps


@PROPERTY
@given(seed=seeds, d=st.integers(1, 8), extra_rows=st.integers(0, 150), m=st.integers(1, 12))
@example(
    seed=7996, d=8, extra_rows=0, m=1
)  # a nearly singular Gaussian mixing, found by Hypothesis
def test_wip_without_shrinkage_is_invariant_to_invertible_affine_maps(seed, d, extra_rows, m):
    n = 4 * d + 10 + extra_rows  # enough rows for a well-conditioned sample covariance
    x = gaussian(seed, n, d, offset=2.0, well_conditioned=True)
    matrix, shift = random_affine(seed + 1, d)
    y = x @ matrix + shift
    anchors = slice(0, m)
    relative_x, relative_y = (
        RelativeProjector.from_statistics(
            space[anchors], Statistics.from_embeddings(space), shrinkage=0.0, eps=0.0,
            dtype=torch.float64,
        )(space)
        for space in (x, y)
    )  # fmt: skip
    torch.testing.assert_close(relative_y, relative_x, rtol=1e-7, atol=1e-7)


@PROPERTY
@given(seed=seeds, d=st.integers(1, 8), extra_rows=st.integers(0, 150))
def test_whitening_without_shrinkage_makes_the_covariance_the_identity(seed, d, extra_rows):
    x = gaussian(seed, 4 * d + 10 + extra_rows, d, offset=5.0, well_conditioned=True)
    stats = Statistics.from_embeddings(x)
    whitening = whitening_matrix(stats, shrinkage=0.0, eps=0.0)
    torch.testing.assert_close(whitening, whitening.T, rtol=0, atol=1e-12)
    whitened = whiten(x, mean=stats.mean, whitening=whitening)
    covariance = Statistics.from_embeddings(whitened).covariance()
    torch.testing.assert_close(covariance, torch.eye(d, dtype=torch.float64), rtol=0, atol=1e-8)


@pytest.mark.parametrize("similarity", ["cosine", "inner", "euclidean"])
def test_other_similarities_are_not_invariant_to_the_same_maps(similarity):
    """The 'not invariant' rows of the table: the same kind of map changes these features."""
    d, m = 6, 8
    x = gaussian(0, 200, d, offset=2.0)
    matrix, shift = random_affine(1, d)
    y = x @ matrix + shift
    relative_x, relative_y = (
        relative_projection(space, space[:m], similarity=similarity) for space in (x, y)
    )
    assert (relative_y - relative_x).abs().max() > 0.1


# ---------------------------------------------------------------------------- row independence


@PROPERTY
@given(
    seed=seeds,
    n=st.integers(1, 200),
    d=dims,
    m=st.integers(1, 8),
    similarity=st.sampled_from(sorted(SIMILARITIES)),
    data=st.data(),
)
def test_projecting_a_subset_of_rows_gives_those_rows_of_the_full_projection(
    seed, n, d, m, similarity, data
):
    support = gaussian(seed, 40 + d, d, offset=1.0)
    projector = RelativeProjector.from_statistics(
        support[:m], Statistics.from_embeddings(support), similarity=similarity,
        dtype=torch.float64,
    )  # fmt: skip
    x = gaussian(seed + 1, n, d, offset=1.0)
    rows = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n), label="rows")
    subset = projector(x[rows])
    torch.testing.assert_close(subset, projector(x)[rows], rtol=1e-12, atol=1e-12)
    # and each row alone, as the functional form computes it
    first = relative_projection(
        x[rows[:1]], projector.anchors, similarity=similarity, mean=projector.mean,
        whitening=projector.whitening,
    )  # fmt: skip
    torch.testing.assert_close(first, subset[:1], rtol=1e-10, atol=1e-10)
