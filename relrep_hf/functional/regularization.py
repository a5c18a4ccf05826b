"""The whitening's shrinkage for the shared linear map, chosen from the fit rows alone.

Why: with N fit rows, two exactly whitened encoders of d_i and d_j dimensions share at least
d_i + d_j - N directions that correlate perfectly by construction; the eigenproblem takes that
noise for shared signal. Exact whitening is best with many rows per dimension (small LMs trained
from scratch), shrinkage with few (pretrained encoders at the fit sizes users have), so no
single number is right (docs/quality.md).

The selector (`cross_validated_shrinkage`): split the fit rows into folds; for each shrinkage
of a small grid, fit the map on the other folds (statistics, support and map from them only;
the shrinkage scaled up by the rows a fold lacks, `_fold_shrinkage`) and score held-out rows by
cross-encoder retrieval (MRR, every ordered pair of training encoders); keep the best mean
(every candidate scored for up to 500 rows, a hill climb over the grid above, `climb_grid`). Each
encoder's covariance is diagonalised once per fold, so a shrinkage costs one column scaling and
the top eigenpairs of one Gram, solved in float32 (`_selection_eigenpairs`); the final fit is
float64.

`oas_shrinkage` (the analytic Oracle Approximating Shrinkage of Chen et al. 2010, as in
scikit-learn) is kept for comparison: it lost on the benchmark (docs/quality.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from relrep_hf.functional.statistics import Statistics
from relrep_hf.utils.defaults import (
    DEFAULT_EPS,
    SHRINKAGE_CLIMB_START,
    SHRINKAGE_FOLDS,
    SHRINKAGE_GRID,
    SHRINKAGE_ROUNDS,
)

EXHAUSTIVE_MAX_ROWS = 500  # up to it every candidate is scored; above it, a hill climb
SUBSET_EIGH_MIN_SIZE = 1200  # below it, a full eigh is as fast as asking for a subset
MIN_ROWS_TO_SELECT = 20  # below it, no fold holds enough rows to score: the grid's largest
SELECTION_DTYPE = torch.float32  # the folds' eigenproblems (`_selection_eigenpairs`)
SELECTION_RANK_TOLERANCE = 1e-5  # float32's noise floor relative to the largest eigenvalue


@dataclass(frozen=True)
class ShrinkageSelection:
    """The chosen shrinkage and how: ``scores`` maps each candidate to its mean held-out MRR."""

    shrinkage: float
    method: str
    scores: dict[float, float] = field(default_factory=dict)
    folds: int = 0

    def to_dict(self) -> dict:
        return {
            "chosen": self.shrinkage,
            "method": self.method,
            "folds": self.folds,
            "scores": {str(k): round(v, 6) for k, v in self.scores.items()},
        }


def oas_shrinkage(stats: Statistics) -> float:
    """Oracle Approximating Shrinkage towards ``tr(S)/d I`` (scikit-learn's ``oas``)."""
    n, d = stats.count, stats.dim
    covariance = stats.scatter / max(n, 1)  # the biased estimate, as scikit-learn's
    mu = covariance.diagonal().sum() / d
    alpha = covariance.square().mean()
    denominator = (n + 1) * (alpha - mu**2 / d)
    if denominator <= 0:
        return 1.0
    return float(min((alpha + mu**2) / denominator, 1.0))


def supported_rank(eigenvalues: Tensor, rank_tolerance: float = 1e-10) -> int:
    """How many of ``eigenvalues`` (sorted, decreasing) exceed ``rank_tolerance`` times the
    largest: the number of anchors the data supports."""
    top = eigenvalues[0].clamp_min(0.0) if len(eigenvalues) else eigenvalues.new_zeros(())
    return int((eigenvalues > top * rank_tolerance).sum()) if top > 0 else 0


def top_eigenpairs(matrix: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """The ``count`` largest eigenvalues (decreasing) of a symmetric ``matrix [n, n]``
    and their eigenvectors ``[n, count]``. Large matrices ask LAPACK for those alone (MRRR,
    scipy's ``subset_by_index``): the same eigenpairs as a full ``eigh``, about half its time
    at n ~ 2,000, m = 300 on a CPU. That solver is the CPU's (scipy); on another device the
    matrix stays there and torch's ``eigh`` solves it."""
    n = matrix.shape[0]
    count = min(count, n)
    if n < SUBSET_EIGH_MIN_SIZE or 2 * count > n or matrix.device.type != "cpu":
        values, vectors = torch.linalg.eigh(matrix)
        return values.flip(0)[:count], vectors.flip(1)[:, :count]
    from scipy.linalg import eigh  # only here: importing relrep_hf stays light

    values, vectors = eigh(matrix.numpy(), subset_by_index=[n - count, n - 1], driver="evr")
    return torch.from_numpy(values[::-1].copy()), torch.from_numpy(vectors[:, ::-1].copy())


@dataclass(frozen=True)
class CovarianceBasis:
    """One encoder's rows: mean, covariance eigenbasis, its eigenvalues, trace/d, row count."""

    mean: Tensor  # [d]
    vectors: Tensor  # [d, d]
    values: Tensor  # [d], of the unbiased covariance
    isotropic: float
    count: int

    @classmethod
    def from_statistics(cls, stats: Statistics) -> CovarianceBasis:
        covariance = stats.covariance()
        values, vectors = torch.linalg.eigh((covariance + covariance.T) / 2)
        values = values.clamp_min(0.0)
        return cls(stats.mean, vectors, values, float(values.sum()) / len(values), stats.count)

    def shrunk(self, shrinkage: float, eps: float) -> Tensor:
        """Eigenvalues of ``(1 - lambda) S + lambda tr(S)/d I + eps I`` (S's eigenvectors)."""
        return (1.0 - shrinkage) * self.values + shrinkage * self.isotropic + eps

    def factor_scale(self, shrinkage: float, eps: float) -> Tensor:
        """``c [d]`` with ``F = (S - mu) Q diag(c)`` the feature factor of support rows ``S``
        (`relrep_hf.functional.shared_linear.feature_factor` with these rows' own statistics):
        ``c = sqrt((n - 1) l) / s``, ``l`` the eigenvalues and ``s`` them shrunk."""
        return ((self.count - 1) * self.values).sqrt() / self.shrunk(shrinkage, eps)


def paired_mrr(queries: Tensor, keys: Tensor) -> float:
    """`relrep_hf.functional.metrics.retrieval_metrics`' MRR (cosine, ties pessimistic) for unit rows,
    without its input checks: the selector scores many pairs of its own finite features."""
    sims = queries @ keys.T
    ranks = (sims >= sims.diagonal()[:, None]).sum(dim=1)
    return float((1.0 / ranks.double()).mean())


def _fold_scorer(
    train: Sequence[Tensor],
    test: Sequence[Tensor],
    support: Sequence[Tensor],
    num_anchors: int,
    eps: float,
) -> Callable[[float], float]:
    """Held-out MRR of a shrinkage for all the fold's rows: the map fitted on ``train`` with
    ``support`` rows, each covariance shrunk by ``lambda * n / n_train`` (`_fold_shrinkage`).

    In each encoder's covariance eigenbasis ``Q`` (eigenvalues ``l``, shrunk ``s``), its
    factor is ``F_i = R_i diag(c_i)`` with ``R_i = (S_i - mu_i) Q_i`` and
    ``c_i = sqrt((n - 1) l_i) / s_i`` (`CovarianceBasis.factor_scale`). So the map's ``[D, D]``
    Gram (``D = sum d_i``) is the support cross-products ``C = R^T R``, computed once per fold,
    scaled by ``c c^T``: each shrinkage costs the top eigenpairs (`top_eigenpairs`) of the
    smaller of ``[D, D]`` and ``[K, K]`` (``F F^T``), never a ``[K, D]`` SVD.
    A held-out row's relative features are ``(x - mu_i) Q_i diag(1/s_i) R_i^T U``, with
    ``R_i^T U = C_i diag(c) V Lambda^(-1/2)`` from the Gram's top eigenpairs ``(Lambda, V)``.
    """
    bases = [CovarianceBasis.from_statistics(Statistics.from_embeddings(x)) for x in train]
    rotated_support = [
        (s.to(torch.float64) - b.mean) @ b.vectors for s, b in zip(support, bases, strict=True)
    ]
    rotated_test = [
        (x.to(torch.float64) - b.mean) @ b.vectors for x, b in zip(test, bases, strict=True)
    ]
    stacked = torch.cat(rotated_support, dim=1)  # [K_train, D]
    cross = stacked.T @ stacked if len(stacked) >= stacked.shape[1] else None  # C = R^T R
    bounds = torch.tensor([0] + [b.values.shape[0] for b in bases]).cumsum(0).tolist()

    def score(shrinkage: float) -> float:
        shrinkage = _fold_shrinkage(shrinkage, len(train[0]), len(train[0]) + len(test[0]))
        shrunk = [b.shrunk(shrinkage, eps) for b in bases]
        scale = torch.cat([b.factor_scale(shrinkage, eps) for b in bases])  # [D]
        if cross is None:  # fewer support rows than D: the [K, K] side, U directly
            scaled = stacked * scale
            values, vectors = _selection_eigenpairs(scaled @ scaled.T, num_anchors)
            mapped = stacked.T @ vectors  # R^T U [D, m]
        else:
            gram = cross * scale[:, None] * scale[None, :]
            values, vectors = _selection_eigenpairs((gram + gram.T) / 2, num_anchors)
            mapped = (cross * scale) @ (vectors / values.sqrt())  # R^T U [D, m]
        relative = [
            F.normalize((rt / s) @ mapped[lo:hi], dim=1)
            for rt, s, lo, hi in zip(rotated_test, shrunk, bounds[:-1], bounds[1:], strict=True)
        ]
        pairs = [
            paired_mrr(a, b)
            for i, a in enumerate(relative)
            for j, b in enumerate(relative)
            if i != j
        ]
        return sum(pairs) / len(pairs)

    return score


def _selection_eigenpairs(gram: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """A fold's top eigenpairs (float64 out), those the Gram supports, solved in
    ``SELECTION_DTYPE``: the selector only ranks candidates, and LAPACK's float32 solver takes
    half the float64 time (the final fit stays in float64). Eigenvalues below
    ``SELECTION_RANK_TOLERANCE`` of the largest, float32's noise floor, count as zero."""
    values, vectors = top_eigenpairs(gram.to(SELECTION_DTYPE), count)
    tolerance = SELECTION_RANK_TOLERANCE if torch.float32 == SELECTION_DTYPE else 1e-10
    m = min(count, max(supported_rank(values.double(), tolerance), 1))
    return values[:m].double(), vectors[:, :m].double()


def _fold_shrinkage(shrinkage: float, fold_rows: int, rows: int) -> float:
    """The shrinkage a fold's fit uses for a candidate meant for all ``rows``: the shrinkage a
    covariance needs grows as its rows shrink (about d / n, as Ledoit-Wolf's), so a fold fitted
    on fewer rows is shrunk by ``rows / fold_rows`` more. Scored as is, the folds chose one grid
    step more shrinkage than the full fit wants (docs/quality.md)."""
    return min(1.0, shrinkage * rows / fold_rows)


def climb_grid(
    grid: Sequence[float], score: Callable[[float], float], start: float = SHRINKAGE_CLIMB_START
) -> dict[float, float]:
    """Scores of the grid's candidates visited by a hill climb from its value nearest
    ``start``: a candidate's neighbours are scored and the climb moves to the best until none
    is better (ties: the least shrinkage). Held-out retrieval is unimodal in the shrinkage on
    every group of the benchmark, so this finds the grid's best with 3-8 of its 11
    eigendecompositions."""
    scores: dict[float, float] = {}

    def key(index: int) -> tuple[float, float]:
        if grid[index] not in scores:
            scores[grid[index]] = score(grid[index])
        return round(scores[grid[index]], 9), -grid[index]

    here = min(range(len(grid)), key=lambda i: abs(grid[i] - start))
    while True:
        near = [i for i in (here - 1, here, here + 1) if 0 <= i < len(grid)]
        best = max(near, key=key)
        if best == here:
            return scores
        here = best


def cross_validated_shrinkage(
    fit_embeddings: Sequence[Tensor],
    support_rows: Tensor,
    num_anchors: int,
    *,
    grid: Sequence[float] = SHRINKAGE_GRID,
    folds: int = SHRINKAGE_FOLDS,
    rounds: int = SHRINKAGE_ROUNDS,
    eps: float = DEFAULT_EPS,
    seed: int = 0,
) -> ShrinkageSelection:
    """The grid's shrinkage with the best held-out cross-encoder retrieval (module docstring).

    ``fit_embeddings`` are the training encoders' fit rows ``[N, d_i]`` (row-aligned),
    ``support_rows`` index the support inputs among them. The rows are split into ``folds``;
    the first ``rounds`` of them are held out in turn; every candidate is scored on up to
    ``EXHAUSTIVE_MAX_ROWS`` rows, and the grid is climbed on their mean score above it
    (`climb_grid`). With fewer than
    ``MIN_ROWS_TO_SELECT`` rows nothing can be scored: the grid's largest value is chosen.
    Computed on the embeddings' device; the folds are drawn by a CPU generator and moved
    there, so a seed splits the rows alike on every device.
    """
    n = len(fit_embeddings[0])
    if n < MIN_ROWS_TO_SELECT or folds < 2:
        return ShrinkageSelection(max(grid), "fewest rows: the grid's largest")
    device = fit_embeddings[0].device
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(device)
    in_support = torch.zeros(n, dtype=torch.bool, device=device)
    in_support[torch.as_tensor(support_rows).to(device)] = True
    rounds = min(rounds, folds)
    scorers = []
    for fold in range(rounds):
        held = torch.zeros(n, dtype=torch.bool, device=device)
        held[order[fold::folds]] = True
        support = (~held & in_support).nonzero().squeeze(1)
        if len(support) < 2:
            continue
        scorers.append(
            _fold_scorer(
                [x[~held] for x in fit_embeddings],
                [x[held] for x in fit_embeddings],
                [x[support] for x in fit_embeddings],
                num_anchors,
                eps,
            )
        )
    if not scorers:
        return ShrinkageSelection(max(grid), "no fold with 2 support rows: the grid's largest")
    grid = sorted(grid)
    mean_score = lambda s: sum(scorer(s) for scorer in scorers) / len(scorers)  # noqa: E731
    if n <= EXHAUSTIVE_MAX_ROWS:  # cheap, and small folds' scores are too noisy to climb
        scores = {shrinkage: mean_score(shrinkage) for shrinkage in grid}
    else:
        scores = climb_grid(grid, mean_score)
    best = max(scores, key=lambda s: (round(scores[s], 9), -s))  # ties: the least shrinkage
    return ShrinkageSelection(float(best), "cross-validation", scores, len(scorers))
