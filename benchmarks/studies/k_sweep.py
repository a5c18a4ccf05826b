"""The fit-size sweep of the quality benchmark: does the default hold at every K?

For each group and each number of fit rows K (support = every fit row, the default's K = N),
each held-out encoder of `quality.HELD_OUT` (``--quick``: the first encoder), fit on the
others' first K rows and retrieve the last test rows into the held-out encoder (Recall@1, mean
over ordered pairs, then held-out encoders), for:

- the library's default, ``AnchorSet.shared_linear`` with no shrinkage argument (chosen from
  the fit rows, `relrep_hf.functional.regularization`); its fit time includes the selection;
- the same map at every fixed shrinkage of ``FIXED`` (exact whitening is 0): the best of them
  is "the best fixed shrinkage in hindsight", chosen on the test rows;
- the analytic OAS shrinkage of each encoder's fit rows (Chen et al. 2010), the mean over the
  training encoders as the map's shrinkage (a selector that lost, docs/quality.md);
- PARAM-WIP, the paper's `ParamTrainer` at its defaults, on the same fit rows (support: the
  first min(K, 1,000), as the paper samples it);
- a supervised affine least-squares map from each other encoder into the held-out one, fitted
  on the same K rows of both (it sees the held-out encoder's rows; the anchors never do).
"""

from __future__ import annotations

import os
import time
import warnings
from statistics import mean

import torch

from benchmarks.common import Table
from relrep_hf import AnchorSet, RelativeProjector, Statistics
from relrep_hf.functional import fit_affine, oas_shrinkage, retrieval_metrics
from relrep_hf.utils.defaults import SHRINKAGE_GRID

FIXED = tuple(sorted({*SHRINKAGE_GRID, 0.15}))  # the selector's grid and the paper's 0.15
KS = (500, 1000, 2000, 4000)
QUICK_KS = (100,)  # --quick: one K, a crash check of every method
# --quick: the two fixed shrinkages the table prints (exact whitening and the paper's 0.15); the
# other grid points run the same fit (each a fit and an onboarding of every space)
QUICK_FIXED = (0.0, 0.15)
TEST_ROWS = 1000
PARAM_SUPPORT = 1000


def relative_features(anchor_set, spaces, support_rows, fit_rows, test_rows) -> dict:
    """Each space's test rows in ``anchor_set``'s relative coordinates, every encoder onboarded
    from its own support rows with statistics from its fit rows."""
    relative = {}
    for name, space in spaces.items():
        projector = RelativeProjector.from_anchor_set(
            anchor_set, space[support_rows], Statistics.from_embeddings(space[fit_rows])
        )
        with torch.no_grad():
            relative[name] = projector(space[test_rows])
    return relative


def _retrieval(anchor_set, spaces, held_out, support_rows, fit_rows, test_rows) -> float:
    relative = relative_features(anchor_set, spaces, support_rows, fit_rows, test_rows)
    return mean(
        retrieval_metrics(relative[o], relative[held_out], ks=(1,))["recall@1"]
        for o in spaces
        if o != held_out
    )


def _affine(spaces, held_out, fit_rows, test_rows) -> float:
    target = spaces[held_out]
    scores = []
    for name, space in spaces.items():
        if name == held_out:
            continue
        translate = fit_affine(space[fit_rows].double(), target[fit_rows].double())
        with torch.no_grad():
            predicted = translate(space[test_rows].double())
        scores.append(retrieval_metrics(predicted, target[test_rows], ks=(1,))["recall@1"])
    return mean(scores)


def _shared_linear(spaces, held_out, fit_rows, test_rows, num_anchors, **kwargs):
    """(anchor set, R@1, fit seconds) of the closed form on every encoder but ``held_out``."""
    train = {name: x[fit_rows] for name, x in spaces.items() if name != held_out}
    support = [{"index": int(i)} for i in fit_rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cap's and thin statistics' warnings
        start = time.perf_counter()
        anchor_set = AnchorSet.shared_linear(
            support, train, num_anchors, support_rows=fit_rows, **kwargs
        )
        seconds = time.perf_counter() - start
        r1 = _retrieval(anchor_set, spaces, held_out, fit_rows, fit_rows, test_rows)
    return anchor_set, r1, seconds


def _fold(
    spaces, held_out, fit_rows, test_rows, num_anchors, param_fit, fixed=FIXED
) -> dict[str, tuple]:
    """``{method: (R@1, fit seconds)}`` for one held-out encoder and one K (each shrinkage of
    ``fixed`` a method); and the default's chosen shrinkage under ``"chosen"``."""
    out = {}
    anchor_set, r1, seconds = _shared_linear(spaces, held_out, fit_rows, test_rows, num_anchors)
    out["default"], out["chosen"] = (r1, seconds), (anchor_set.shrinkage, 0.0)
    for shrinkage in fixed:
        _, r1, seconds = _shared_linear(
            spaces, held_out, fit_rows, test_rows, num_anchors, shrinkage=shrinkage
        )
        out[f"fixed {shrinkage}"] = (r1, seconds)
    train = [x[fit_rows] for name, x in spaces.items() if name != held_out]
    oas = mean(oas_shrinkage(Statistics.from_embeddings(x)) for x in train)
    _, r1, seconds = _shared_linear(
        spaces, held_out, fit_rows, test_rows, num_anchors, shrinkage=round(oas, 6)
    )
    out["OAS"] = (r1, seconds)
    out["affine least squares"] = (_affine(spaces, held_out, fit_rows, test_rows), 0.0)
    if param_fit is not None:
        support_rows = fit_rows[: min(len(fit_rows), PARAM_SUPPORT)]
        train_spaces = {name: x[fit_rows] for name, x in spaces.items() if name != held_out}
        start = time.perf_counter()
        anchor_set = param_fit(
            [{"index": int(i)} for i in support_rows], train_spaces, support_rows, num_anchors
        )
        seconds = time.perf_counter() - start
        r1 = _retrieval(anchor_set, spaces, held_out, support_rows, fit_rows, test_rows)
        out["PARAM-WIP"] = (r1, seconds)
    return out


def sweep_group(group, held_outs, *, quick: bool, num_anchors: int, param_fit=None) -> dict:
    """``{K: {method: {"recall@1", "fit_seconds"}}}`` for one group (module docstring)."""
    spaces = group.embeddings
    n = len(next(iter(spaces.values())))
    test = min(TEST_ROWS, n // 4)
    test_rows = torch.arange(n - test, n)
    ks = [k for k in (QUICK_KS if quick else KS) if k <= n - test] or [n - test]
    grid = QUICK_FIXED if quick else FIXED
    if not quick and n - test not in ks and n - test < max(KS):
        ks.append(n - test)  # the group's every fit row
    out = {}
    table = _sweep_table(group.name, held_outs, param_fit is not None)
    for k in ks:
        folds = [
            _fold(spaces, h, torch.arange(k), test_rows, num_anchors, param_fit, grid)
            for h in held_outs
        ]
        by_method = {
            method: {
                "recall@1": mean(f[method][0] for f in folds),
                "fit_seconds": sum(f[method][1] for f in folds),
            }
            for method in folds[0]
            if method != "chosen"
        }
        chosen = [f["chosen"][0] for f in folds]
        by_method["default"].update(shrinkage=mean(chosen), shrinkage_per_fold=chosen)
        fixed = {s: by_method[f"fixed {s}"]["recall@1"] for s in grid}
        best = max(fixed, key=fixed.get)
        by_method["best fixed"] = {"recall@1": fixed[best], "shrinkage": best}
        out[k] = by_method
        _add_k(table, k, by_method)
    return out


def _sweep_table(name: str, held_outs: list[str], with_param: bool) -> Table:
    """One row per K as it is measured: R@1 of the default (its chosen shrinkage), the best
    fixed shrinkage in hindsight, the baselines, and the fit times."""
    columns = [("K", 6, "d"), ("default", 8, ".3f"), ("chosen", 7, ".3g"), ("best", 6, ".3f"),
               ("at", 6, ""), ("exact", 6, ".3f"), ("0.15", 6, ".3f"), ("OAS", 6, ".3f"),
               ("affineLS", 8, ".3f")]  # fmt: skip
    if with_param:
        columns += [("PARAM", 6, ".3f"), ("fit s", 7, ".1f"), ("PARAM s", 7, ".1f"),
                    ("ratio", 6, ".3f")]  # fmt: skip
    title = f"{name}: fit-size sweep (R@1), held out {', '.join(held_outs)}"
    return Table(f"{title}; load {os.getloadavg()[0]:.1f}", columns)


def _add_k(table: Table, k: int, r: dict) -> None:
    default, best = r["default"], r["best fixed"]
    values = [k, default["recall@1"], default["shrinkage"], best["recall@1"], best["shrinkage"],
              r["fixed 0.0"]["recall@1"], r["fixed 0.15"]["recall@1"], r["OAS"]["recall@1"],
              r["affine least squares"]["recall@1"]]  # fmt: skip
    if "PARAM-WIP" in r:
        param = r["PARAM-WIP"]
        seconds = (default["fit_seconds"], param["fit_seconds"])
        values += [param["recall@1"], *seconds, seconds[0] / seconds[1]]
    table.add(*values)


def label_recall_panel(ax, title: str, xlabel: str) -> None:
    """A panel of Recall@1 into the held-out encoder: its title, axis labels and grid."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("Recall@1 into the held-out encoder")
    ax.grid(alpha=0.3)


def plot_sweep(results: list[dict], path) -> None:
    """One panel per group: R@1 against fixed shrinkage, one curve per K, the default's point
    (its mean chosen shrinkage, its R@1) on each."""
    from matplotlib.figure import Figure

    sweeps = [r for r in results if r.get("k_sweep")]
    if not sweeps:
        return
    fig = Figure(figsize=(5 * len(sweeps), 4))
    for index, result in enumerate(sweeps):
        ax = fig.add_subplot(1, len(sweeps), index + 1)
        for k, r in result["k_sweep"].items():
            grid = [s for s in FIXED if f"fixed {s}" in r]  # --quick: QUICK_FIXED
            curve = [r[f"fixed {s}"]["recall@1"] for s in grid]
            (line,) = ax.plot(grid, curve, marker=".", label=f"K={k}")
            ax.plot(
                [r["default"]["shrinkage"]],
                [r["default"]["recall@1"]],
                marker="*",
                markersize=14,
                color=line.get_color(),
                markeredgecolor="black",
            )
        ax.set_xscale("symlog", linthresh=1e-3)  # 0 and the small LMs' 0.001-0.01 stay apart
        label_recall_panel(ax, f"{result['group']} (star: the default)", "fixed shrinkage (symlog)")
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
