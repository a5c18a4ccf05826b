"""The choice of a migration map: every candidate of `relrep_hf.migration.candidates` scored
out of fold on the paired rows by what a store serves.

Each row is mapped by a map fitted without it (``folds`` folds); the rows are cut into blocks
of at most `POOL` and, within each block, scored two ways: **Recall@1** (new row i must be the
nearest, by cosine, of mapped row i: ``direction="corpus"``; or the other way round,
``"queries"``; or both averaged, ``"both"``) and **retention@10** (the share of the 10 nearest
other rows of new row i among the new rows that the search among the mapped rows also returns:
Drift-Adapter's protocol). ``criterion`` decides: ``"recall"``, ``"retention"`` or ``"both"``
(their mean, the default: docs/migration.md measures the three). Along a candidate's path (its
penalties, ranks, prior variants) the best setting is kept by the same criterion; every
candidate is then refitted on all rows.

**Blends.** The candidates are affine, so a convex blend ``a W_1 + (1 - a) W_2`` of two of them is
one more affine map, and its out-of-fold predictions are the blend of theirs: every pair of
candidates is scored at the weights `BLEND_WEIGHTS`, at no extra fit, and the best blend joins the
candidates as ``"blend"`` (its setting names the two and the weight). On the real group a blend
of the anchor path and ridge was as good as the better of the two on Recall@1 and on retention@10
where each single candidate lost on one of them (docs/migration.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor

from relrep_hf.functional.least_squares import AffineMap
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.functional.retention import retention_of_neighbours, top_k_neighbours
from relrep_hf.migration.candidates import (
    MIGRATION_CANDIDATES,
    MigrationCandidate,
    default_candidates,
    shared_solves,
)
from relrep_hf.utils.validation import check_paired_rows

__all__ = ["CRITERIA", "MigrationSelection", "PriorFit", "select_migration_map"]

DIRECTIONS = ("corpus", "queries", "both")
Direction = Literal["corpus", "queries", "both"]
CRITERIA = ("recall", "retention", "both")
Criterion = Literal["recall", "retention", "both"]
DEFAULT_FOLDS = 10  # 10 chose better than 5 on the real benchmark (docs/migration.md)
POOL = 1000  # rows retrieved among, at most, when scoring (the benchmark's test size)
RETENTION_K = 10
BLEND = "blend"
BLEND_WEIGHTS = tuple(i / 10 for i in range(1, 10))  # the first candidate's share in a blend

# row indices (on the CPU) -> the prior fitted on those rows: one map, or variants by label
PriorFit = Callable[[Tensor], "AffineMap | dict[str, AffineMap]"]


@dataclass
class MigrationSelection:
    """The outcome of `select_migration_map`: the chosen candidate's name and map, every
    candidate's map (refitted on all rows), cross-validated Recall@1 and retention@10, and the
    setting cross-validation chose on each candidate's path (``{"ridge": {"penalty": a}}``,
    penalties relative to the mean eigenvalue)."""

    chosen: str
    maps: dict[str, AffineMap]
    cv_recall: dict[str, float]
    cv_retention: dict[str, float] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    criterion: str = "both"

    @property
    def map(self) -> AffineMap:
        return self.maps[self.chosen]


def _score(recall: float, retention: float, criterion: str) -> float:
    return {"recall": recall, "retention": retention}.get(criterion, (recall + retention) / 2)


def _folds(n: int, folds: int, seed: int, device: torch.device) -> list[Tensor]:
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(device)
    return [order[i::folds] for i in range(folds)]


def _blocks(n: int, seed: int, device: torch.device) -> list[Tensor]:
    """The rows shuffled and cut into ceil(n / POOL) blocks of nearly equal size (pools of at
    most `POOL` rows: the cost grows linearly with n and the task is as hard whatever n is)."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1)).to(device)
    count = -(-n // POOL)
    return [order[i::count] for i in range(count)]


class _Scorer:
    """Recall@1 and retention@10 of predicted rows against the new rows, block by block; the
    reference neighbours (new rows among new rows) computed once."""

    def __init__(self, new: Tensor, direction: str, blocks: list[Tensor]):
        self.new, self.direction, self.blocks = new, direction, blocks
        self.k = [min(RETENTION_K, len(b) - 1) for b in blocks]
        self.reference = [
            top_k_neighbours(new[b], new[b], k, exclude_own=True) if k > 0 else None
            for b, k in zip(blocks, self.k, strict=True)
        ]

    def __call__(self, predicted: Tensor) -> tuple[float, float]:
        recall = retention = 0.0
        ways = [w for w in ("corpus", "queries") if self.direction in (w, "both")]
        for block, k, reference in zip(self.blocks, self.k, self.reference, strict=True):
            new, mapped = self.new[block], predicted[block]
            for way in ways:
                queries, keys = (new, mapped) if way == "corpus" else (mapped, new)
                recall += len(block) * retrieval_metrics(queries, keys, ks=(1,))["recall@1"]
                if reference is not None:
                    served = top_k_neighbours(queries, keys, k, exclude_own=True)
                    retention += len(block) * retention_of_neighbours(served, reference)
                else:
                    retention += len(block)
        total = len(self.new) * len(ways)
        return recall / total, retention / total


def _check(old: Tensor, new: Tensor, folds: int, direction: str, criterion: str) -> None:
    check_paired_rows(
        old,
        new,
        names=("old-encoder rows", "new-encoder rows"),
        need="paired rows old [n, d_old] and new [n, d_new] (row i: the same input by both "
        "encoders)",
    )
    if not isinstance(folds, int) or isinstance(folds, bool) or not 2 <= folds <= old.shape[0]:
        raise ValueError(f"folds must be an int in [2, {old.shape[0]}], got {folds!r}.")
    if direction not in DIRECTIONS:
        raise ValueError(f"Invalid direction {direction!r}. Valid: {', '.join(DIRECTIONS)}.")
    if criterion not in CRITERIA:
        raise ValueError(f"Invalid criterion {criterion!r}. Valid: {', '.join(CRITERIA)}.")


def _wanted(candidates: tuple[str, ...] | None, has_prior: bool) -> list[MigrationCandidate]:
    """The candidates to fit: those named (each must be registered, and the anchor path given
    for those that need it), else the defaults that apply."""
    if candidates is None:
        entries = [MIGRATION_CANDIDATES[n] for n in default_candidates()]
        return [c for c in entries if has_prior or not c.needs_prior]
    entries = [MIGRATION_CANDIDATES.lookup(name) for name in dict.fromkeys(candidates)]
    need = [c.name for c in entries if c.needs_prior and not has_prior]
    if need:
        raise ValueError(
            f"The candidates {need} need the anchor path: pass both encoders' projectors "
            "(source= and target=) or prior=, or leave them out of candidates."
        )
    if not entries:
        raise ValueError(
            f"candidates is empty: name at least one of {', '.join(MIGRATION_CANDIDATES)}."
        )
    return entries


def _as_prior_fit(prior: Any, d_old: int, d_new: int, device: torch.device) -> Callable | None:
    if prior is None:
        return None
    fit = prior if callable(prior) and not isinstance(prior, AffineMap) else (lambda rows: prior)

    def variants(rows: Tensor) -> dict[str, AffineMap]:
        with torch.no_grad():
            fitted = fit(rows.cpu())
        fitted = fitted if isinstance(fitted, dict) else {"prior": fitted}
        for label, m in fitted.items():
            if not isinstance(m, AffineMap) or (m.in_features, m.out_features) != (d_old, d_new):
                shape = f"{m.in_features} -> {m.out_features}" if isinstance(m, AffineMap) else m
                raise ValueError(
                    f"The prior map {label!r} must be an AffineMap of {d_old} -> {d_new} "
                    f"dimensions (the rows'), got {shape!r}."
                )
        return {
            k: AffineMap(m.weight.to(device, torch.float64), m.bias.to(device, torch.float64))
            for k, m in fitted.items()
        }

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
    criterion: Criterion = "both",
) -> MigrationSelection:
    """Fit every candidate on the paired rows and choose one by cross-validation: a candidate
    or, where it scores better out of fold, the best convex blend of two (``"blend"``).

    Args:
        old: ``[n, d_s]`` the rows embedded by the old encoder.
        new: ``[n, d_t]`` the same rows embedded by the new encoder (on the same device; the
            maps come back on it, in the rows' dtype).
        prior: the anchor path; enables the candidates that need it (``anchors``,
            ``shrunk``). Either a function that fits it on the rows it is given (``row
            indices [r] (CPU) -> AffineMap`` or ``{label: AffineMap}``), called for each fold's
            training rows and for all rows, so its score is out of fold like the others'; or a
            fitted map, scored as it is (in-sample where its own fit saw these rows: favoured).
        folds, seed: the cross-validation (rows shuffled with ``seed``).
        candidates: names of `MIGRATION_CANDIDATES` to consider (default: the registered
            defaults that apply).
        direction: the retrieval scored: ``corpus`` (default; new-encoder queries search the
            migrated vectors, what a migrated store serves), ``queries`` (mapped vectors
            search the new encoder's), or ``both``.
        criterion: ``both`` (default: the mean of Recall@1 and retention@10), ``recall`` or
            ``retention``.

    Ties go to the candidate listed first.
    """
    _check(old, new, folds, direction, criterion)
    device = old.device
    entries = _wanted(candidates, prior is not None)
    prior_fit = _as_prior_fit(prior, old.shape[1], new.shape[1], device)
    xs, xt = old.detach().double(), new.detach().to(device, torch.float64)
    full_priors = None if prior_fit is None else prior_fit(torch.arange(len(xs)))
    oof = _out_of_fold(xs, xt, prior_fit, entries, folds, seed)
    scorer = _Scorer(xt, direction, _blocks(len(xs), seed, device))
    cv_recall, cv_retention, best = {}, {}, {}
    for name, predictions in oof.items():
        scores = [scorer(p) for p in predictions]
        best[name] = max(range(len(scores)), key=lambda i: _score(*scores[i], criterion))
        cv_recall[name], cv_retention[name] = scores[best[name]]
    dtype = torch.promote_types(old.dtype, new.dtype)
    maps, settings = {}, {}
    with shared_solves(), torch.no_grad():  # one decomposition of the rows for every candidate
        for entry in entries:
            settings[entry.name], m = entry.fit(xs, xt, full_priors)[best[entry.name]]
            maps[entry.name] = AffineMap(m.weight.to(dtype), m.bias.to(dtype))
    names = [e.name for e in entries]
    blend = _best_blend({n: oof[n][best[n]] for n in names}, scorer, criterion)
    if blend is not None:
        (first, second, weight), (cv_recall[BLEND], cv_retention[BLEND]) = blend
        settings[BLEND] = {"of": [first, second], "weight": weight}
        maps[BLEND] = _blended(maps[first], maps[second], weight)
        names.append(BLEND)
    chosen = max(
        names,
        key=lambda n: (_score(cv_recall[n], cv_retention[n], criterion), -names.index(n)),
    )
    return MigrationSelection(chosen, maps, cv_recall, cv_retention, settings, criterion)


def _best_blend(predictions: dict[str, Tensor], scorer: _Scorer, criterion: str):
    """``((first, second, weight), (recall, retention))`` of the best convex blend of two
    candidates' out-of-fold predictions by ``criterion``, or None (fewer than two candidates)."""
    names, found, merit = list(predictions), None, -float("inf")
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            for weight in BLEND_WEIGHTS:
                mixed = weight * predictions[first] + (1 - weight) * predictions[second]
                scores = scorer(mixed)
                if _score(*scores, criterion) > merit:
                    found, merit = ((first, second, weight), scores), _score(*scores, criterion)
    return found


def _blended(first: AffineMap, second: AffineMap, weight: float) -> AffineMap:
    """The affine map ``weight * first + (1 - weight) * second``."""
    return AffineMap(
        weight * first.weight + (1 - weight) * second.weight,
        weight * first.bias + (1 - weight) * second.bias,
    )


def _out_of_fold(xs, xt, prior_fit, entries, folds, seed) -> dict[str, list[Tensor]]:
    """``{candidate: [[n, d_t] out-of-fold predictions, one per setting of its path]}``."""
    n, d_t = xs.shape[0], xt.shape[1]
    out: dict[str, list[Tensor]] = {}
    for held in _folds(n, folds, seed, xs.device):
        keep = torch.ones(n, dtype=torch.bool, device=xs.device)
        keep[held] = False
        train_s, train_t, test_s = xs[keep], xt[keep], xs[held]
        priors = None if prior_fit is None else prior_fit(torch.nonzero(keep).squeeze(1))
        with shared_solves():  # the fold's decomposition made once for every candidate
            for entry in entries:
                with torch.no_grad():
                    path = entry.fit(train_s, train_t, priors)
                if entry.name not in out:
                    out[entry.name] = [xs.new_empty(n, d_t) for _ in path]
                if len(path) != len(out[entry.name]):
                    raise ValueError(
                        f"The migration candidate {entry.name!r} gave {len(path)} settings on "
                        f"one fold and {len(out[entry.name])} on another: its path must not "
                        "depend on the rows."
                    )
                for predictions, (_, m) in zip(out[entry.name], path, strict=True):
                    predictions[held] = m(test_s).double()
    return out
