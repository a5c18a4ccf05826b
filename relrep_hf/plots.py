"""Figures for people who would rather look than read: stitching heatmaps and the
relative spaces of several encoders in one PCA projection.

Drawn on `matplotlib.figure.Figure` with the Agg canvas directly: no pyplot, no change to the
user's global matplotlib backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

DIAGONAL_NOTE = "Diagonal (—): an encoder against itself, not a stitching result, left blank."


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def stitching_heatmap(
    matrices: Mapping[str, Mapping[str, Mapping[str, float]]],
    encoders: Sequence[str],
    path: str | os.PathLike,
    *,
    metric: str = "recall@1",
    title: str = "Zero-shot retrieval between relative spaces",
    held_out: Sequence[str] = (),
) -> None:
    """One annotated heatmap per method (``{method: {"a->b": {metric: value}}}``): rows are the
    query encoder, columns the retrieved encoder; held-out encoders are marked with *."""
    labels = [f"{e}*" if e in held_out else e for e in encoders]
    figure = _figure(4.2 * len(matrices) + 1.2, 4.3)
    axes = figure.subplots(1, len(matrices), squeeze=False)[0]
    for ax, (method, pairs) in zip(axes, matrices.items(), strict=True):
        grid = torch.full((len(encoders), len(encoders)), float("nan"))
        for i, a in enumerate(encoders):
            for j, b in enumerate(encoders):
                if a != b and f"{a}->{b}" in pairs:
                    grid[i, j] = pairs[f"{a}->{b}"][metric]
        image = ax.imshow(grid.numpy(), vmin=0, vmax=1, cmap="viridis")
        for i in range(len(encoders)):
            for j in range(len(encoders)):
                value = grid[i, j].item()
                text = "—" if i == j else "" if value != value else f"{value:.2f}"
                color = "grey" if i == j else "white" if value < 0.6 else "black"
                ax.text(j, i, text, ha="center", va="center", color=color, fontsize=8)
        ax.set_xticks(range(len(encoders)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(encoders)), labels, fontsize=7)
        ax.set_title(method, fontsize=9)
        ax.set_xlabel("retrieved in (keys)", fontsize=8)
        ax.set_ylabel("query from", fontsize=8)
    colorbar = figure.colorbar(image, ax=list(axes), shrink=0.8)
    colorbar.set_label(_metric_label(metric), fontsize=8)
    figure.suptitle(title + (" (* held out of PARAM training)" if held_out else ""), fontsize=10)
    figure.supxlabel(DIAGONAL_NOTE, fontsize=7, color="dimgrey")  # laid out, never overlapping
    figure.savefig(path, bbox_inches="tight")


def relative_spaces_plot(
    spaces: Mapping[str, Mapping[str, Tensor]],
    labels: Tensor | None,
    path: str | os.PathLike,
    *,
    label_names: Mapping[int, str] | None = None,
    max_points: int = 600,
) -> None:
    """For each method (``{method: {encoder: relative [N, m]}}``, one column), the encoders'
    relative features in one shared 2-D PCA. The top panel colours points by encoder: aligned
    spaces overlap, misaligned ones fall apart. The bottom panel (when ``labels`` are given)
    colours the same points by class, named by ``label_names``."""
    rows = 1 if labels is None else 2
    figure = _figure(5.2 * len(spaces), 4.6 * rows)
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
        points = (centered @ v[:, :2]).view(len(names), n, 2)  # [E, n, 2]
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
                rows_of_c = points[:, classes == c].reshape(-1, 2)  # every encoder's rows
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
    figure.savefig(path, bbox_inches="tight")


def _metric_label(metric: str) -> str:
    """``recall@1`` -> ``Recall@1 (0 to 1)``, ``mrr`` -> ``MRR (0 to 1)``."""
    name = metric.upper() if metric == "mrr" else metric[:1].upper() + metric[1:]
    return f"{name} (0 to 1)"
