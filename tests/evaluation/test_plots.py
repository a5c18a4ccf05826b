import math
import sys

import matplotlib
import pytest
import torch

from relrep_hf.evaluation.plots import (
    heatmap,
    pairs_matrix,
    relative_spaces_plot,
    stitching_heatmap,
)

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_heatmaps_are_pngs_and_leave_the_global_backend_alone(tmp_path):
    before, had_pyplot = matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules
    path = heatmap(
        {"one": [[0.1, 0.9], [0.5, float("nan")]], "two": torch.eye(2)},
        ["a", "b"],
        tmp_path / "h.png",
        title="t",
        colorbar_label="F1",
        blank_diagonal=False,
        scale=100,
        digits=0,
    )
    assert path.read_bytes()[:8] == PNG
    pairs = {"a->b": {"recall@1": 0.25}, "b->a": {"recall@1": 1.0}, "b->c": {"mrr": 0.5}}
    stitching_heatmap({"PARAM-WIP": pairs}, ["a", "b"], tmp_path / "s.png", held_out=["b"])
    spaces = {"m": {"a": torch.randn(30, 4), "b": torch.randn(30, 4)}}
    relative_spaces_plot(spaces, torch.arange(30) % 3, tmp_path / "r.png")
    assert all((tmp_path / n).read_bytes()[:8] == PNG for n in ("s.png", "r.png"))
    assert matplotlib.get_backend() == before
    assert had_pyplot or "matplotlib.pyplot" not in sys.modules  # drawn without pyplot


def test_pairs_matrix_places_each_pair_and_leaves_the_rest_nan():
    pairs = {"a->b": {"recall@1": 0.25}, "b->a": {"recall@1": 1.0}, "b->c": {"mrr": 0.5}}
    grid = pairs_matrix(pairs, ["a", "b", "c"], "recall@1")
    assert grid[0, 1] == 0.25 and grid[1, 0] == 1.0
    assert sum(math.isnan(v) for v in grid.flatten().tolist()) == 7


def test_a_matrix_of_the_wrong_shape_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"Heatmap 'x' is \(2, 3\), expected \(2, 2\)"):
        heatmap({"x": torch.zeros(2, 3)}, ["a", "b"], tmp_path / "h.png")
