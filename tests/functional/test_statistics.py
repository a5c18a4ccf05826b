import numpy as np
import pytest
import torch

from relrep_hf.functional.statistics import (
    Statistics,
    accumulate,
    shrunk_covariance,
    symmetric_power,
    whitening_matrix,
)


@pytest.fixture
def data():
    generator = torch.Generator().manual_seed(0)
    mixing = torch.randn(12, 12, generator=generator, dtype=torch.float64)
    return torch.randn(500, 12, generator=generator, dtype=torch.float64) @ mixing + 3.0


def test_in_memory_matches_numpy(data):
    stats = Statistics.from_embeddings(data, batch_size=64)
    assert stats.count == 500
    np.testing.assert_allclose(stats.mean.numpy(), data.numpy().mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats.covariance().numpy(), np.cov(data.numpy().T), rtol=1e-10)


def test_ten_uneven_batches_equal_the_in_memory_estimate(data):
    cuts = [0, 1, 2, 9, 40, 41, 100, 230, 231, 400, 500]  # 10 batches of sizes 1..170
    batches = [data[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    streamed = accumulate(batches)
    whole = Statistics.from_embeddings(data, batch_size=len(data))
    assert streamed.count == whole.count
    torch.testing.assert_close(streamed.mean, whole.mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(streamed.scatter, whole.scatter, rtol=1e-10, atol=1e-9)


def test_merging_two_halves_equals_the_whole_in_any_order(data):
    first, second = Statistics.from_embeddings(data[:123]), Statistics.from_embeddings(data[123:])
    whole = Statistics.from_embeddings(data)
    for merged in (first.merge(second), second + first):
        torch.testing.assert_close(merged.covariance(), whole.covariance(), rtol=1e-10, atol=1e-10)
    assert first.merge(Statistics.empty(12)) is first


def test_float32_input_is_accumulated_in_float64():
    # A large offset destroys float32 variance estimates computed naively.
    x = torch.randn(1000, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    shifted = (x + 1e4).float()
    stats = Statistics.from_embeddings(shifted, batch_size=100)
    assert stats.mean.dtype == torch.float64
    expected = np.cov(shifted.double().numpy().T)
    np.testing.assert_allclose(stats.covariance().numpy(), expected, rtol=1e-9)


def test_dict_round_trip(data):
    stats = Statistics.from_embeddings(data)
    back = Statistics.from_dict(stats.to_dict())
    assert back.count == stats.count
    assert torch.equal(back.mean, stats.mean) and torch.equal(back.scatter, stats.scatter)


def test_shrinkage_formula_by_hand():
    covariance = torch.tensor([[4.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    # (1 - 0.5) * S + (0.5 * tr(S)/d + 0.1) I = [[2, .5], [.5, 1]] + (0.5 * 3 + 0.1) I
    expected = torch.tensor([[3.6, 0.5], [0.5, 2.6]], dtype=torch.float64)
    torch.testing.assert_close(shrunk_covariance(covariance, shrinkage=0.5, eps=0.1), expected)


def test_whitening_whitens(data):
    stats = Statistics.from_embeddings(data)
    whitening = whitening_matrix(stats, shrinkage=0.0, eps=0.0)
    torch.testing.assert_close(whitening, whitening.T)
    whitened = (data - stats.mean) @ whitening
    torch.testing.assert_close(
        torch.cov(whitened.T), torch.eye(12, dtype=torch.float64), rtol=0, atol=1e-10
    )
    # and L^2 = Sigma^-1
    torch.testing.assert_close(whitening @ whitening, torch.linalg.inv(stats.covariance()))


def test_symmetric_power_inverse_square_root():
    matrix = torch.tensor([[4.0, 0.0], [0.0, 9.0]], dtype=torch.float64)
    expected = torch.tensor([[0.5, 0.0], [0.0, 1.0 / 3.0]], dtype=torch.float64)
    torch.testing.assert_close(symmetric_power(matrix, -0.5), expected)


@pytest.mark.parametrize("rows", [0, 1])
def test_too_few_rows_for_statistics(rows):
    stats = Statistics.empty(4) if rows == 0 else Statistics.from_embeddings(torch.ones(1, 4))
    with pytest.raises(ValueError, match="at least 2 embeddings"):
        stats.covariance()


def test_no_batches_is_an_error():
    with pytest.raises(ValueError, match="No batches"):
        accumulate([])


def test_singular_covariance_without_shrinkage_is_a_clear_error():
    x = torch.randn(5, 10, dtype=torch.float64)  # 5 rows span at most 4 directions in 10-d
    stats = Statistics.from_embeddings(x)
    with pytest.raises(ValueError, match="singular.*shrinkage"):
        whitening_matrix(stats, shrinkage=0.0, eps=0.0)
    # the paper's defaults make the same statistics whitenable
    assert torch.isfinite(whitening_matrix(stats)).all()


@pytest.mark.parametrize(
    "bad, match",
    [
        (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), "NaN or Inf in 1 row.*row 0"),
        (torch.tensor([[1.0, 2.0], [float("inf"), 1.0]]), "row 1"),
        (torch.ones(3, 5), "last dimension is 5, expected 2"),
    ],
)
def test_bad_batches(bad, match):
    with pytest.raises(ValueError, match=match):
        Statistics.empty(2).update(bad)


def test_merge_of_different_dimensions():
    with pytest.raises(ValueError, match="different encoders"):
        Statistics.from_embeddings(torch.randn(3, 2)).merge(
            Statistics.from_embeddings(torch.randn(3, 4))
        )


@pytest.mark.parametrize("kwargs", [{"shrinkage": -0.1}, {"shrinkage": 1.5}, {"eps": -1.0}])
def test_invalid_shrinkage(kwargs):
    with pytest.raises(ValueError, match="Need 0 <= shrinkage <= 1 and eps >= 0"):
        shrunk_covariance(torch.eye(2), **kwargs)


@pytest.mark.parametrize("shape", [(17, 3), (300, 40), (64, 385), (5, 769)])
def test_symmetric_gram_is_the_exactly_symmetric_full_product(shape):
    from relrep_hf.functional.statistics import blocked_gram, symmetric_gram

    rows = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    full = rows.T @ rows
    for gram in (symmetric_gram(rows), blocked_gram(rows, block=128), blocked_gram(rows)):
        assert torch.equal(gram, gram.T)
        torch.testing.assert_close(gram, full, rtol=1e-12, atol=1e-12 * full.abs().max().item())


def test_numpy_and_lists_give_the_statistics_of_the_tensor(data):
    expected = Statistics.from_embeddings(data)
    for value in (data.numpy(), data.tolist()):
        stats = Statistics.from_embeddings(value)
        assert stats.count == expected.count
        torch.testing.assert_close(stats.scatter, expected.scatter, rtol=1e-12, atol=1e-9)
    updated = Statistics.empty(data.shape[1]).update(data.numpy())
    torch.testing.assert_close(updated.mean, expected.mean, rtol=1e-12, atol=1e-12)


def test_fewer_rows_than_dimensions_warns():
    import warnings

    few = Statistics.from_embeddings(torch.randn(10, 16, dtype=torch.float64))
    with pytest.warns(UserWarning, match="from 10 embeddings of dimension 16"):
        whitening_matrix(few)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whitening_matrix(Statistics.from_embeddings(torch.randn(40, 16, dtype=torch.float64)))
