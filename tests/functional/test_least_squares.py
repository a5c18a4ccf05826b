"""Least squares: the inverse operator, Procrustes and affine baselines, affine maps."""

import pytest
import torch

from relrep_hf.functional.least_squares import (
    AffineMap,
    fit_affine,
    fit_procrustes,
    least_squares_operator,
)
from tests.fixtures.translation_data import (
    F64,
    D,
    affine_pair,
    anisotropic,
    generator,
    orthogonal,
)


def test_least_squares_operator_ridge_matches_normal_equations():
    a = torch.randn(30, 8, generator=generator(15), dtype=F64)
    r = torch.randn(5, 30, generator=generator(16), dtype=F64)
    solve = least_squares_operator(a, ridge=0.5)
    expected = torch.linalg.solve(a.T @ a + 0.5 * torch.eye(8, dtype=F64), a.T @ r.T).T
    torch.testing.assert_close(r @ solve.operator, expected)


# ----------------------------------------------------------------------------- baselines


def test_procrustes_recovers_rotation_scaling_and_shift():
    source, target = affine_pair(orthogonal(D, 30) * 0.3)
    fitted = fit_procrustes(source, target)
    torch.testing.assert_close(fitted(source), target, rtol=0, atol=1e-8)
    torch.testing.assert_close(fitted.weight, orthogonal(D, 30) * 0.3, rtol=0, atol=1e-10)


def test_procrustes_pads_different_widths():
    isometry = orthogonal(8, 31)[:5]  # [5, 8]: orthonormal rows, 5-d into 8-d
    source = anisotropic(200, 5, seed=32)
    target = source @ isometry * 4.0 + 1.0
    torch.testing.assert_close(fit_procrustes(source, target)(source), target, rtol=0, atol=1e-8)
    back = fit_procrustes(target, source)  # 8-d into 5-d
    torch.testing.assert_close(back(target), source, rtol=0, atol=1e-8)


def test_affine_least_squares_recovers_any_affine_map():
    transform = torch.randn(D, 7, generator=generator(33), dtype=F64)
    source, target = affine_pair(transform)
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
