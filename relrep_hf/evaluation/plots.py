"""Figures for people who would rather look than read: annotated heatmaps (stitching, retrieval)
and the relative spaces of several encoders in one PCA projection.

Drawn on `matplotlib.figure.Figure` with the Agg canvas directly (`new_figure`): no pyplot, no
change to the user's global matplotlib backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from relrep_hf.functional.markdown_tables import metric_label

DIAGONAL_NOTE = "Diagonal (—): an encoder against itself, not a stitching result, left blank."


def new_figure(width: float, height: float, *, dpi: int = 120) -> Any:
    """A `matplotlib.figure.Figure` on its own Agg canvas: draw on it and `save` it; no pyplot,
    no change to the global backend, nothing to close."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save(figure: Any, path: str | os.PathLike) -> Path:
    """Write ``figure`` as a PNG without a software/version stamp (same drawing, same bytes)."""
    path = Path(path)
    figure.savefig(path, format="png", bbox_inches="tight", metadata={"Software": None})
    return path


def heatmap(
    matrices: Mapping[str, Tensor | Sequence[Sequence[float]]],
    labels: Sequence[str],
    path: str | os.PathLike,
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    colorbar_label: str = "",
    blank_diagonal: bool = True,
    scale: float = 1.0,
    digits: int = 2,
) -> Path:
    """One annotated heatmap panel per entry of ``matrices`` (``{panel title: [n, n] values in
    [0, 1]}``, NaN where not measured), rows and columns named by ``labels``, one colour bar.

    Each cell shows ``value * scale`` to ``digits`` decimals. ``blank_diagonal`` marks the
    diagonal "—" (an encoder against itself is no stitching result) and says so under the
    figure. The one heatmap of the library: cards, the pipeline and the scripts draw with it.
    """
    n = len(labels)
    figure = new_figure(4.2 * len(matrices) + 1.2, 1.9 + 0.6 * max(n, 4))
    axes = figure.subplots(1, len(matrices), squeeze=False)[0]
    for ax, (panel, matrix) in zip(axes, matrices.items(), strict=True):
        grid = torch.as_tensor(matrix, dtype=torch.float64)
        if grid.shape != (n, n):
            raise ValueError(f"Heatmap {panel!r} is {tuple(grid.shape)}, expected ({n}, {n}).")
        image = ax.imshow(grid.numpy(), vmin=0, vmax=1, cmap="viridis")
        for i in range(n):
            for j in range(n):
                value = grid[i, j].item()
                if blank_diagonal and i == j:
                    ax.text(j, i, "—", ha="center", va="center", color="grey", fontsize=8)
                elif value == value:  # not NaN
                    color = "white" if value < 0.6 else "black"
                    text = f"{value * scale:.{digits}f}"
                    ax.text(j, i, text, ha="center", va="center", color=color, fontsize=8)
        ax.set_xticks(range(n), labels, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
    colorbar = figure.colorbar(image, ax=list(axes), shrink=0.8)
    colorbar.set_label(colorbar_label, fontsize=8)
    if title:
        figure.suptitle(title, fontsize=10)
    if blank_diagonal:
        figure.supxlabel(DIAGONAL_NOTE, fontsize=7, color="dimgrey")  # laid out, not overlapping
    return save(figure, path)


def pairs_matrix(
    pairs: Mapping[str, Mapping[str, Any]], encoders: Sequence[str], metric: str
) -> Tensor:
    """``{"a->b": {metric: value}}`` as an ``[n, n]`` float64 matrix in the order of
    ``encoders`` (row a, column b), NaN where a pair or its value is missing."""
    index = {name: i for i, name in enumerate(encoders)}
    grid = torch.full((len(encoders), len(encoders)), float("nan"), dtype=torch.float64)
    for pair, values in pairs.items():
        a, _, b = pair.partition("->")
        value = values.get(metric)
        if a in index and b in index and isinstance(value, int | float):
            grid[index[a], index[b]] = float(value)
    return grid


def stitching_heatmap(
    matrices: Mapping[str, Mapping[str, Mapping[str, float]]],
    encoders: Sequence[str],
    path: str | os.PathLike,
    *,
    metric: str = "recall@1",
    title: str = "Zero-shot retrieval between relative spaces",
    held_out: Sequence[str] = (),
) -> Path:
    """Retrieval between encoders, one panel per method (``{method: {"a->b": {metric: ..}}}``):
    rows are the query encoder, columns the retrieved encoder; held-out encoders marked *."""
    return heatmap(
        {method: pairs_matrix(pairs, encoders, metric) for method, pairs in matrices.items()},
        [f"{e}*" if e in held_out else e for e in encoders],
        path,
        title=title + (" (* held out of fitting)" if held_out else ""),
        xlabel="retrieved in (keys)",
        ylabel="query from",
        colorbar_label=f"{metric_label(metric)} (0 to 1)",
    )


def relative_spaces_plot(
    spaces: Mapping[str, Mapping[str, Tensor]],
    labels: Tensor | None,
    path: str | os.PathLike,
    *,
    label_names: Mapping[int, str] | None = None,
    max_points: int = 600,
) -> Path:
    """For each method (``{method: {encoder: relative [N, m]}}``, one column), the encoders'
    relative features in one shared 2-D PCA. The top panel colours points by encoder: aligned
    spaces overlap, misaligned ones fall apart. The bottom panel (when ``labels`` are given)
    colours the same points by class, named by ``label_names``."""
    rows = 1 if labels is None else 2
    figure = new_figure(5.2 * len(spaces), 4.6 * rows)
    grid = figure.subplots(rows, len(spaces), squeeze=False)
    for column, (method, relatives) in enumerate(spaces.items()):
        names = list(relatives)
        n = min(max_points, len(next(iter(relatives.values()))))
        # each encoder's rows L2-normalised, then one PCA for all (shape [E * n, m])
        stacked = torch.cat(
            [torch.nn.functional.normalize(relatives[e][:n].float(), dim=1) for e in names]
        )
        centered = stacked - stacked.mean(dim=0)
        _, singular, v = torch.pca_lowrank(centered, q=2, center=False, niter=4)
        share = (singular[:2] ** 2 / centered.pow(2).sum()).tolist()
        # [E, n, 2], as NumPy: matplotlib converts a tensor slowly (it iterates over it)
        points = (centered @ v[:, :2]).view(len(names), n, 2).cpu().numpy()
        encoder_axes = grid[0, column]
        for k, name in enumerate(names):
            encoder_axes.scatter(
                points[k, :, 0], points[k, :, 1], s=5, alpha=0.45, color=f"C{k}", label=name
            )
        encoder_axes.set_title(f"{method}: colour = encoder", fontsize=9)
        encoder_axes.legend(fontsize=7, markerscale=2.5, title="encoder", title_fontsize=7)
        panels = [encoder_axes]
        if labels is not None:
            topic_axes = grid[1, column]
            classes = labels[:n]
            for c in sorted(set(classes.tolist())):
                of_c = (classes == c).cpu().numpy()
                rows_of_c = points[:, of_c].reshape(-1, 2)  # every encoder's rows of class c
                name = label_names.get(c, str(c)) if label_names else str(c)
                topic_axes.scatter(
                    rows_of_c[:, 0], rows_of_c[:, 1], s=5, alpha=0.45, color=f"C{c}", label=name
                )
            topic_axes.set_title(f"{method}: colour = class (all encoders)", fontsize=9)
            topic_axes.legend(fontsize=7, markerscale=2.5, title="class", title_fontsize=7)
            panels.append(topic_axes)
        for ax in panels:
            ax.set_xlabel(f"PC 1 ({share[0]:.0%} of variance)", fontsize=8)
            ax.set_ylabel(f"PC 2 ({share[1]:.0%} of variance)", fontsize=8)
            ax.tick_params(labelsize=7)
    figure.suptitle(
        f"Relative spaces of {len(names)} encoders in one shared PCA per method "
        f"({n} held-out rows each)",
        fontsize=10,
    )
    return save(figure, path)
