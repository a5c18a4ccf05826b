"""The similarities against hand-computed values, and their invariances as one table."""

import pytest
import torch

from relrep_hf.functional.similarities import (
    SIMILARITIES,
    Similarity,
    cosine,
    euclidean,
    get_similarity,
    inner,
    l1,
    linf,
    register_similarity,
    relative_projection,
    unregister_similarity,
    wip,
)
from relrep_hf.functional.statistics import Statistics, whitening_matrix

D, N, M = 6, 400, 10


def test_hand_computed_values():
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    torch.testing.assert_close(inner(x, a), torch.tensor([[3.0, 8.0]], dtype=torch.float64))
    # cos = <x, a> / (|x| |a|): 3 / (5 * 1), 8 / (5 * 2)
    torch.testing.assert_close(cosine(x, a), torch.tensor([[0.6, 0.8]], dtype=torch.float64))
    # x - a = (2, 4) and (3, 2)
    torch.testing.assert_close(
        euclidean(x, a), torch.tensor([[20**0.5, 13**0.5]], dtype=torch.float64)
    )
    torch.testing.assert_close(l1(x, a), torch.tensor([[6.0, 5.0]], dtype=torch.float64))
    torch.testing.assert_close(linf(x, a), torch.tensor([[4.0, 3.0]], dtype=torch.float64))
    # wip with mean (1, 1) and whitening diag(1, 1/2): (x - mu) L L (a - mu)^T
    mean = torch.tensor([1.0, 1.0], dtype=torch.float64)
    whitening = torch.diag(torch.tensor([1.0, 0.5], dtype=torch.float64))
    # (2, 3) . diag(1, 1/4) . (0, -1) = -0.75 ; (2, 3) . diag(1, 1/4) . (-1, 1) = -2 + 0.75
    expected = torch.tensor([[-0.75, -1.25]], dtype=torch.float64)
    torch.testing.assert_close(wip(x, a, mean=mean, whitening=whitening), expected)


def test_wip_equals_the_paper_formula():
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(N, D, generator=generator, dtype=torch.float64) * torch.arange(1, D + 1)
    anchors = x[:M]
    stats = Statistics.from_embeddings(x)
    sigma_inv = torch.linalg.inv(
        0.85 * stats.covariance()
        + (0.15 * stats.covariance().trace() / D + 5e-8) * torch.eye(D, dtype=torch.float64)
    )
    expected = (x - stats.mean) @ sigma_inv @ (anchors - stats.mean).T
    got = wip(x, anchors, mean=stats.mean, whitening=whitening_matrix(stats))
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


def test_leading_dimensions_are_kept():
    x, a = torch.randn(2, 3, D), torch.randn(M, D)
    assert cosine(x, a).shape == (2, 3, M)
    torch.testing.assert_close(cosine(x, a)[1, 2], cosine(x[1, 2:3], a)[0])


def test_unknown_similarity_lists_the_valid_ones():
    with pytest.raises(ValueError, match="Invalid similarity 'dot'. Valid: 'wip', 'inner'"):
        get_similarity("dot")


def test_wip_without_statistics_is_an_error():
    with pytest.raises(ValueError, match="needs the encoder's statistics"):
        relative_projection(torch.randn(2, D), torch.randn(M, D), similarity="wip")


def test_duplicate_registration_is_an_error():
    with pytest.raises(ValueError, match="similarity 'cosine' is registered already"):
        register_similarity(Similarity("cosine", *SIMILARITIES["cosine"][1:]))


def test_a_registered_toy_similarity_projects_through_a_projector_and_unregisters():
    from relrep_hf import RelativeProjector

    def negative_squared_distance(x, weight, bias):  # -||x - a||^2, anchors as weight's columns
        return -torch.cdist(x, weight.T.contiguous()).square()

    toy = Similarity("toy_neg_sq", SIMILARITIES["euclidean"].prepare, negative_squared_distance,
                     needs_statistics=False, affine=False)  # fmt: skip
    register_similarity(toy)
    try:
        x, anchors = torch.randn(5, D, dtype=torch.float64), torch.randn(M, D, dtype=torch.float64)
        expected = -torch.cdist(x, anchors).square()
        got = relative_projection(x, anchors, similarity="toy_neg_sq")
        torch.testing.assert_close(got, expected)
        stats = Statistics.from_embeddings(torch.randn(200, D, dtype=torch.float64))
        projector = RelativeProjector.from_statistics(anchors, stats, similarity="toy_neg_sq")
        torch.testing.assert_close(projector(x.float()), expected.float(), rtol=1e-4, atol=1e-4)
    finally:
        assert unregister_similarity("toy_neg_sq") is toy
    with pytest.raises(ValueError, match="Invalid similarity 'toy_neg_sq'"):
        relative_projection(x, anchors, similarity="toy_neg_sq")


# ---- invariance table -----------------------------------------------------------------------


def _orthogonal(generator):
    q, _ = torch.linalg.qr(torch.randn(D, D, generator=generator, dtype=torch.float64))
    return q


TRANSFORMS = {
    "rotation": lambda g: (_orthogonal(g), torch.zeros(D, dtype=torch.float64)),
    "shift": lambda g: (
        torch.eye(D, dtype=torch.float64),
        5.0 * torch.randn(D, generator=g, dtype=torch.float64),
    ),
    "isotropic_scale": lambda g: (
        3.7 * torch.eye(D, dtype=torch.float64),
        torch.zeros(D, dtype=torch.float64),
    ),
    "anisotropic_scale": lambda g: (
        torch.diag(torch.logspace(-1, 1.5, D, dtype=torch.float64)),
        torch.zeros(D, dtype=torch.float64),
    ),
    "permutation": lambda g: (
        torch.eye(D, dtype=torch.float64)[torch.randperm(D, generator=g)],
        torch.zeros(D, dtype=torch.float64),
    ),
    "affine": lambda g: (
        torch.randn(D, D, generator=g, dtype=torch.float64) + 2 * torch.eye(D, dtype=torch.float64),
        torch.randn(D, generator=g, dtype=torch.float64),
    ),
}

# similarity (and shrinkage for wip) -> transforms it is invariant to; all others must change it.
INVARIANT_TO = {
    "wip_exact": {
        "rotation",
        "shift",
        "isotropic_scale",
        "anisotropic_scale",
        "permutation",
        "affine",
    },
    "wip": {"rotation", "shift", "isotropic_scale", "permutation"},
    "cosine": {"rotation", "isotropic_scale", "permutation"},
    "inner": {"rotation", "permutation"},
    "euclidean": {"rotation", "shift", "permutation"},
    "l1": {"shift", "permutation"},
    "linf": {"shift", "permutation"},
}


def _relative(similarity: str, x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    stats = Statistics.from_embeddings(x)
    exact = similarity == "wip_exact"
    shrinkage, eps = (0.0, 0.0) if exact else (0.15, 5e-8)
    return relative_projection(
        x,
        anchors,
        similarity="wip" if exact else similarity,
        mean=stats.mean,
        whitening=whitening_matrix(stats, shrinkage=shrinkage, eps=eps),
    )


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("similarity", list(INVARIANT_TO))
def test_invariance_table(similarity, transform):
    generator = torch.Generator().manual_seed(7)
    x = (
        torch.randn(N, D, generator=generator, dtype=torch.float64)
        @ torch.randn(D, D, generator=generator, dtype=torch.float64)
        + 1.0
    )
    anchors = x[:M]
    matrix, shift = TRANSFORMS[transform](generator)
    before = _relative(similarity, x, anchors)
    after = _relative(similarity, x @ matrix + shift, anchors @ matrix + shift)  # anchors alike
    change = ((after - before).norm() / before.norm()).item()
    if transform in INVARIANT_TO[similarity]:
        assert change < 1e-7, (
            f"{similarity} should be invariant to {transform} (change {change:.2e})"
        )
    else:
        assert change > 1e-3, (
            f"{similarity} should NOT be invariant to {transform} (change {change:.2e})"
        )


def test_default_shrinkage_changes_wip_little_while_cosine_breaks():
    """The paper's Figure 1 in numbers: a random invertible affine map X @ M + c.

    Measured as the mean cosine between a row's relative features before and after the map
    (1 = unchanged). Shrinkage (lambda = 0.15) is not affine-equivariant, so WIP moves a
    little; cosine, which is not even shift-invariant, moves a lot.
    """
    generator = torch.Generator().manual_seed(11)
    d = 32
    latent = torch.randn(4000, d, generator=generator, dtype=torch.float64)
    x = latent @ torch.diag(torch.logspace(-0.5, 0.5, d, dtype=torch.float64))
    mixing = torch.randn(d, d, generator=generator, dtype=torch.float64) + 3 * torch.eye(d)
    y = x @ mixing + 4.0 * torch.randn(d, generator=generator, dtype=torch.float64)

    def agreement(similarity: str, shrinkage: float, eps: float) -> float:
        per_space = []
        for space in (x, y):
            stats = Statistics.from_embeddings(space)
            whitening = whitening_matrix(stats, shrinkage=shrinkage, eps=eps)
            per_space.append(
                relative_projection(
                    space, space[:100], similarity=similarity, mean=stats.mean, whitening=whitening
                )
            )
        return torch.nn.functional.cosine_similarity(*per_space).mean().item()

    exact = agreement("wip", 0.0, 0.0)
    shrunk = agreement("wip", 0.15, 5e-8)
    cos = agreement("cosine", 0.15, 5e-8)
    print(
        f"row agreement under X @ M + c: wip exact {exact:.12f}, wip default {shrunk:.3f}, cosine {cos:.3f}"
    )
    assert exact > 1 - 1e-12
    assert shrunk > 0.9
    assert cos < shrunk - 0.15
