"""The shrinkage selector (`relrep_hf.functional.regularization`): its hill climb finds the grid's best,
its fast MRR is the metrics module's, and it shrinks only when rows per dimension are few."""

from __future__ import annotations

import pytest
import torch

from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.functional.regularization import (
    _fold_scorer,
    _fold_shrinkage,
    climb_grid,
    cross_validated_shrinkage,
    paired_mrr,
)
from relrep_hf.utils.defaults import SHRINKAGE_CLIMB_START, SHRINKAGE_GRID


@pytest.mark.parametrize("peak", range(len(SHRINKAGE_GRID)))
def test_climb_finds_the_peak_of_a_unimodal_score_wherever_it_is(peak):
    grid = SHRINKAGE_GRID
    calls = []

    def score(s: float) -> float:
        calls.append(s)
        return -abs(grid.index(s) - peak)

    scores = climb_grid(grid, score)
    assert max(scores, key=scores.get) == grid[peak]
    assert len(calls) == len(set(calls)) <= len(grid)  # each candidate scored once at most
    if grid[peak] == SHRINKAGE_CLIMB_START:  # a peak where the climb starts costs 3 scores
        assert len(calls) == 3


def test_climb_breaks_ties_towards_less_shrinkage():
    scores = climb_grid(SHRINKAGE_GRID, lambda s: 1.0)
    assert min(scores) == 0.0  # a flat score walks down to exact whitening


def test_fast_mrr_is_the_metrics_modules_mrr():
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(50, 6, generator=generator, dtype=torch.float64)
    b = a + 0.8 * torch.randn(50, 6, generator=generator, dtype=torch.float64)
    b[3] = b[4]  # a tie, counted pessimistically by both
    unit = torch.nn.functional.normalize
    expected = retrieval_metrics(a, b, ks=(1,))["mrr"]
    assert paired_mrr(unit(a, dim=1), unit(b, dim=1)) == pytest.approx(expected)


def _encoders(n: int, d: int, seed: int = 2) -> list[torch.Tensor]:
    """Three encoders of a shared 6-d signal, each mixed into ``d`` dims under noise."""
    generator = torch.Generator().manual_seed(seed)
    signal = torch.randn(n, 6, generator=generator)
    return [
        signal @ torch.randn(6, d, generator=generator)
        + 2.0 * torch.randn(n, d, generator=generator)
        for _ in range(3)
    ]


def test_climb_agrees_with_scoring_the_whole_grid():
    spaces = _encoders(300, 40)
    held = torch.zeros(300, dtype=torch.bool)
    held[::5] = True
    scorer = _fold_scorer(
        [x[~held] for x in spaces], [x[held] for x in spaces], [x[~held] for x in spaces], 6, 5e-8
    )
    every = {s: scorer(s) for s in SHRINKAGE_GRID}
    climbed = climb_grid(SHRINKAGE_GRID, scorer)
    assert len(set(every.values())) > 3  # the scores differ: the climb has a slope to follow
    assert max(climbed, key=climbed.get) == max(every, key=every.get)
    assert all(climbed[s] == pytest.approx(every[s]) for s in climbed)


def test_a_fold_scores_each_candidate_at_the_shrinkage_its_fewer_rows_need():
    """A fold fitted on 240 of 300 rows scores the candidate meant for all 300 rows at 300/240
    of it (capped at 1): the same score as the unscaled rule gives that larger value."""
    spaces = _encoders(300, 40)
    held = torch.zeros(300, dtype=torch.bool)
    held[::5] = True
    scorer = _fold_scorer(
        [x[~held] for x in spaces], [x[held] for x in spaces], [x[~held] for x in spaces], 6, 5e-8
    )
    assert _fold_shrinkage(0.2, 240, 300) == pytest.approx(0.25)
    assert _fold_shrinkage(0.9, 240, 300) == 1.0 and _fold_shrinkage(0.0, 240, 300) == 0.0
    assert scorer(0.8) == pytest.approx(scorer(1.0)) != pytest.approx(scorer(0.3))
    assert scorer(0.0) != pytest.approx(scorer(0.001))


def test_fewer_rows_per_dimension_choose_more_shrinkage():
    few = cross_validated_shrinkage(_encoders(150, 60), torch.arange(150), 6)
    many = cross_validated_shrinkage(_encoders(3000, 60), torch.arange(3000), 6)
    assert few.method == many.method == "cross-validation"
    assert few.shrinkage >= 0.5 > 0.3 >= many.shrinkage


@pytest.mark.slow
def test_top_eigenpairs_of_a_large_matrix_are_the_full_eigh_ones():
    from relrep_hf.functional.regularization import SUBSET_EIGH_MIN_SIZE, top_eigenpairs

    n = SUBSET_EIGH_MIN_SIZE + 100
    a = torch.randn(n + 50, n, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    matrix = a.T @ a
    values, vectors = top_eigenpairs(matrix, 40)
    full_values, full_vectors = torch.linalg.eigh(matrix)
    assert values.shape == (40,) and vectors.shape == (n, 40)
    assert torch.allclose(values, full_values.flip(0)[:40], rtol=1e-10)
    overlap = (vectors.T @ full_vectors.flip(1)[:, :40]).abs().diagonal()
    assert torch.allclose(overlap, torch.ones(40, dtype=torch.float64), atol=1e-8)


@pytest.mark.parametrize(
    ("rows", "dims", "num_anchors"),
    [(600, (40, 40, 40), 50), (150, (80, 96), 100)],  # the [D, D] side; [K, K] with m > rank
)
def test_folds_solved_in_float32_score_as_float64_does(monkeypatch, rows, dims, num_anchors):
    """The folds' eigenproblems in float32 (half the time) give the float64 scores to 1e-4 and
    the same choice, on both sides of the fold's Gram, also where it is rank-deficient (every
    encoder's columns repeat) and m exceeds its rank."""
    import relrep_hf.functional.regularization as regularization

    generator = torch.Generator().manual_seed(7)
    latent = torch.randn(rows, 12, generator=generator, dtype=torch.float64)
    spaces = [
        latent @ torch.randn(12, d // 2, generator=generator, dtype=torch.float64)
        + 0.3 * torch.randn(rows, d // 2, generator=generator, dtype=torch.float64)
        for d in dims
    ]
    spaces = [torch.cat([x, x], dim=1) for x in spaces]  # rank d / 2 each
    chosen = {}
    for dtype in (torch.float64, torch.float32):
        monkeypatch.setattr(regularization, "SELECTION_DTYPE", dtype)
        chosen[dtype] = cross_validated_shrinkage(spaces, torch.arange(rows), num_anchors)
    single, double = chosen[torch.float32], chosen[torch.float64]
    assert single.shrinkage == double.shrinkage and single.scores.keys() == double.scores.keys()
    assert all(single.scores[s] == pytest.approx(double.scores[s], abs=1e-4) for s in single.scores)
