"""A run folder's migration: the map a migration should use, fitted on a run's training rows
(`run_migration_map`: every candidate, the anchor path among them, chosen by cross-validated
Recall@1 and retention@10), the anchor path alone (`anchor_path_map`), and
`evaluate_migration`, what a migrating user needs on a run folder: on held-out rows, the
Recall@1 and retention@10 of new-encoder queries against the migrated old vectors of every
candidate and of the chosen map, and through the bridge (queries mapped back to the old
space), beside re-embedding, with a recommendation. The maps and the stores themselves are
`relrep_hf.migration`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from relrep_hf.migration.fit import anchor_path_maps, migration_map_of
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.migrate import migrate
from relrep_hf.migration.report import migration_report
from relrep_hf.migration.selection import (
    DEFAULT_FOLDS,
    Direction,
    MigrationSelection,
    select_migration_map,
)
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.pipeline.run_folder import RunError, read_run, run_embeddings
from relrep_hf.translation.translator import translation_map

__all__ = [
    "anchor_path_map",
    "evaluate_migration",
    "migrate_run_vectors",
    "run_anchor_path",
    "run_migration_map",
]


def _projector(run_dir: Path, run: dict[str, Any], name: str) -> RelativeProjector:
    names = [e["name"] for e in run["encoders"]]
    if name not in names:
        raise RunError(f"Unknown encoder {name!r}; the run's encoders are {names}.")
    return RelativeProjector.from_pretrained(run_dir / "projectors" / name)


def migrate_run_vectors(
    run_dir: str | os.PathLike, source: str, target: str, vectors: Tensor | np.ndarray
) -> Tensor:
    """`migrate` with the projectors of encoders ``source`` and ``target`` of a fitted run."""
    run_dir = Path(run_dir)
    run = read_run(run_dir, fitted=True)
    return migrate(vectors, _projector(run_dir, run, source), _projector(run_dir, run, target))


def run_anchor_path(
    run_dir: Path,
    run: dict[str, Any],
    spaces: dict[str, Tensor],
    source: str,
    target: str,
    onboarded: dict[tuple, RelativeProjector] | None = None,
) -> Any:
    """The anchor path of a run as `select_migration_map` wants it (its variants by inverse
    ridge, `anchor_path_maps`): for a shared linear anchor set, a function that refits it on
    given training rows (the run's training encoders, its number of anchors and shrinkage) and
    onboards both encoders from those rows, so that cross-validation scores it out of fold; for
    other anchor kinds, the run's fitted maps (scored on rows their fit saw, which favours them:
    a warning says so). ``onboarded``: ``{(rows, encoder): projector}`` kept across calls, so
    that the two directions of one evaluation (the same folds) refit each fold once."""
    from relrep_hf.functional.statistics import Statistics
    from relrep_hf.models.anchor_set import AnchorSet

    anchor_set = AnchorSet.from_pretrained(run_dir / "anchor_set")
    fixed = anchor_path_maps(_projector(run_dir, run, source), _projector(run_dir, run, target))
    if anchor_set.strategy != "shared_linear":
        warnings.warn(
            f"The run's anchor set is {anchor_set.strategy!r}, not refitted per fold: the anchor "
            "path's cross-validated recall is on rows its fit saw (optimistic).",
            stacklevel=2,
        )
        return fixed
    train = torch.tensor(run["train_rows"])
    held_out = set(run.get("held_out", []))
    training = [e["name"] for e in run["encoders"] if e["name"] not in held_out]

    onboarded = {} if onboarded is None else onboarded

    def fit_on(rows: Tensor) -> Any:
        rows = train[rows]  # [r] run rows
        key = tuple(rows.tolist())
        if any((key, n) not in onboarded for n in (source, target)):
            fold_set = AnchorSet.shared_linear(
                [{"index": int(i)} for i in rows],
                {name: spaces[name][rows] for name in training},
                anchor_set.num_anchors,
                support_rows=torch.arange(len(rows)),
                shrinkage=anchor_set.shrinkage,
                eps=anchor_set.eps,
            )
            for n in (source, target):
                onboarded[key, n] = RelativeProjector.from_anchor_set(
                    fold_set, spaces[n][rows], Statistics.from_embeddings(spaces[n][rows])
                )
        return anchor_path_maps(onboarded[key, source], onboarded[key, target])

    return fit_on


def _selection(
    run_dir: Path,
    run: dict[str, Any],
    spaces: dict[str, Tensor],
    old: str,
    new: str,
    seed: int,
    direction: Direction = "corpus",
    onboarded: dict[tuple, RelativeProjector] | None = None,
) -> MigrationSelection:
    """`select_migration_map` on the run's training rows of ``old`` -> ``new``, the run's
    anchor path among the candidates (``onboarded``: `run_anchor_path`'s)."""
    train = torch.tensor(run["train_rows"])
    prior = run_anchor_path(run_dir, run, spaces, old, new, onboarded)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # thin folds' statistics, the rank cap
        return select_migration_map(
            spaces[old][train], spaces[new][train], prior=prior, seed=seed, direction=direction
        )


def _fitted(run_dir: str | os.PathLike, names: tuple[str, ...]) -> tuple[Path, dict, dict]:
    run_dir = Path(run_dir)
    run = read_run(run_dir, fitted=True)
    spaces = run_embeddings(run_dir, run)
    for name in names:
        if name not in spaces:
            raise RunError(f"Unknown encoder {name!r}; the run's encoders are {list(spaces)}.")
    return run_dir, run, spaces


def _map(
    selection: MigrationSelection,
    run: dict[str, Any],
    source: str,
    target: str,
    direction: Direction = "corpus",
) -> Any:
    info = {"source": source, "target": target, "rows": len(run["train_rows"])}
    return migration_map_of(selection, info | {"folds": DEFAULT_FOLDS, "direction": direction})


def run_migration_map(
    run_dir: str | os.PathLike,
    source: str,
    target: str,
    *,
    seed: int = 0,
    direction: Direction = "corpus",
) -> MigrationMap:
    """`relrep_hf.fit_migration` on a fitted run's training rows of ``source`` and ``target``,
    with the run's anchor path (`run_anchor_path`) among the candidates, and the pairwise map
    shrunk toward it; ``direction`` is the retrieval it is chosen on (``queries`` for a bridge,
    whose mapped queries search ``target``'s vectors)."""
    run_dir, run, spaces = _fitted(run_dir, (source, target))
    selection = _selection(run_dir, run, spaces, source, target, seed, direction=direction)
    return _map(selection, run, source, target, direction=direction)


def anchor_path_map(run_dir: str | os.PathLike, source: str, target: str) -> MigrationMap:
    """The anchor path alone (`migrate`'s map) of a fitted run, as a `MigrationMap`."""
    run_dir = Path(run_dir)
    run = read_run(run_dir, fitted=True)
    affine = translation_map(_projector(run_dir, run, source), _projector(run_dir, run, target))
    info = {"source": source, "target": target, "chosen": "anchors", "rows": len(run["train_rows"])}
    return MigrationMap(affine.weight, affine.bias, info)


def evaluate_migration(
    run_dir: str | os.PathLike,
    source: str,
    target: str,
    queries: str | None = None,
    *,
    seed: int = 0,
    direction: Direction = "corpus",
) -> tuple[dict[str, Any], MigrationMap]:
    """Whether migrating a run's ``source`` corpus to ``target`` is worth it, on held-out rows.

    The corpus is the test rows embedded by ``source`` (the old encoder); ``queries`` (default
    ``target``) are the test rows embedded in the new encoder's space, e.g. the new encoder on
    another column (a paraphrase, another translation, another language). Query i should find
    document i. Fitted on the run's training rows: every candidate old -> new
    (`relrep_hf.migration.selection`, the run's anchor path among them) and the one chosen by
    cross-validation, and the bridge (the same choice new -> old, applied to the queries; fitted
    for ``direction="corpus"`` only, the one that measures it). The report is
    `relrep_hf.migration.report.migration_report` (Recall@1, retention@10 and the fraction of
    re-embedding's Recall@1 of every search, and the recommendation) with ``source``,
    ``target``, ``queries``, ``choice``, ``bridge_choice`` (None without a bridge), each
    candidate's ``cv_recall@1`` and ``cv_retention@10``. ``direction``: the search the map is chosen and
    measured on (`migration_report`'s: ``corpus``, the store migrated; ``queries``, old-encoder
    vectors mapped to search the new encoder's store, with no ``queries`` encoder of its own).

    Returns:
        ``(report, migration_map)``: the chosen map fitted on the training rows, its ``info``
        holding the report's ``held_out`` searches and ``recommendation``.
    """
    if direction == "queries" and queries not in (None, target):
        raise RunError(
            f"direction='queries' measures the old encoder's vectors mapped to search the new "
            f"encoder's ({target!r}) store; queries {queries!r} have no old-encoder version. "
            "Leave queries out, or use direction='corpus'."
        )
    queries = queries or target
    run_dir, run, spaces = _fitted(run_dir, (source, target, queries))
    if spaces[queries].shape[1] != spaces[target].shape[1]:
        raise RunError(
            f"The queries {queries!r} ({spaces[queries].shape[1]}-d) are not in the new "
            f"encoder's space ({target!r}, {spaces[target].shape[1]}-d): give the new encoder."
        )
    test = torch.tensor(run["test_rows"])
    onboarded: dict[tuple, RelativeProjector] = {}  # both directions: the same folds
    forward = _selection(run_dir, run, spaces, source, target, seed, direction, onboarded)
    backward = None  # the bridge is measured for the corpus direction only: fitted for it only
    if direction != "queries":
        backward = _selection(run_dir, run, spaces, target, source, seed, onboarded=onboarded)
    report = migration_report(
        spaces[source][test],
        spaces[target][test],
        spaces[queries][test],
        forward.maps,
        forward.chosen,
        bridge=None if backward is None else backward.map,
        direction=direction,
    )
    report |= {"source": source, "target": target, "queries": queries}
    report |= {"choice": forward.chosen}
    report["bridge_choice"] = None if backward is None else backward.chosen
    for name in forward.maps:
        report[name]["cv_recall@1"] = forward.cv_recall[name]
        report[name]["cv_retention@10"] = forward.cv_retention[name]
    migration_map = _map(forward, run, source, target, direction=direction)
    searches = [w for w in ("re-embedded", "migrate", "bridge") if w in report]
    migration_map.info["held_out"] = {
        w: {"recall@1": report[w]["recall@1"], "retention@10": report[w]["retention@10"]}
        for w in searches
    } | {"rows": report["rows"], "queries": queries, "direction": direction}
    migration_map.info["recommendation"] = report["recommendation"]
    return report, migration_map
