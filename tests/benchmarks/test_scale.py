"""The scale benchmark's code path, at tiny sizes in this process (the benchmark itself is not a
test: ``python -m benchmarks scale``)."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch

from benchmarks.perf import scale as bench_scale
from relrep_hf import Statistics


@pytest.mark.slow
def test_scale_benchmark_code_path(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_scale, "RESULTS", tmp_path / "results")
    assert all(s > 0 for s in bench_scale._projection_seconds([10, 100], repeats=1))
    base = bench_scale.ParamSize(rows=200, dim=8, support=50, anchors=4, encoders=2, batch_size=64)
    rows = bench_scale.param_curves(base, {"rows": [100, 200], "encoders": [1, 2]}, repeats=1)
    assert [r["ratio"] for r in rows][::2] == [1.0, 1.0] and all(r["value"] > 0 for r in rows)
    files = bench_scale.write_arrow_shards(tmp_path, 2, 300)
    streamed = bench_scale.streamed_statistics(files, batch_size=128)
    written = np.concatenate(
        [datasets.Dataset.from_file(f).with_format("numpy")["embedding"] for f in files]
    )
    expected = Statistics.from_embeddings(torch.from_numpy(written))
    assert streamed.count == 600
    torch.testing.assert_close(streamed.mean, expected.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(streamed.scatter, expected.scatter, rtol=1e-10, atol=1e-8)
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        "scale_param_epoch_vs_N.png",
        "scale_param_epoch_vs_encoders.png",
    ]
