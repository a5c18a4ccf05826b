"""The stitching heatmap of an anchor set's card: cross-encoder retrieval as a PNG."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from relrep_hf.cards import sections

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

    Uses matplotlib's Agg canvas directly (no pyplot, no global backend change).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pairs = sections.parse_pairs(retrieval)
    if not pairs:
        raise ValueError("No retrieval pairs ('a->b') to draw.")
    metric = metric or sections.heatmap_metric(pairs)
    names = list(encoders or [])
    for a, b in pairs:
        names += [n for n in (a, b) if n not in names]
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    values = [[math.nan] * n for _ in range(n)]  # diagonal: not measured (trivial)
    for (a, b), row in pairs.items():
        if sections.is_number(row.get(metric)):
            values[index[a]][index[b]] = float(row[metric])
    figure = Figure(figsize=(1.6 + 1.1 * n, 1.2 + 0.9 * n), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    image = axes.imshow(values, vmin=0.0, vmax=1.0, cmap="viridis")
    axes.set_xticks(range(n), names, rotation=30, ha="right")
    axes.set_yticks(range(n), names)
    axes.set_xlabel("keys embedded by")
    axes.set_ylabel("queries embedded by")
    axes.set_title(f"Cross-encoder retrieval, {sections.metric_label(metric)}")
    for i in range(n):
        for j in range(n):
            if i == j:  # an encoder against itself: not a stitching result
                axes.text(j, i, "—", ha="center", va="center", color="grey")
            elif not math.isnan(values[i][j]):
                color = "black" if values[i][j] > 0.6 else "white"
                axes.text(j, i, f"{values[i][j]:.2f}", ha="center", va="center", color=color)
    colorbar = figure.colorbar(image, ax=axes, shrink=0.8)
    colorbar.set_label(f"{sections.metric_label(metric)} (0 to 1)")
    figure.supxlabel("Diagonal (—): an encoder against itself, left blank.", fontsize=7)
    path = Path(path)
    figure.savefig(path, format="png", metadata={"Software": None})
    return path
