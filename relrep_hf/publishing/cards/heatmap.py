"""The stitching heatmap of an anchor set's card: cross-encoder retrieval as a PNG."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from relrep_hf.evaluation.plots import heatmap, pairs_matrix
from relrep_hf.publishing.cards import sections

__all__ = ["HEATMAP_NAME", "write_heatmap"]

HEATMAP_NAME = "stitching_heatmap.png"


def write_heatmap(
    retrieval: Mapping[str, Mapping[str, float]],
    path: str | os.PathLike,
    *,
    metric: str | None = None,
    encoders: Sequence[str] | None = None,
) -> Path:
    """A PNG heatmap of cross-encoder retrieval: rows embed the queries, columns the keys.

    Args:
        retrieval: ``{"a->b": {"recall@1": .., ...}}`` as in ``anchor_set.metrics["retrieval"]``.
        path: where to write the PNG.
        metric: which metric to show (default ``recall@1`` if measured, else the first one).
        encoders: the order of the rows and columns (default: order of first appearance).

    Drawn by `relrep_hf.evaluation.plots.heatmap` (no pyplot, no global backend change).
    """
    pairs = sections.parse_pairs(retrieval)
    if not pairs:
        raise ValueError("No retrieval pairs ('a->b') to draw.")
    metric = metric or sections.heatmap_metric(pairs)
    names = list(encoders or [])
    for a, b in pairs:
        names += [n for n in (a, b) if n not in names]
    label = sections.metric_label(metric)
    matrix = pairs_matrix({f"{a}->{b}": row for (a, b), row in pairs.items()}, names, metric)
    return heatmap(
        {f"Cross-encoder retrieval, {label}": matrix},
        names,
        path,
        xlabel="keys embedded by",
        ylabel="queries embedded by",
        colorbar_label=f"{label} (0 to 1)",
    )
