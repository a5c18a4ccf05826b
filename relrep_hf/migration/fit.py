"""`fit_migration`: the map that moves stored old-encoder vectors into a new encoder's space.

From the user's paired rows (the same inputs embedded by both encoders) every candidate of
`relrep_hf.migration.candidates` is fitted (affine least squares, ridge, Procrustes after
standardisation; with the two encoders' projectors of one anchor set, also the anchor path and
least squares shrunk toward it) and the best by cross-validated Recall@1 and retention@10
(`relrep_hf.migration.selection`) is returned as a `MigrationMap`, with every candidate's
scores in its ``info``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from torch import Tensor

from relrep_hf.functional.least_squares import AffineMap
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.selection import (
    DEFAULT_FOLDS,
    Criterion,
    Direction,
    MigrationSelection,
    PriorFit,
    select_migration_map,
)
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.translation.inverse import relative_inverses
from relrep_hf.translation.translator import translation_map

__all__ = ["INVERSE_RIDGES", "anchor_path_maps", "fit_migration", "migration_map_of"]

# the anchor path's variants: the target inverse's ridge, times the mean squared singular value
# of the target's (whitened) anchors; a larger ridge tames the inverse's noise, which otherwise
# makes a few migrated vectors hubs when new-encoder queries search them
INVERSE_RIDGES = (0.0, 0.01, 0.1, 1.0, 10.0)


def _anchor_scale(projector: RelativeProjector) -> float:
    """The mean squared singular value of the projector's anchors as `relative_inverse` inverts
    them (whitened and centred for ``wip``, unit rows for ``cosine``)."""
    anchors = projector.anchors.detach().double()  # [m, d]
    similarity = projector.config.similarity
    if similarity == "wip":
        anchors = (anchors - projector.mean.detach().double()) @ projector.whitening.double()
    elif similarity == "cosine":
        anchors = torch.nn.functional.normalize(anchors, dim=-1)
    return float(anchors.square().sum() / anchors.shape[1])


def anchor_path_maps(
    source: RelativeProjector,
    target: RelativeProjector,
    ridges: tuple[float, ...] = INVERSE_RIDGES,
) -> dict[str, AffineMap]:
    """The anchor path ``source -> target`` for each relative inverse ridge of ``ridges``
    (relative to `_anchor_scale`), labelled ``"inverse ridge R"``."""
    scale = _anchor_scale(target)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an underdetermined inverse warns; the CV judges it
        inverses = relative_inverses(target, ridges=tuple(r * scale for r in ridges))
        return {
            f"inverse ridge {r:g}": translation_map(source, inverse).to(torch.float64)
            for r, inverse in zip(ridges, inverses, strict=True)
        }


def _rows(rows: Tensor | np.ndarray, name: str) -> Tensor:
    """The rows as a tensor, on the device they are on (the fit runs there)."""
    if isinstance(rows, Tensor):
        return rows.detach()
    array = np.asarray(rows)
    if array.dtype.kind != "f":
        raise ValueError(f"{name} must be floating-point vectors, got {array.dtype}.")
    return torch.from_numpy(np.ascontiguousarray(array))


def _check_projector(projector: Any, name: str) -> None:
    if projector is not None and not isinstance(projector, RelativeProjector):
        hint = (
            " A MigrationMap is a fitted map already: apply it, or pass it as prior= to have "
            "it among the candidates."
            if isinstance(projector, AffineMap)
            else ""
        )
        raise ValueError(
            f"{name} must be the {'old' if name == 'source' else 'new'} encoder's "
            f"RelativeProjector (e.g. a run's projectors/NAME), got {type(projector).__name__}."
            + hint
        )


def _encoder_name(projector: RelativeProjector | None, given: str | None) -> str | None:
    if given is not None or projector is None:
        return given
    return getattr(projector.config, "encoder_id", "") or None


def fit_migration(
    old_rows: Tensor | np.ndarray,
    new_rows: Tensor | np.ndarray,
    *,
    source: RelativeProjector | None = None,
    target: RelativeProjector | None = None,
    prior: AffineMap | PriorFit | None = None,
    source_name: str | None = None,
    target_name: str | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    candidates: tuple[str, ...] | None = None,
    direction: Direction = "corpus",
    criterion: Criterion = "both",
) -> MigrationMap:
    """The migration map chosen by cross-validated Recall@1 and retention@10 on paired rows.

    Args:
        old_rows: ``[n, d_old]`` rows embedded by the old encoder.
        new_rows: ``[n, d_new]`` the same rows, in order, embedded by the new encoder.
        source, target: optionally the two encoders' projectors of one anchor set (e.g. a
            run's ``projectors/OLD`` and ``projectors/NEW``): adds the anchor path and the
            pairwise map shrunk toward it to the candidates.
        source_name, target_name: the encoders' names for the card (default: the projectors'
            encoder ids).
        prior: instead of the projectors, the anchor path itself: a fitted map, or a function
            ``row indices -> AffineMap`` that fits it on those rows (refitted in each fold:
            honest cross-validation; projectors built from these same rows are scored on rows
            they saw, which favours the anchor path).
        folds, seed: the cross-validation.
        candidates: names of `relrep_hf.migration.candidates.MIGRATION_CANDIDATES` (default:
            the registered defaults that apply).
        direction: the retrieval the choice is scored on: ``corpus`` (new-encoder queries
            search the migrated vectors), ``queries`` (migrated vectors query the new
            encoder's) or ``both``.
        criterion: ``both`` (the mean of cross-validated Recall@1 and retention@10, the
            default), ``recall`` or ``retention``.

    Returns:
        A `MigrationMap` in the rows' dtype, on their device; ``info`` holds ``chosen``,
        ``criterion``, ``cv_recall`` and ``cv_retention@10`` (every candidate), ``settings``
        (each candidate's cross-validated penalty, rank or prior variant), ``rows``,
        ``folds``, ``direction``, ``source`` and ``target``.

    Example:
        >>> migration_map = fit_migration(old[:2000], new[:2000])  # doctest: +SKIP
        >>> migration_map.save_pretrained("minilm-to-e5")  # doctest: +SKIP
    """
    old, new = _rows(old_rows, "old_rows"), _rows(new_rows, "new_rows")
    _check_projector(source, "source")
    _check_projector(target, "target")
    if (source is None) != (target is None):
        raise ValueError("Give both projectors (source and target) or neither.")
    if source is not None and prior is not None:
        raise ValueError("Give the projectors or the prior, not both.")
    if source is not None:
        prior = anchor_path_maps(source, target)
    selection = select_migration_map(
        old,
        new.to(old.device),
        prior=prior,
        folds=folds,
        seed=seed,
        candidates=candidates,
        direction=direction,
        criterion=criterion,
    )
    info = {
        "source": _encoder_name(source, source_name),
        "target": _encoder_name(target, target_name),
        "rows": int(old.shape[0]),
        "folds": folds,
        "direction": direction,
    }
    return migration_map_of(selection, info)


def migration_map_of(selection: MigrationSelection, info: dict[str, Any]) -> MigrationMap:
    """The chosen map of a selection as a `MigrationMap`, ``info`` completed with the choice
    and every candidate's cross-validated scores."""
    info = dict(info) | {
        "chosen": selection.chosen,
        "criterion": selection.criterion,
        "cv_recall": selection.cv_recall,
        "cv_retention@10": selection.cv_retention,
        "settings": selection.settings,
    }
    return MigrationMap(selection.map.weight, selection.map.bias, info)
