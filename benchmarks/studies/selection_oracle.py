"""What the shrinkage selector could know: per fixed shrinkage, R@1 among the training encoders
and R@1 into the held-out one, both on the test rows (in hindsight).

The selector sees only the training encoders' fit rows. If even the training encoders' own
test-row retrieval (an oracle no selector has) peaks at the value the selector chose while the
held-out encoder peaks elsewhere, no rule that reads the training encoders can find the
held-out encoder's best. The sweep's settings (`quality --part sweep`): the first K rows fit
(K = N), the last 1,000 tested, m = 300.

``OMP_NUM_THREADS=1 python -m benchmarks selection_oracle [GROUP HELD_OUT K ...]``
(default: ``small_lms llama-w128-s2:last 500 2000``)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from statistics import mean

import torch

from benchmarks.spaces.groups import load_group
from benchmarks.studies.k_sweep import FIXED, TEST_ROWS, relative_features
from relrep_hf import AnchorSet
from relrep_hf.functional import retrieval_metrics


def _recall(a: torch.Tensor, b: torch.Tensor) -> float:
    return retrieval_metrics(a, b, ks=(1,))["recall@1"]


def oracle(group: str, held_out: str, ks: list[int], num_anchors: int = 300) -> None:
    spaces = {name: torch.as_tensor(x) for name, x in load_group(group).embeddings.items()}
    if held_out not in spaces:
        raise SystemExit(f"No space {held_out!r} in group {group!r}. Valid: {', '.join(spaces)}.")
    n = len(next(iter(spaces.values())))
    if not all(0 < k <= n - TEST_ROWS for k in ks):
        raise SystemExit(f"Each K must lie in 1..{n - TEST_ROWS} (the last {TEST_ROWS} rows test).")
    test = torch.arange(n - TEST_ROWS, n)
    training = [name for name in spaces if name != held_out]
    for k in ks:
        fit = torch.arange(k)
        among, into = {}, {}
        for shrinkage in FIXED:
            anchor_set = AnchorSet.shared_linear(
                [{"index": i} for i in range(k)], {m: spaces[m][fit] for m in training},
                num_anchors, support_rows=fit, shrinkage=shrinkage,
            )  # fmt: skip
            relative = relative_features(anchor_set, spaces, fit, fit, test)
            among[shrinkage] = mean(
                _recall(relative[a], relative[b]) for a in training for b in training if a != b
            )
            into[shrinkage] = mean(_recall(relative[o], relative[held_out]) for o in training)
        best_among, best_into = max(among, key=among.get), max(into, key=into.get)
        print(
            f"{group} K={k}: among the training encoders best {best_among} ({among[best_among]:.3f}); "
            f"into {held_out} best {best_into} ({into[best_into]:.3f})"
        )
        print("  among", {s: round(v, 3) for s, v in among.items()})
        print("  into ", {s: round(v, 3) for s, v in into.items()}, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``[GROUP HELD_OUT K ...]``, default ``small_lms llama-w128-s2:last 500 2000``."""
    warnings.simplefilter("ignore")  # the cap's and thin statistics' warnings
    args = list(argv or ()) or ["small_lms", "llama-w128-s2:last", "500", "2000"]
    oracle(args[0], args[1], [int(k) for k in args[2:]])
