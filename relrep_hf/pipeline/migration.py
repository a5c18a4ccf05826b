"""A run folder's migration: the map a migration should use, fitted on a run's training rows
(`run_migration_map`: `relrep_hf.fit_migration` over every candidate, the anchor path among
them, chosen by cross-validated recall), the anchor path alone (`anchor_path_map`), and
`evaluate_migration`, what a migrating user needs on a run folder: the Recall@1 of new-encoder
queries against the migrated old vectors of every candidate and of the chosen map, each as a
fraction of the Recall@1 against the corpus re-embedded with the new encoder. The maps and the
stores themselves are `relrep_hf.migration`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.migration.candidates import Direction, select_migration_map
from relrep_hf.migration.fit import anchor_path_maps, fit_migration
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.migrate import migrate
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
    run_dir: Path, run: dict[str, Any], spaces: dict[str, Tensor], source: str, target: str
) -> Any:
    """The anchor path of a run as `select_migration_map` wants it (its variants by inverse
    ridge, `anchor_path_maps`): for a shared linear anchor set, a function that refits it on
    given training rows (the run's training encoders, its number of anchors and shrinkage) and
    onboards both encoders from those rows, so that cross-validation scores it out of fold; for
    other anchor kinds, the run's fitted maps (scored on rows their fit saw, which favours them:
    a warning says so)."""
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

    def fit_on(rows: Tensor) -> Any:
        rows = train[rows]  # [r] run rows
        fold_set = AnchorSet.shared_linear(
            [{"index": int(i)} for i in rows],
            {name: spaces[name][rows] for name in training},
            anchor_set.num_anchors,
            support_rows=torch.arange(len(rows)),
            shrinkage=anchor_set.shrinkage,
            eps=anchor_set.eps,
        )
        pair = [
            RelativeProjector.from_anchor_set(
                fold_set, spaces[n][rows], Statistics.from_embeddings(spaces[n][rows])
            )
            for n in (source, target)
        ]
        return anchor_path_maps(*pair)

    return fit_on


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
    run_dir = Path(run_dir)
    run = read_run(run_dir, fitted=True)
    spaces = run_embeddings(run_dir, run)
    for name in (source, target):
        if name not in spaces:
            raise RunError(f"Unknown encoder {name!r}; the run's encoders are {list(spaces)}.")
    train = torch.tensor(run["train_rows"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # thin folds' statistics, the rank cap
        return fit_migration(
            spaces[source][train],
            spaces[target][train],
            prior=run_anchor_path(run_dir, run, spaces, source, target),
            source_name=source,
            target_name=target,
            seed=seed,
            direction=direction,
        )


def anchor_path_map(run_dir: str | os.PathLike, source: str, target: str) -> MigrationMap:
    """The anchor path alone (`migrate`'s map) of a fitted run, as a `MigrationMap`."""
    run_dir = Path(run_dir)
    run = read_run(run_dir, fitted=True)
    affine = translation_map(_projector(run_dir, run, source), _projector(run_dir, run, target))
    info = {"source": source, "target": target, "chosen": "anchors", "rows": len(run["train_rows"])}
    return MigrationMap(affine.weight, affine.bias, info)


def evaluate_migration(
    run_dir: str | os.PathLike, source: str, target: str, queries: str | None = None
) -> dict[str, Any]:
    """Recall of new-encoder queries against a migrated corpus, on a run's held-out rows.

    The corpus is the test rows embedded by ``source`` (the old encoder); ``queries`` (default
    ``target``) are the test rows embedded in the new encoder's space, e.g. the new encoder on
    another column (a paraphrase, another translation, another language). Query i should find
    document i. The corpora searched: re-embedded with ``target`` (the reference), and migrated
    by every candidate of `relrep_hf.fit_migration` fitted on the run's training rows
    (``affine``: least squares; ``ridge``; ``procrustes``; ``anchors``: through the anchor set,
    `migrate`; ``shrunk``: least squares shrunk toward the anchor path) and by the one it
    chooses by cross-validated recall on the training rows (``chosen``).

    Returns ``{"source", "target", "queries", "rows", "choice", "re-embedded", CANDIDATE...,
    "chosen"}``: each corpus ``{"recall@1", "recall@5", "mrr"}``, the migrated ones with
    ``"fraction"`` (their Recall@1 over the re-embedded one's) and ``"cv_recall@1"``.
    """
    run_dir = Path(run_dir)
    run = read_run(run_dir, fitted=True)
    queries = queries or target
    spaces = run_embeddings(run_dir, run)
    for name in (source, target, queries):
        if name not in spaces:
            raise RunError(f"Unknown encoder {name!r}; the run's encoders are {list(spaces)}.")
    if spaces[queries].shape[1] != spaces[target].shape[1]:
        raise RunError(
            f"The queries {queries!r} ({spaces[queries].shape[1]}-d) are not in the new "
            f"encoder's space ({target!r}, {spaces[target].shape[1]}-d): give the new encoder."
        )
    train, test = torch.tensor(run["train_rows"]), torch.tensor(run["test_rows"])
    old, new, query = spaces[source].double(), spaces[target].double(), spaces[queries][test]
    prior = run_anchor_path(run_dir, run, spaces, source, target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # thin folds' statistics, the rank cap
        selection = select_migration_map(old[train], new[train], prior=prior)
    report: dict[str, Any] = {"source": source, "target": target, "queries": queries}
    report |= {"rows": len(test), "choice": selection.chosen}
    report["re-embedded"] = retrieval_metrics(query.double(), new[test])
    reference = report["re-embedded"]["recall@1"]
    maps = selection.maps | {"chosen": selection.map}
    for name, candidate in maps.items():
        with torch.no_grad():
            report[name] = retrieval_metrics(query.double(), candidate(old[test]))
        report[name]["fraction"] = report[name]["recall@1"] / reference if reference else 0.0
        report[name]["cv_recall@1"] = selection.cv_recall[
            selection.chosen if name == "chosen" else name
        ]
    return report
