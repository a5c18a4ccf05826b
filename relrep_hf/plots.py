"""Figures for people who would rather look than read: stitching heatmaps and the
relative spaces of several encoders in one PCA projection. Headless (Agg)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    plt = _pyplot()
    labels = [f"{e}*" if e in held_out else e for e in encoders]
    fig, axes = plt.subplots(
        1,
        len(matrices),
        figsize=(4.2 * len(matrices) + 1, 3.8),
        squeeze=False,
        layout="constrained",
    )
    for ax, (method, pairs) in zip(axes[0], matrices.items(), strict=True):
        grid = torch.full((len(encoders), len(encoders)), float("nan"))
        for i, a in enumerate(encoders):
            for j, b in enumerate(encoders):
                if a != b and f"{a}->{b}" in pairs:
                    grid[i, j] = pairs[f"{a}->{b}"][metric]
        image = ax.imshow(grid.numpy(), vmin=0, vmax=1, cmap="viridis")
        for i in range(len(encoders)):
            for j in range(len(encoders)):
                if not torch.isnan(grid[i, j]):
                    value = grid[i, j].item()
                    ax.text(
                        j,
                        i,
                        f"{value:.2f}",
                        ha="center",
                        va="center",
                        color="white" if value < 0.6 else "black",
                        fontsize=8,
                    )
        ax.set_xticks(range(len(encoders)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(encoders)), labels, fontsize=7)
        ax.set_title(f"{method} ({metric})", fontsize=9)
        ax.set_xlabel("retrieved in", fontsize=8)
        ax.set_ylabel("query from", fontsize=8)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
    fig.suptitle(title + (" (* held out of training)" if held_out else ""), fontsize=10)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def relative_spaces_plot(
    spaces: Mapping[str, Mapping[str, Tensor]],
    labels: Tensor | None,
    path: str | os.PathLike,
    *,
    max_points: int = 600,
) -> None:
    """For each method (``{method: {encoder: relative [N, m]}}``), the encoders' relative
    features in one shared 2-D PCA: aligned spaces overlap, misaligned ones do not."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(spaces), figsize=(5 * len(spaces), 4.5), squeeze=False)
    markers = "os^Dv<>ph*"
    for ax, (method, relatives) in zip(axes[0], spaces.items(), strict=True):
        names = list(relatives)
        n = min(max_points, len(next(iter(relatives.values()))))
        # each encoder's rows standardised, then one PCA for all (shape [E * n, m])
        stacked = torch.cat(
            [torch.nn.functional.normalize(relatives[e][:n].float(), dim=1) for e in names]
        )
        centered = stacked - stacked.mean(dim=0)
        _, _, v = torch.pca_lowrank(centered, q=2, center=False)
        points = (centered @ v[:, :2]).view(len(names), n, 2)
        for k, name in enumerate(names):
            colors = labels[:n].numpy() if labels is not None else None
            ax.scatter(
                points[k, :, 0],
                points[k, :, 1],
                c=colors,
                cmap="tab10",
                s=6,
                alpha=0.5,
                marker=markers[k % len(markers)],
                label=name,
            )
        ax.set_title(f"{method}: relative spaces (shared PCA)", fontsize=9)
        ax.legend(fontsize=6, markerscale=2)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
