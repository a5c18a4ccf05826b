"""The candidate maps of an embedding migration and their choice by cross-validated recall.

A user who switches embedding models has parallel rows: the same inputs embedded by the old
encoder (``old [n, d_s]``) and the new one (``new [n, d_t]``). Every candidate is an
:class:`~relrep_hf.functional.least_squares.AffineMap` fitted on them:

- ``affine``: affine least squares (`fit_affine`, no penalty);
- ``ridge``: affine least squares with a ridge penalty chosen by cross-validation;
- ``procrustes``: orthogonal Procrustes (with scale) after standardising every coordinate;
- ``anchors``: a prior map that was not fitted on the pairs alone (the anchor path,
  source projector then the target's inverse), when given: a fitted map, or a function that
  fits it on given rows (then refitted in each fold, so its score is out of fold too); the
  function may give labelled variants (the inverse's ridge), one chosen by cross-validation;
- ``shrunk``: least squares shrunk toward the prior, ``min ||Xs W - Xt||^2 + a ||W - W_prior||^2``
  (both centred), ``a`` and the variant cross-validated: ``a -> 0`` is the pairwise map,
  ``a -> inf`` the prior's weight with the bias refitted.

`select_migration_map` scores each by the Recall@1 of its out-of-fold predictions (each row
mapped by a map fitted without it; new row i must be the nearest, by cosine, of mapped row i
among the rows of its block of at most 1,000; or the other way round, or both averaged:
``direction``) and returns every candidate refitted on all rows, with the scores. Every solve runs
in float64; the maps come back in the rows' dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor

from relrep_hf.functional.least_squares import AffineMap, fit_affine, fit_procrustes
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.utils.validation import check_paired_rows

__all__ = [
    "CANDIDATES",
    "MigrationSelection",
    "PriorFit",
    "fit_standardised_procrustes",
    "select_migration_map",
]

CANDIDATES = ("affine", "ridge", "procrustes", "anchors", "shrunk")
DIRECTIONS = ("corpus", "queries", "both")
Direction = Literal["corpus", "queries", "both"]
PENALTY_GRID = tuple(10.0**e for e in range(-4, 4))  # times the mean eigenvalue of X^T X
DEFAULT_FOLDS = 10  # 10 chose better than 5 on the real benchmark (docs/migration.md)
POOL = 1000  # rows retrieved among, at most, when scoring (the benchmark's test size)


@dataclass
class MigrationSelection:
    """The outcome of `select_migration_map`: the chosen candidate's name and map, every
    candidate's map (refitted on all rows) and cross-validated Recall@1, and the penalties
    cross-validation chose (``{"ridge": a, "shrunk": a}``, relative to the mean eigenvalue)."""

    chosen: str
    maps: dict[str, AffineMap]
    cv_recall: dict[str, float]
    penalties: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def map(self) -> AffineMap:
        return self.maps[self.chosen]


def fit_standardised_procrustes(source: Tensor, target: Tensor) -> AffineMap:
    """Orthogonal Procrustes (with scale, `fit_procrustes`) between the two spaces with each
    coordinate standardised (z-scored on these rows), composed into one affine map."""
    xs, xt = source.detach().double(), target.detach().double()
    scale_s = xs.std(dim=0).clamp_min(1e-12)  # [d_s]
    scale_t = xt.std(dim=0).clamp_min(1e-12)  # [d_t]
    standardise = AffineMap(torch.diag(1.0 / scale_s), torch.zeros(xs.shape[1], dtype=xs.dtype))
    rotation = fit_procrustes(xs / scale_s, xt / scale_t).to(torch.float64)
    restore = AffineMap(torch.diag(scale_t), torch.zeros(xt.shape[1], dtype=xt.dtype))
    composite = standardise.then(rotation).then(restore)
    dtype = torch.promote_types(source.dtype, target.dtype)
    return AffineMap(composite.weight.to(dtype), composite.bias.to(dtype))


def _penalised_path(
    xs: Tensor, xt: Tensor, priors: dict[str, AffineMap] | None, grid: list[tuple]
) -> list[tuple[Tensor, Tensor]]:
    """``[(weight, bias)]`` of ``min ||Xs W + b - Xt||^2 + a ||W - W_prior||^2`` for each
    ``(a, label)`` of ``grid`` (``label`` None: no prior, ridge), ``a`` relative to the mean
    eigenvalue of the centred Gram matrix (one eigendecomposition for the whole grid)."""
    mu_s, mu_t = xs.mean(dim=0), xt.mean(dim=0)
    centred_s, centred_t = xs - mu_s, xt - mu_t
    eigenvalues, eigenvectors = torch.linalg.eigh(centred_s.T @ centred_s)  # [d_s], [d_s, d_s]
    eigenvalues = eigenvalues.clamp_min(0.0)
    scale = eigenvalues.mean().clamp_min(1e-300)
    cross = eigenvectors.T @ (centred_s.T @ centred_t)  # [d_s, d_t], in the eigenbasis
    in_basis = {k: eigenvectors.T @ m.weight.double() for k, m in (priors or {}).items()}
    out = []
    for penalty, label in grid:
        a = penalty * scale
        rhs = cross if label is None else cross + a * in_basis[label]
        weight = eigenvectors @ (rhs / (eigenvalues + a)[:, None])  # [d_s, d_t]
        out.append((weight, mu_t - mu_s @ weight))
    return out


def _grids(labels: list[str]) -> dict[str, list[tuple]]:
    """The cross-validated settings of the candidates that have some."""
    return {
        "ridge": [(a, None) for a in PENALTY_GRID],
        "anchors": [(None, label) for label in labels],
        "shrunk": [(a, label) for label in labels for a in PENALTY_GRID],
    }


def _folds(n: int, folds: int, seed: int) -> list[Tensor]:
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return [order[i::folds] for i in range(folds)]


def _recall(predicted: Tensor, new: Tensor, direction: Direction, blocks: list[Tensor]) -> float:
    """Recall@1 of row i by row i within each block of rows (pools of at most `POOL` rows, so
    that the cost grows linearly with n and the task is as hard whatever n is), averaged over
    rows: ``corpus``, new-encoder queries against the mapped rows (a migrated corpus);
    ``queries``, mapped queries against the new rows (old-encoder queries into a new corpus);
    ``both``, the two averaged."""
    total = 0.0
    for block in blocks:
        scores = []
        if direction in ("corpus", "both"):
            scores.append(retrieval_metrics(new[block], predicted[block], ks=(1,))["recall@1"])
        if direction in ("queries", "both"):
            scores.append(retrieval_metrics(predicted[block], new[block], ks=(1,))["recall@1"])
        total += len(block) * sum(scores) / len(scores)
    return total / sum(len(block) for block in blocks)


def _blocks(n: int, seed: int) -> list[Tensor]:
    """The rows shuffled and cut into ceil(n / POOL) blocks of nearly equal size."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1))
    count = -(-n // POOL)
    return [order[i::count] for i in range(count)]


def _check_rows(old: Tensor, new: Tensor, folds: int) -> None:
    check_paired_rows(
        old,
        new,
        names=("old-encoder rows", "new-encoder rows"),
        need="paired rows old [n, d_old] and new [n, d_new] (row i: the same input by both "
        "encoders)",
    )
    if not isinstance(folds, int) or folds < 2 or folds > old.shape[0]:
        raise ValueError(f"folds must be an int in [2, {old.shape[0]}], got {folds!r}.")


# row indices -> the prior fitted on those rows: one map, or variants of it by label
PriorFit = Callable[[Tensor], "AffineMap | dict[str, AffineMap]"]


def _as_prior_fit(prior: Any, d_old: int, d_new: int) -> Callable[[Tensor], dict] | None:
    if prior is None:
        return None
    fit = prior if callable(prior) and not isinstance(prior, AffineMap) else (lambda rows: prior)

    def variants(rows: Tensor) -> dict[str, AffineMap]:
        with torch.no_grad():
            fitted = fit(rows)
        fitted = fitted if isinstance(fitted, dict) else {"prior": fitted}
        for label, m in fitted.items():
            if (m.in_features, m.out_features) != (d_old, d_new):
                raise ValueError(
                    f"The prior map {label!r} goes {m.in_features} -> {m.out_features} "
                    f"dimensions; the rows need {d_old} -> {d_new}."
                )
        return {k: AffineMap(m.weight.double(), m.bias.double()) for k, m in fitted.items()}

    return variants


def select_migration_map(
    old: Tensor,
    new: Tensor,
    *,
    prior: AffineMap | PriorFit | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    candidates: tuple[str, ...] | None = None,
    direction: Direction = "corpus",
) -> MigrationSelection:
    """Fit every candidate on the paired rows and choose the best by cross-validated Recall@1.

    Args:
        old: ``[n, d_s]`` the rows embedded by the old encoder.
        new: ``[n, d_t]`` the same rows embedded by the new encoder.
        prior: the anchor path; enables ``anchors`` and ``shrunk``. Either a function that
            fits it on the rows it is given (``row indices [r] -> AffineMap``), called for each
            fold's training rows and for all rows, so its score is out of fold like the
            others'; or a fitted map, scored as it is (in-sample where its own fit saw these
            rows: then it is favoured).
        folds: cross-validation folds (rows shuffled with ``seed``).
        candidates: a subset of `CANDIDATES` to consider (default: all that apply).
        direction: the retrieval scored (`_recall`): ``corpus`` (default; new-encoder queries
            search the migrated vectors, what a migrated store serves), ``queries`` (mapped
            vectors search the new encoder's), or ``both``.

    Ties go to the candidate listed first in `CANDIDATES`.
    """
    _check_rows(old, new, folds)
    if direction not in DIRECTIONS:
        raise ValueError(f"Invalid direction {direction!r}. Valid: {', '.join(DIRECTIONS)}.")
    wanted = tuple(candidates or CANDIDATES)
    unknown = sorted(set(wanted) - set(CANDIDATES))
    if unknown:
        raise ValueError(f"Invalid candidates {unknown}. Valid: {', '.join(CANDIDATES)}.")
    prior_fit = _as_prior_fit(prior, old.shape[1], new.shape[1])
    if prior_fit is None:
        wanted = tuple(c for c in wanted if c not in ("anchors", "shrunk"))
    xs, xt = old.detach().double(), new.detach().double()
    full_priors = None if prior_fit is None else prior_fit(torch.arange(len(xs)))
    grids = _grids(list(full_priors or {}))
    oof = _out_of_fold(xs, xt, prior_fit, wanted, grids, folds, seed)
    blocks = _blocks(len(xs), seed)
    cv_recall = {}
    penalties = {}
    for name, predictions in oof.items():
        if isinstance(predictions, list):  # a path of settings: keep its best point
            scores = [_recall(p, xt, direction, blocks) for p in predictions]
            best = max(range(len(scores)), key=scores.__getitem__)
            penalty, label = grids[name][best]
            cv_recall[name] = scores[best]
            penalties[name] = {"penalty": penalty, "prior": label}
            penalties[name] = {k: v for k, v in penalties[name].items() if v is not None}
        else:
            cv_recall[name] = _recall(predictions, xt, direction, blocks)
    dtype = torch.promote_types(old.dtype, new.dtype)
    maps = _refit(xs, xt, full_priors, wanted, penalties)
    maps = {n: AffineMap(m.weight.to(dtype), m.bias.to(dtype)) for n, m in maps.items()}
    chosen = max(wanted, key=lambda n: (cv_recall[n], -wanted.index(n)))
    return MigrationSelection(chosen, maps, cv_recall, penalties)


def _out_of_fold(xs, xt, prior_fit, wanted, grids, folds, seed) -> dict:
    """``{candidate: [n, d_t] out-of-fold predictions}`` (a list of them along a path)."""
    n, d_t = xs.shape[0], xt.shape[1]
    out: dict = {}
    for name in wanted:
        paths = name in grids
        out[name] = [xs.new_empty(n, d_t) for _ in grids[name]] if paths else xs.new_empty(n, d_t)
    for held in _folds(n, folds, seed):
        keep = torch.ones(n, dtype=torch.bool)
        keep[held] = False
        train_s, train_t, test_s = xs[keep], xt[keep], xs[held]
        priors = None if prior_fit is None else prior_fit(torch.nonzero(keep).squeeze(1))
        with torch.no_grad():
            if "affine" in wanted:
                out["affine"][held] = fit_affine(train_s, train_t)(test_s)
            if "procrustes" in wanted:
                out["procrustes"][held] = fit_standardised_procrustes(train_s, train_t)(test_s)
            if "anchors" in wanted:
                for predictions, (_, label) in zip(out["anchors"], grids["anchors"], strict=True):
                    predictions[held] = priors[label](test_s)
        for name in ("ridge", "shrunk"):
            if name in wanted:
                path = _penalised_path(train_s, train_t, priors, grids[name])
                for predictions, (weight, bias) in zip(out[name], path, strict=True):
                    predictions[held] = test_s @ weight + bias
    return out


def _refit(xs, xt, priors, wanted, chosen) -> dict[str, AffineMap]:
    maps: dict[str, AffineMap] = {}
    for name in wanted:
        if name == "affine":
            maps[name] = fit_affine(xs, xt)
        elif name == "procrustes":
            maps[name] = fit_standardised_procrustes(xs, xt)
        elif name == "anchors":
            maps[name] = priors[chosen[name]["prior"]]
        else:
            setting = (chosen[name]["penalty"], chosen[name].get("prior"))
            ((weight, bias),) = _penalised_path(xs, xt, priors, [setting])
            maps[name] = AffineMap(weight, bias)
    return maps
