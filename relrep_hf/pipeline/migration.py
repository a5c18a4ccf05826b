"""Embedding migration: a stored corpus of old-encoder vectors moved into a new encoder's space
through the anchor set, so the old vectors (and the indexes built on them) live on after a
switch of embedding model, without re-embedding the corpus.

`migrate` is the Python call: ``old vectors [N, d_old] -> [N, d_new]``, the old encoder's
projector followed by the inverse of the new one's (`relrep_hf.training.translation.translation_map`,
one affine map). `evaluate_migration` measures what a migrating user needs on a run folder:
the Recall@1 of new-encoder queries against the translated old vectors, as a fraction of the
Recall@1 against the corpus re-embedded with the new encoder, beside the supervised affine
least-squares map (`relrep_hf.functional.least_squares.fit_affine`) fitted on the same parallel rows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from relrep_hf.functional.least_squares import fit_affine
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.pipeline.run_folder import RunError, read_run, run_embeddings
from relrep_hf.training.translation import translation_map

__all__ = ["evaluate_migration", "migrate", "migrate_run_vectors"]


def migrate(
    vectors: Tensor | np.ndarray,
    source: RelativeProjector,
    target: RelativeProjector,
    *,
    ridge: float = 0.0,
) -> Tensor:
    """Old-encoder ``vectors [N, d_source]`` in the new encoder's space ``[N, d_target]``.

    ``source`` and ``target`` are the two encoders' projectors of one anchor set (the target's
    anchors must span its space: as many anchors as its dimensions, or more). ``ridge``
    regularises the inversion (`relrep_hf.training.inverse.relative_inverse`).

    Example:
        >>> new = migrate(old, RelativeProjector.from_pretrained("run/projectors/minilm"),
        ...               RelativeProjector.from_pretrained("run/projectors/e5"))  # doctest: +SKIP
    """
    x = torch.as_tensor(np.asarray(vectors) if not isinstance(vectors, Tensor) else vectors)
    with torch.no_grad():
        return translation_map(source, target, ridge=ridge)(x.to(source.weight.dtype))


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


def evaluate_migration(
    run_dir: str | os.PathLike, source: str, target: str, queries: str | None = None
) -> dict[str, Any]:
    """Recall of new-encoder queries against a migrated corpus, on a run's held-out rows.

    The corpus is the test rows embedded by ``source`` (the old encoder); ``queries`` (default
    ``target``) are the test rows embedded in the new encoder's space, e.g. the new encoder on
    another column (a paraphrase, another translation, another language). Query i should find
    document i. Three corpora are searched: re-embedded with ``target`` (the reference),
    migrated through the anchor set (`migrate`), and mapped by the affine least-squares map
    fitted on the run's training rows of ``source`` and ``target`` (supervised, same rows).

    Returns ``{"source", "target", "queries", "rows", "re-embedded", "anchors", "affine"}``:
    the last three each ``{"recall@1", "recall@5", "mrr"}``, the last two with ``"fraction"``
    (their Recall@1 over the re-embedded one's).
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
    old, new, query = spaces[source], spaces[target], spaces[queries][test]
    corpora = {
        "re-embedded": new[test],
        "anchors": migrate(
            old[test], _projector(run_dir, run, source), _projector(run_dir, run, target)
        ),
        "affine": fit_affine(old[train].double(), new[train].double())(old[test].double()),
    }
    report: dict[str, Any] = {
        "source": source,
        "target": target,
        "queries": queries,
        "rows": len(test),
    }
    for name, corpus in corpora.items():
        report[name] = retrieval_metrics(query.double(), corpus.double())
    reference = report["re-embedded"]["recall@1"]
    for name in ("anchors", "affine"):
        report[name]["fraction"] = report[name]["recall@1"] / reference if reference else 0.0
    return report
