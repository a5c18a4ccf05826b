"""The quality benchmark's code path, on tiny synthetic spaces (the benchmark is not a test)."""

from types import SimpleNamespace

import pytest

from benchmarks.studies import k_sweep, quality
from tests.fixtures.synthetic import affine_spaces


@pytest.mark.slow
def test_quality_benchmark_code_path(tmp_path, monkeypatch):
    spaces = affine_spaces(("e0", "e1", "e2"), n=400, d=24)  # rank >= the sweep's m
    group = SimpleNamespace(name="affine", texts=None, labels=None, embeddings=spaces)
    gcca = quality.GCCA
    only = ["Random-Cos", "PARAM-WIP", "Full support", "Shared linear (shrinkage 0.15)", gcca,
            "Shared linear + InfoNCE"]  # fmt: skip
    result = quality.run_group(group, quick=True, only=only)
    assert list(result["methods"]) == only
    assert result["rows"] == {"support": 60, "fit": 150, "test": 50}  # --quick: 200 rows
    assert result["held_out"] == ["e0"]  # --quick holds the first space out
    for method in ("Shared linear (shrinkage 0.15)", gcca):
        assert list(result["methods"][method]) == list(quality.QUICK["sweep"])
    assert list(result["methods"]["Full support"]) == [60]
    for by_m in result["methods"].values():
        for metrics in by_m.values():
            assert 0.0 <= metrics["recall@1"] <= metrics["recall@5"] <= 1.0
    # on affine copies of one space, full support is exact (WIP is affine invariant up to
    # shrinkage) and far above random cosine anchors
    assert quality.at_main(result, "Full support")["recall@1"] > 0.9
    assert quality.at_main(result, "Random-Cos")["recall@1"] < 0.9
    # the support of the K = N method is every fit row, and it is exact here too
    assert quality.at_main(result, gcca)["recall@1"] > 0.9
    quality.plot([result], tmp_path / "quality.png")
    assert (tmp_path / "quality.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_fit_size_sweep_never_raises_and_plots(tmp_path):
    """The sweep on spaces whose rank (2 x 24 dims) is below m = 100: capped, never refused;
    every K reports the default, each fixed shrinkage, the best of them, OAS and the affine
    map; the plot is written."""
    spaces = affine_spaces(("e0", "e1", "e2"), n=400, d=24)
    group = SimpleNamespace(name="affine", texts=None, labels=None, embeddings=spaces)
    sweep = k_sweep.sweep_group(group, ["e2"], quick=True, num_anchors=100)
    assert list(sweep) == list(k_sweep.QUICK_KS)
    for r in sweep.values():  # --quick: the two fixed shrinkages the table prints
        assert sorted(float(m[6:]) for m in r if m.startswith("fixed ")) == [0.0, 0.15]
        assert r["best fixed"]["recall@1"] == max(
            r[f"fixed {s}"]["recall@1"] for s in k_sweep.QUICK_FIXED
        )
        assert 0.0 <= r["default"]["recall@1"] <= 1.0 and "OAS" in r
        assert r["default"]["shrinkage"] in shrinkage_grid()
    k_sweep.plot_sweep([{"group": "affine", "k_sweep": sweep}], tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def shrinkage_grid() -> tuple[float, ...]:
    from relrep_hf.utils.defaults import SHRINKAGE_GRID

    return SHRINKAGE_GRID
