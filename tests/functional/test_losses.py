"""PARAM losses against literal, loop-by-loop readings of the paper's Appendix A."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from relrep_hf.functional.losses import (
    LossWeights,
    coverage_loss,
    info_nce_loss,
    length_loss,
    multi_space_info_nce,
    orthogonality_loss,
    param_loss,
)

TOL = 1e-10
F64 = torch.float64


def rand(*shape: int, seed: int = 0, requires_grad: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).requires_grad_(requires_grad)


# ---------------------------------------------------------------- literal references


def coverage_literal(x: torch.Tensor, a: torch.Tensor, tau: float) -> float:
    n, d = x.shape
    m = a.shape[0]
    total = 0.0
    for i in range(n):
        dist = [sum((x[i, k].item() - a[r, k].item()) ** 2 for k in range(d)) for r in range(m)]
        z = sum(math.exp(-dj / tau) for dj in dist)
        total += sum(math.exp(-dist[r] / tau) / z * dist[r] for r in range(m))
    return total / n / d


def coverage_tensor_literal(x: torch.Tensor, a: torch.Tensor, tau: float) -> torch.Tensor:
    """Differentiable, broadcast (not expanded) form, for gradient checks."""
    dist = ((x[:, None, :] - a[None, :, :]) ** 2).sum(-1)
    q = torch.exp(-dist / tau) / torch.exp(-dist / tau).sum(1, keepdim=True)
    return (q * dist).sum(1).mean() / x.shape[1]


def orthogonality_literal(a: torch.Tensor) -> float:
    m, d = a.shape
    norms = [math.sqrt(sum(a[r, k].item() ** 2 for k in range(d))) for r in range(m)]
    total = 0.0
    for r in range(m):
        for s in range(m):
            if r != s:
                cos = sum(a[r, k].item() * a[s, k].item() for k in range(d)) / norms[r] / norms[s]
                total += cos**2
    return total / (m * (m - 1))


def length_literal(a: torch.Tensor) -> float:
    m, d = a.shape
    norms = [math.sqrt(sum(a[r, k].item() ** 2 for k in range(d))) for r in range(m)]
    return sum((nr - 1.0) ** 2 for nr in norms) / m


def info_nce_tensor_literal(ra: torch.Tensor, rb: torch.Tensor, tau: float) -> torch.Tensor:
    """Differentiable form through autograd's cross entropy, for gradient checks."""
    ua = ra / ra.norm(dim=1, keepdim=True)
    ub = rb / rb.norm(dim=1, keepdim=True)
    logits = ua @ ub.T / tau
    target = torch.arange(len(ra))
    return 0.5 * (
        torch.nn.functional.cross_entropy(logits, target)
        + torch.nn.functional.cross_entropy(logits.T, target)
    )


def nce_direction_literal(ra: torch.Tensor, rb: torch.Tensor, tau: float) -> float:
    b, m = ra.shape

    def unit(row: torch.Tensor) -> list[float]:
        norm = math.sqrt(sum(v.item() ** 2 for v in row))
        return [v.item() / norm for v in row]

    ua = [unit(ra[i]) for i in range(b)]
    ub = [unit(rb[i]) for i in range(b)]
    logits = [
        [sum(ua[i][k] * ub[j][k] for k in range(m)) / tau for j in range(b)] for i in range(b)
    ]
    return (
        -sum(
            logits[i][i] - math.log(sum(math.exp(logits[i][j]) for j in range(b))) for i in range(b)
        )
        / b
    )


def info_nce_literal(ra: torch.Tensor, rb: torch.Tensor, tau: float) -> float:
    return 0.5 * (nce_direction_literal(ra, rb, tau) + nce_direction_literal(rb, ra, tau))


# ------------------------------------------------------------------------ coverage


@pytest.mark.parametrize("tau", [0.5, 2.7, 10.0])
def test_coverage_matches_literal_formula(tau: float) -> None:
    x, a = rand(9, 4, seed=1), rand(5, 4, seed=2)
    got = coverage_loss(x, a, temperature=tau)
    assert got.dtype == F64
    assert abs(got.item() - coverage_literal(x, a, tau)) < TOL


def test_coverage_gradients_match_autograd_of_literal_formula() -> None:
    x, a = rand(11, 3, seed=3, requires_grad=True), rand(4, 3, seed=4, requires_grad=True)
    value = coverage_loss(x, a, temperature=1.3, chunk_size=4)
    gx, ga = torch.autograd.grad(value, (x, a))
    ref = coverage_tensor_literal(x, a, 1.3)
    rx, ra = torch.autograd.grad(ref, (x, a))
    assert abs(value.item() - ref.item()) < TOL
    torch.testing.assert_close(gx, rx, atol=TOL, rtol=0)
    torch.testing.assert_close(ga, ra, atol=TOL, rtol=0)
    assert torch.autograd.gradcheck(
        lambda x_, a_: coverage_loss(x_, a_, temperature=1.3, chunk_size=3), (x, a)
    )


@pytest.mark.parametrize("chunk_size", [1, 2, 7, 16, 1000])
def test_chunked_coverage_equals_unchunked(chunk_size: int) -> None:
    x = rand(16, 5, seed=5)
    a_full, a_chunk = rand(6, 5, seed=6, requires_grad=True), rand(6, 5, seed=6, requires_grad=True)
    full = coverage_loss(x, a_full, chunk_size=16)
    chunked = coverage_loss(x, a_chunk, chunk_size=chunk_size)
    (g_full,) = torch.autograd.grad(full, a_full)
    (g_chunk,) = torch.autograd.grad(chunked, a_chunk)
    assert abs(full.item() - chunked.item()) < TOL
    torch.testing.assert_close(g_chunk, g_full, atol=TOL, rtol=0)


def test_coverage_gradient_scales_with_upstream_gradient_and_only_first_needed_input() -> None:
    x, a = rand(8, 3, seed=7), rand(4, 3, seed=8, requires_grad=True)
    (g1,) = torch.autograd.grad(coverage_loss(x, a), a)
    (g3,) = torch.autograd.grad(3.0 * coverage_loss(x, a), a)
    torch.testing.assert_close(g3, 3.0 * g1, atol=TOL, rtol=0)
    assert x.grad is None


def test_coverage_no_grad_and_float32() -> None:
    x, a = rand(10, 4, seed=9), rand(3, 4, seed=10, requires_grad=True)
    with torch.no_grad():
        value = coverage_loss(x, a)
    assert not value.requires_grad
    assert abs(value.item() - coverage_literal(x, a, 2.7)) < TOL
    v32 = coverage_loss(x.float(), a.detach().float())
    assert v32.dtype == torch.float32
    assert abs(v32.item() - value.item()) < 1e-5


def test_coverage_half_precision_and_autocast() -> None:
    x, a64 = rand(10, 4, seed=9), rand(3, 4, seed=10)
    a = a64.bfloat16().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = coverage_loss(x.bfloat16(), a)
    (grad,) = torch.autograd.grad(value, a)
    assert value.dtype == torch.float32 and grad.dtype == torch.bfloat16
    reference = coverage_literal(x.bfloat16().double(), a.detach().double(), 2.7)
    assert abs(value.item() - reference) < 1e-5


def test_coverage_is_zero_when_every_point_sits_on_its_own_anchor_with_cold_softmax() -> None:
    a = 10.0 * torch.eye(3, dtype=F64)
    assert coverage_loss(a.clone(), a, temperature=1e-3).item() < TOL


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    m=st.integers(1, 12),
    d=st.integers(1, 16),
    chunk_size=st.integers(1, 50),
    scale=st.sampled_from([1e-3, 1.0, 30.0]),
    tau=st.sampled_from([0.05, 2.7, 100.0]),
    seed=st.integers(0, 10_000),
)
def test_coverage_is_finite_and_non_negative(
    n: int, m: int, d: int, chunk_size: int, scale: float, tau: float, seed: int
) -> None:
    x = scale * rand(n, d, seed=seed).float()
    a = (scale * rand(m, d, seed=seed + 1).float()).requires_grad_(True)
    value = coverage_loss(x, a, temperature=tau, chunk_size=chunk_size)
    (grad,) = torch.autograd.grad(value, a)
    assert torch.isfinite(value) and value.item() >= 0.0
    assert torch.isfinite(grad).all()


def test_coverage_validation() -> None:
    x, a = rand(4, 3), rand(2, 3)
    with pytest.raises(ValueError, match="dimension"):
        coverage_loss(x, rand(2, 5))
    with pytest.raises(ValueError, match="temperature"):
        coverage_loss(x, a, temperature=0.0)
    with pytest.raises(ValueError, match="temperature"):
        coverage_loss(x, a, temperature=-1.0)
    with pytest.raises(ValueError, match="chunk_size"):
        coverage_loss(x, a, chunk_size=0)
    with pytest.raises(ValueError, match="2-D"):
        coverage_loss(x[0], a)
    with pytest.raises(ValueError, match="at least one row"):
        coverage_loss(x[:0], a)


# --------------------------------------------------------------- anchor regularisers


@pytest.mark.parametrize(("m", "d"), [(5, 3), (3, 5), (4, 4)])
def test_orthogonality_matches_literal_formula(m: int, d: int) -> None:
    a = rand(m, d, seed=11)
    assert abs(orthogonality_loss(a).item() - orthogonality_literal(a)) < TOL


def test_orthogonality_extremes() -> None:
    q, _ = torch.linalg.qr(rand(6, 4, seed=12))
    orthonormal = q.T * torch.tensor([1.0, 3.0, 0.2, 7.0], dtype=F64)[:, None]  # scale is ignored
    assert abs(orthogonality_loss(orthonormal).item()) < TOL
    identical = rand(1, 5, seed=13).expand(4, 5)
    assert abs(orthogonality_loss(identical).item() - 1.0) < TOL
    assert abs(orthogonality_loss(torch.cat([identical, -identical])).item() - 1.0) < TOL


def test_length_matches_literal_formula_and_is_zero_for_unit_anchors() -> None:
    a = rand(7, 3, seed=14)
    assert abs(length_loss(a).item() - length_literal(a)) < TOL
    unit = torch.nn.functional.normalize(a, dim=1)
    assert abs(length_loss(unit).item()) < TOL


def test_regulariser_validation() -> None:
    with pytest.raises(ValueError, match="at least 2 anchors"):
        orthogonality_loss(rand(1, 3))
    with pytest.raises(ValueError, match="2-D"):
        length_loss(rand(3))


# --------------------------------------------------------------------------- InfoNCE


@pytest.mark.parametrize("tau", [0.1, 1.0])
def test_info_nce_matches_literal_formula(tau: float) -> None:
    ra, rb = rand(6, 4, seed=15), rand(6, 4, seed=16)
    got = info_nce_loss(ra, rb, temperature=tau)
    assert abs(got.item() - info_nce_literal(ra, rb, tau)) < TOL


@pytest.mark.parametrize("tau", [0.05, 0.1, 2.0])
def test_info_nce_gradients_match_autograd_of_literal_formula(tau: float) -> None:
    ra, rb = rand(7, 4, seed=24, requires_grad=True), rand(7, 4, seed=25, requires_grad=True)
    value = info_nce_loss(ra, rb, temperature=tau)
    got = torch.autograd.grad(3.0 * value, (ra, rb))
    reference = info_nce_tensor_literal(ra, rb, tau)
    want = torch.autograd.grad(3.0 * reference, (ra, rb))
    assert abs(value.item() - reference.item()) < TOL
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=TOL, rtol=0)
    assert torch.autograd.gradcheck(lambda a_, b_: info_nce_loss(a_, b_, temperature=tau), (ra, rb))
    (only_a,) = torch.autograd.grad(info_nce_loss(ra, rb.detach(), temperature=tau), ra)
    torch.testing.assert_close(only_a, want[0] / 3.0, atol=TOL, rtol=0)


@pytest.mark.parametrize("tau", [0.1, 0.01])
def test_info_nce_float32_matches_float64(tau: float) -> None:
    """tau = 0.1 shares one exp shift over the [B, B] logits; at tau = 0.01, exp(-2 / tau)
    is below float32's range and each row and column gets its own shift: row 0 of ``ra``
    points away from every row of ``rb``, so one shared shift would leave its sum at 0."""
    offset = torch.zeros(64, 6, dtype=F64)
    offset[:, 0] = 5.0
    offset[0, 0] = -5.0
    ra = (rand(64, 6, seed=26) + offset).requires_grad_(True)
    rb = (rand(64, 6, seed=27) + offset.abs()).requires_grad_(True)
    value = info_nce_loss(ra, rb, temperature=tau)
    want = torch.autograd.grad(value, (ra, rb))
    a32, b32 = (t.detach().float().requires_grad_(True) for t in (ra, rb))
    value32 = info_nce_loss(a32, b32, temperature=tau)
    got = torch.autograd.grad(value32, (a32, b32))
    assert value32.dtype == torch.float32 and torch.isfinite(value32)
    assert abs(value32.item() - value.item()) < 1e-5 * max(1.0, value.item())
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.double(), w, atol=1e-6, rtol=1e-4)


def test_info_nce_is_symmetric() -> None:
    ra, rb = rand(8, 5, seed=17), rand(8, 5, seed=18)
    assert abs(info_nce_loss(ra, rb).item() - info_nce_loss(rb, ra).item()) < TOL


def test_info_nce_extremes() -> None:
    separated = 5.0 * torch.eye(6, dtype=F64)
    assert info_nce_loss(separated, separated.clone(), temperature=0.01).item() < 1e-30
    constant = torch.ones(7, 3, dtype=F64)
    assert abs(info_nce_loss(constant, 2 * constant).item() - math.log(7)) < TOL


def test_multi_space_info_nce_averages_unordered_pairs() -> None:
    rel = [rand(5, 3, seed=s) for s in (19, 20, 21)]
    expected = sum(info_nce_literal(a, b, 0.1) for a, b in itertools.combinations(rel, 2)) / 3
    assert abs(multi_space_info_nce(rel).item() - expected) < TOL
    two = multi_space_info_nce(rel[:2], temperature=0.3)
    assert abs(two.item() - info_nce_loss(rel[0], rel[1], temperature=0.3).item()) < TOL


def test_info_nce_validation() -> None:
    with pytest.raises(ValueError, match="at least 2 spaces"):
        multi_space_info_nce([rand(3, 2)])
    with pytest.raises(ValueError, match="shape"):
        info_nce_loss(rand(3, 2), rand(4, 2))
    with pytest.raises(ValueError, match="temperature"):
        info_nce_loss(rand(3, 2), rand(3, 2), temperature=0)


# ----------------------------------------------------------------------- param_loss


def test_loss_weights_defaults_are_table_5() -> None:
    w = LossWeights()
    assert (w.info_nce, w.coverage, w.orthogonality, w.length) == (0.70, 11.3, 0.27, 1.2)
    assert (w.info_nce_temperature, w.coverage_temperature) == (0.10, 2.7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.coverage = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="info_nce_temperature"):
        LossWeights(info_nce_temperature=0.0)
    with pytest.raises(ValueError, match="coverage_temperature"):
        LossWeights(coverage_temperature=-2.0)
    with pytest.raises(ValueError, match="length"):
        LossWeights(length=-1.0)


def test_param_loss_single_encoder_has_no_info_nce() -> None:
    x, a = rand(10, 4, seed=22), rand(3, 4, seed=23)
    w = LossWeights(coverage=2.0, orthogonality=3.0, length=5.0, coverage_temperature=1.5)
    out = param_loss([x], [a], w)
    assert set(out) == {"coverage", "orthogonality", "length", "loss"}
    assert abs(out["coverage"].item() - coverage_literal(x, a, 1.5)) < TOL
    assert abs(out["orthogonality"].item() - orthogonality_literal(a)) < TOL
    assert abs(out["length"].item() - length_literal(a)) < TOL
    expected = 2.0 * out["coverage"] + 3.0 * out["orthogonality"] + 5.0 * out["length"]
    assert abs(out["loss"].item() - expected.item()) < TOL


def test_param_loss_multi_encoder_with_different_dimensions() -> None:
    dims = (3, 5, 2)
    xs = [rand(6, d, seed=30 + d) for d in dims]
    anchors = [rand(4, d, seed=40 + d) for d in dims]
    w = LossWeights()
    out = param_loss(xs, anchors, w)
    assert set(out) == {"coverage", "orthogonality", "length", "info_nce", "loss"}
    cov = (
        sum(coverage_literal(x, a, 2.7) for x, a in zip(xs, anchors, strict=True)) / 3
    )  # each over its own d
    orth = sum(orthogonality_literal(a) for a in anchors) / 3
    length = sum(length_literal(a) for a in anchors) / 3
    rel = [
        x @ a.T for x, a in zip(xs, anchors, strict=True)
    ]  # WIP relative features of whitened inputs
    nce = sum(info_nce_literal(p, q, 0.1) for p, q in itertools.combinations(rel, 2)) / 3
    for key, want in [("coverage", cov), ("orthogonality", orth), ("length", length)]:
        assert abs(out[key].item() - want) < TOL, key
    assert abs(out["info_nce"].item() - nce) < TOL
    total = 0.70 * nce + 11.3 * cov + 0.27 * orth + 1.2 * length
    assert abs(out["loss"].item() - total) < TOL


def test_param_loss_gradients_match_autograd_of_literal_formulas() -> None:
    """The shared cross product and both hand-written backwards give autograd's gradients."""
    dims = (3, 5, 4)
    xs = [rand(9, d, seed=60 + d, requires_grad=True) for d in dims]
    anchors = [rand(4, d, seed=70 + d, requires_grad=True) for d in dims]
    w = LossWeights(coverage_temperature=1.7, info_nce_temperature=0.2)
    out = param_loss(xs, anchors, w, coverage_chunk_size=4)
    got = torch.autograd.grad(out["loss"], xs + anchors)

    def unit(a: torch.Tensor) -> torch.Tensor:
        return a / a.norm(dim=1, keepdim=True)

    cov = torch.stack(
        [coverage_tensor_literal(x, a, 1.7) for x, a in zip(xs, anchors, strict=True)]
    ).mean()
    orth = torch.stack(
        [((unit(a) @ unit(a).T) ** 2).sum().sub(len(a)) / (len(a) * (len(a) - 1)) for a in anchors]
    ).mean()
    length = torch.stack([((a.norm(dim=1) - 1) ** 2).mean() for a in anchors]).mean()
    rel = [x @ a.T for x, a in zip(xs, anchors, strict=True)]
    nce = torch.stack(
        [info_nce_tensor_literal(p, q, 0.2) for p, q in itertools.combinations(rel, 2)]
    ).mean()
    reference = 0.70 * nce + 11.3 * cov + 0.27 * orth + 1.2 * length
    want = torch.autograd.grad(reference, xs + anchors)
    assert abs(out["loss"].item() - reference.item()) < TOL
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r, atol=1e-9, rtol=0)


@pytest.mark.parametrize(("m", "d"), [(5, 3), (3, 5)])
def test_param_loss_regulariser_gradients_match_autograd_with_a_zero_anchor(m: int, d: int) -> None:
    """param_loss's one-pass orthogonality and length (both Gram shapes, a zero anchor row)
    against autograd through the public losses."""
    x = rand(6, d, seed=80)
    anchors = rand(m, d, seed=81).index_fill(0, torch.tensor([1]), 0.0).requires_grad_(True)
    w = LossWeights(coverage=0.0, orthogonality=0.3, length=1.7)
    out = param_loss([x], [anchors], w)
    (got,) = torch.autograd.grad(out["loss"], anchors)
    reference = 0.3 * orthogonality_loss(anchors) + 1.7 * length_loss(anchors)
    (want,) = torch.autograd.grad(reference, anchors)
    assert abs(out["orthogonality"].item() - orthogonality_loss(anchors).item()) < TOL
    assert abs(out["length"].item() - length_loss(anchors).item()) < TOL
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    assert torch.isfinite(got).all()


def test_param_loss_trains_a_mixture_matrix() -> None:
    support = [rand(12, 3, seed=50), rand(12, 4, seed=51)]
    batches = [rand(8, 3, seed=52), rand(8, 4, seed=53)]
    logits = torch.zeros(5, 12, dtype=F64, requires_grad=True)
    torch.nn.init.normal_(logits)
    mixture = torch.softmax(logits, dim=1)
    out = param_loss(batches, [mixture @ s for s in support])
    out["loss"].backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0


def test_param_loss_validation() -> None:
    x, a = rand(4, 3), rand(3, 3)
    with pytest.raises(ValueError, match="batch size"):
        param_loss([x, rand(5, 2)], [a, rand(3, 2)])
    with pytest.raises(ValueError, match="anchors"):
        param_loss([x, rand(4, 2)], [a, rand(2, 2)])
    with pytest.raises(ValueError, match="at least 2 anchors"):
        param_loss([x], [a[:1]])
    with pytest.raises(ValueError, match="anchor sets"):
        param_loss([x, x], [a])
    with pytest.raises(ValueError, match="dimension"):
        param_loss([x], [rand(3, 2)])
    with pytest.raises(ValueError, match="at least one encoder"):
        param_loss([], [])
