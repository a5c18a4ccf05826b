"""The shrinkage selector with its folds' eigenproblems in float64 against float32.

For every group, K and held-out encoder of the fit-size sweep (``quality --part sweep
--every-held-out``'s settings: the first K rows, m = 300), runs
`relrep_hf.functional.regularization.cross_validated_shrinkage` twice, with ``SELECTION_DTYPE``
float64 and float32, and prints per group how often the two choose the same shrinkage, the
largest difference between their scores and the two selection times.

``OMP_NUM_THREADS=1 python -m benchmarks selection_precision [GROUP ...]``
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence

import torch

import relrep_hf.functional.regularization as regularization
from benchmarks.spaces.groups import load_group
from benchmarks.studies.k_sweep import KS, TEST_ROWS


def compare(group: str, num_anchors: int = 300) -> None:
    spaces = {name: torch.as_tensor(x) for name, x in load_group(group).embeddings.items()}
    n = len(next(iter(spaces.values())))
    ks = sorted({min(k, n - TEST_ROWS) for k in KS})
    same = total = 0
    largest = 0.0
    seconds = {torch.float64: 0.0, torch.float32: 0.0}
    for k in ks:
        for held_out in spaces:
            fit = [x[:k] for name, x in spaces.items() if name != held_out]
            chosen = {}
            for dtype in seconds:
                regularization.SELECTION_DTYPE = dtype
                start = time.perf_counter()
                chosen[dtype] = regularization.cross_validated_shrinkage(
                    fit, torch.arange(k), num_anchors
                )
                seconds[dtype] += time.perf_counter() - start
            double, single = chosen[torch.float64], chosen[torch.float32]
            total += 1
            same += double.shrinkage == single.shrinkage
            common = double.scores.keys() & single.scores.keys()
            largest = max([largest, *(abs(double.scores[s] - single.scores[s]) for s in common)])
    regularization.SELECTION_DTYPE = torch.float32
    ratio = seconds[torch.float32] / seconds[torch.float64]
    print(
        f"{group} (K = {', '.join(map(str, ks))}; every encoder held out): the same choice "
        f"{same}/{total}, largest score difference {largest:.1e}, selection seconds float64 "
        f"{seconds[torch.float64]:.1f}, float32 {seconds[torch.float32]:.1f} ({ratio:.2f})",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``[GROUP ...]``, default every group but the affine one."""
    warnings.simplefilter("ignore")  # the cap's and thin statistics' warnings
    for name in argv or ("real", "minilm", "small_lms"):
        compare(name)
