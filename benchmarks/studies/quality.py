"""Zero-shot alignment quality: the paper's Algorithm 1 on groups of real spaces, every method.

For each group of row-aligned spaces and each held-out encoder: fit every method on the other
encoders' fit rows (the held-out one is never seen), onboard every encoder with
`RelativeProjector.from_anchor_set` (no gradient step), and retrieve each test row of every
other encoder's relative features among the held-out encoder's (cosine). Figures are
Recall@1, Recall@5 and MRR, the mean over ordered pairs into the held-out encoder and over
held-out encoders. Every method runs through the library's public API; all share one support
set (the first K = 1,000 fit rows), except the methods marked "K = N", whose support is every
fit row (the anchor count m stays the same; K is free). PARAM-WIP is the library's
`ParamTrainer` with the paper's defaults. To keep the whole benchmark under 20 minutes on 2
cores, each group holds out the spaces of ``HELD_OUT`` only, for every method alike.
``DEFAULT_METHODS`` run by default; the others (``--method``) were measured once and are
recorded in docs/quality.md. Writes ``results/quality.json`` and ``results/quality.png``.
"""

from __future__ import annotations

import json
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import mean

import torch

from benchmarks.common import RESULTS, Table, announce_skips, row, unavailable, warnings_once
from benchmarks.spaces.groups import GROUPS, group_needs, load_group
from benchmarks.studies.k_sweep import label_recall_panel, plot_sweep, sweep_group
from relrep_hf import AnchorSet, ParamTrainer, ParamTrainingArguments, RelativeProjector, Statistics
from relrep_hf.anchors.shared_linear.trainer import fine_tune_shared_linear
from relrep_hf.functional import retrieval_metrics

NUM_ANCHORS = 300
SWEEP = (25, 50, 100, 200, 300)
PARAM_EPOCHS = 95  # the paper's default (fewer epochs leave PARAM far from converged here)
PARTS = ("table", "sweep")
# --quick: a crash check of every method and part on the smallest sizes that run them (one
# held-out space a group, 200 rows, one m: each m runs the same fit), in seconds; PARAM in the
# first group's sweep only (the same fit as the table's); its figures are not the study's.
QUICK = {"num_anchors": 20, "sweep": (20,), "param_epochs": 2, "support": 60, "rows": 200}
PAPER_SHRINKAGE = 0.15  # the paper's (Table 5), for the shared linear map as first shipped
# The held-out spaces (every method alike): one per group, two for the small LMs (a GPT-2 and a
# Llama, one pooling each); PARAM at 95 epochs is 2-5 minutes a fold on 2 loaded cores.
HELD_OUT = {
    "real": ("e5-small", "smollm2:last"),  # a BERT-like sentence encoder and a decoder LM
    "minilm": ("minilm-cls-L-1",),
    "small_lms": ("gpt2-w192-s1:mean", "llama-w128-s2:last"),  # a GPT-2 and a Llama
    "affine": ("AE4",),
}  # fmt: skip
# The sweep fits PARAM at every K: one held-out space per group keeps it under 30 minutes on 2
# loaded cores (the real group's hardest to onboard: a decoder's last token).
SWEEP_HELD_OUT = {"real": ("smollm2:last",), "small_lms": ("llama-w128-s2:last",)}
GCCA = "Shared linear (K = N, default)"  # the library's default: shrinkage from the data
GCCA_EXACT = "Shared linear (K = N, exact whitening)"
DEFAULT_METHODS = (
    "Random-Cos",
    "Random-WIP",
    "FPS-WIP",
    "PARAM-WIP",
    "Full support",
    "Shared linear (shrinkage 0.15)",
    "Shared linear (exact whitening)",
    GCCA_EXACT,
    GCCA,
)

# method -> (fit(support, fit_embeddings, support_rows, m) -> AnchorSet, similarity, has_m)
Fit = Callable[[list, dict, torch.Tensor, int], AnchorSet]


def _support_of(fit, rows):
    return [space[rows] for space in fit.values()]


def _param(epochs: int) -> Fit:
    def fit_param(support, fit, rows, m):
        with tempfile.TemporaryDirectory() as folder:
            args = ParamTrainingArguments(
                folder, num_anchors=m, num_train_epochs=epochs, save_strategy="no",
                disable_tqdm=True,
            )  # fmt: skip
            return ParamTrainer(args, fit, support_indices=rows).train()

    return fit_param


def _fine_tuned(support, fit, rows, m):
    closed = AnchorSet.shared_linear(support, fit, m, support_rows=rows)
    return fine_tune_shared_linear(closed, fit, support_rows=rows)


def _shared(**kwargs) -> Fit:
    return lambda s, f, r, m: AnchorSet.shared_linear(s, f, m, support_rows=r, **kwargs)


def methods(param_epochs: int) -> dict[str, tuple[Fit, str, bool]]:
    """The methods compared: name -> (fit, similarity, whether m is free)."""
    return {
        "Random-Cos": (lambda s, f, r, m: AnchorSet.random(s, m), "cosine", True),
        "Random-WIP": (lambda s, f, r, m: AnchorSet.random(s, m), "wip", True),
        "FPS-WIP": (
            lambda s, f, r, m: AnchorSet.farthest_point(s, _support_of(f, r), m),
            "wip",
            True,
        ),
        "k-means-WIP": (lambda s, f, r, m: AnchorSet.kmeans(s, _support_of(f, r), m), "wip", True),
        "PARAM-WIP": (_param(param_epochs), "wip", True),
        "Full support": (lambda s, f, r, m: AnchorSet.full_support(s), "wip", False),
        "Shared linear (shrinkage 0.15)": (_shared(shrinkage=PAPER_SHRINKAGE), "wip", True),
        "Shared linear (exact whitening)": (_shared(shrinkage=0.0), "wip", True),
        GCCA_EXACT: (_shared(shrinkage=0.0), "wip", True),
        GCCA: (_shared(), "wip", True),
        "Shared linear (encoder norm)": (
            _shared(shrinkage=PAPER_SHRINKAGE, normalization="encoder"),
            "wip",
            True,
        ),
        "Shared linear + InfoNCE": (_fine_tuned, "wip", True),
        "Shared linear (row norm)": (
            _shared(shrinkage=PAPER_SHRINKAGE, normalization="row"),
            "wip",
            True,
        ),
    }


def split(n: int, quick: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(support rows, fit rows, test rows): test is the last quarter (at most 1000 rows)."""
    if quick:
        n = min(n, QUICK["rows"])
    test = min(1000, n // 4)
    fit_rows = torch.arange(n - test)
    support = fit_rows[: min(1000, len(fit_rows)) if not quick else QUICK["support"]]
    return support, fit_rows, torch.arange(n - test, n)


def evaluate_fold(anchor_set, similarity, spaces, held_out, support_rows, fit_rows, test_rows):
    """Mean retrieval metrics of every other encoder into ``held_out``."""
    relative = {}
    for name, space in spaces.items():
        projector = RelativeProjector.from_anchor_set(
            anchor_set,
            space[support_rows],
            Statistics.from_embeddings(space[fit_rows]),
            similarity=similarity,
        )
        with torch.no_grad():
            relative[name] = projector(space[test_rows])
    pairs = [retrieval_metrics(relative[o], relative[held_out]) for o in spaces if o != held_out]
    return {key: mean(p[key] for p in pairs) for key in ("recall@1", "recall@5", "mrr")}


def held_out_spaces(group, quick: bool, table: dict = HELD_OUT) -> list[str]:
    """The group's held-out spaces: ``table``'s (unknown groups: all; ``--quick``: the first,
    one fold a method is the crash check)."""
    names = list(group.embeddings)
    if quick:
        return names[:1]
    chosen = [n for n in table.get(group.name, ()) if n in names]
    return chosen or names


def run_group(group, quick: bool, only: list[str] | None = None) -> dict:
    spaces = group.embeddings
    n = len(next(iter(spaces.values())))
    first_k, fit_rows, test_rows = split(n, quick)
    held_outs = held_out_spaces(group, quick)
    only = list(DEFAULT_METHODS) if only is None else only
    main_m = QUICK["num_anchors"] if quick else NUM_ANCHORS
    sweep = QUICK["sweep"] if quick else SWEEP
    param_epochs = QUICK["param_epochs"] if quick else PARAM_EPOCHS
    results: dict[str, dict] = {}
    for method, (fit, similarity, has_m) in methods(param_epochs).items():
        if method not in only:
            continue
        support_rows = fit_rows if method in (GCCA, GCCA_EXACT) else first_k
        support = [{"index": int(i)} for i in support_rows]
        ms = [main_m] if method == "PARAM-WIP" else (sweep if has_m else [len(support_rows)])
        by_m = {}
        for m in ms:
            folds, seconds = [], 0.0
            for held_out in held_outs:
                train = {k: v[fit_rows] for k, v in spaces.items() if k != held_out}
                start = time.perf_counter()
                with warnings.catch_warnings():  # m above the rank: capped, and said once here
                    warnings.filterwarnings("ignore", message=".*capped at")
                    anchor_set = fit(support, train, support_rows, m)
                seconds += time.perf_counter() - start
                folds.append(
                    evaluate_fold(
                        anchor_set, similarity, spaces, held_out, support_rows, fit_rows, test_rows
                    )
                )
            by_m[m] = {k: mean(f[k] for f in folds) for k in folds[0]}
            by_m[m]["fit_seconds"] = seconds
            by_m[m]["num_anchors"] = anchor_set.num_anchors
        results[method] = by_m
    return {
        "group": group.name,
        "encoders": list(spaces),
        "held_out": held_outs,
        "rows": {"support": len(first_k), "fit": len(fit_rows), "test": len(test_rows)},
        "num_anchors": main_m,
        "param_epochs": param_epochs,
        "methods": results,
    }


def at_main(result: dict, method: str) -> dict:
    """The method's figures at the main m, else at its largest m (full support: m = K; the
    shared linear map of low-rank spaces: at most their rank)."""
    by_m = result["methods"][method]
    return by_m.get(result["num_anchors"], by_m[max(by_m)])


def print_table(result: dict) -> None:
    rows = result["rows"]
    table = Table(
        f"{result['group']}: {len(result['encoders'])} encoders, K={rows['support']} support "
        f"(K = N: {rows['fit']}), {rows['fit']} fit / {rows['test']} test rows, "
        f"m={result['num_anchors']} (full support: m=K); mean over ordered pairs into the "
        f"held-out encoder, held out: {', '.join(result['held_out'])}",
        [("method", 40, ""), ("R@1", 6, ".3f"), ("R@5", 6, ".3f"), ("MRR", 6, ".3f"),
         ("fit s", 8, ".2f")],
    )  # fmt: skip
    for method in result["methods"]:
        r = at_main(result, method)
        table.add(method, r["recall@1"], r["recall@5"], r["mrr"], r["fit_seconds"])


def sweep_rows(results: list[dict]) -> list[dict]:
    """Per group and K: the default against the best fixed shrinkage in hindsight and against
    PARAM-WIP (R@1), and the default's fit time (selection included) against PARAM's."""
    rows = []
    for result in results:
        for k, r in result.get("k_sweep", {}).items():
            prefix = f"quality/{result['group']}/K={k}"
            default = r["default"]
            rows.append(row(f"{prefix}/default vs best fixed", "best fixed shrinkage",
                            r["best fixed"]["recall@1"], default["recall@1"], "Recall@1",
                            best_fixed=r["best fixed"]["shrinkage"],
                            chosen=default["shrinkage"]))  # fmt: skip
            if "PARAM-WIP" in r:
                param = r["PARAM-WIP"]
                rows.append(row(f"{prefix}/default vs PARAM-WIP", "PARAM-WIP",
                                param["recall@1"], default["recall@1"], "Recall@1"))  # fmt: skip
                rows.append(row(f"{prefix}/default fit time vs PARAM's", "PARAM-WIP fit time",
                                param["fit_seconds"], default["fit_seconds"], "s"))  # fmt: skip
            rows.append(row(f"{prefix}/default vs affine least squares", "affine least squares",
                            r["affine least squares"]["recall@1"], default["recall@1"],
                            "Recall@1"))  # fmt: skip
    return rows


def plot(results: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: the global backend stays as it is

    fig = Figure(figsize=(5 * len(results), 4))
    for index, result in enumerate(results):
        ax = fig.add_subplot(1, len(results), index + 1)
        for method, by_m in result["methods"].items():
            ms = [int(m) for m in by_m]
            r1 = [v["recall@1"] for v in by_m.values()]
            if method == "Full support":
                ax.axhline(r1[0], linestyle="--", color="gray", label=f"Full support (m={ms[0]})")
            else:
                ax.plot(ms, r1, marker="o", label=method)
        label_recall_panel(ax, result["group"], "number of anchors m")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """Each group's optional packages (a group whose packages are missing is skipped), and the
    plots' (without matplotlib the JSON is written, the PNGs skipped)."""
    return {**{name: group_needs(name, quick=quick) for name in GROUPS}, "plots": ("matplotlib",)}


def _sweep(group, quick: bool, every_held_out: bool, with_param: bool) -> dict:
    """The fit-size sweep of one group (`sweep_group`), PARAM-WIP among its methods with
    ``with_param``."""
    held_outs = held_out_spaces(group, quick, {**HELD_OUT, **SWEEP_HELD_OUT})
    held_outs = list(group.embeddings) if every_held_out else held_outs
    param = _param(QUICK["param_epochs"] if quick else PARAM_EPOCHS) if with_param else None
    num_anchors = QUICK["num_anchors"] if quick else NUM_ANCHORS
    return sweep_group(group, held_outs, quick=quick, num_anchors=num_anchors, param_fit=param)


def run(
    quick: bool = False,
    groups: list[str] | None = None,
    only: list[str] | None = None,
    parts: tuple[str, ...] = PARTS,
    every_held_out: bool = False,
) -> list[dict]:
    """Every group of `benchmarks.spaces.groups` (or ``groups``), every method (or ``only``): the
    method table at K = 1,000 (``"table"``) and the fit-size sweep (``"sweep"``).

    ``every_held_out``: the sweep holds out each encoder in turn (leave one encoder out over
    the whole group, not only ``SWEEP_HELD_OUT``'s), without PARAM (95 epochs a fold)."""
    results = []
    skipped = unavailable(needs(quick))
    with_param = not every_held_out  # the sweep's PARAM-WIP (95 epochs a fold)
    for name in groups or GROUPS:
        if name in skipped:
            continue
        group = load_group(name, quick=quick)
        if "table" in parts:
            result = run_group(group, quick, only=only)
            print_table(result)
        else:
            result = {"group": name, "encoders": list(group.embeddings), "methods": {}}
        if "sweep" in parts:
            result["k_sweep"] = _sweep(group, quick, every_held_out, with_param)
            with_param = with_param and not quick  # --quick: one group's sweep fits PARAM
        results.append(result)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "quality_quick" if quick else "quality"
    if groups or only or tuple(parts) != PARTS:  # a partial run keeps the whole one's results
        name += "_" + "_".join([*(groups or ["all"]), *parts])
    name += "_every_held_out" if every_held_out else ""
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2))
    if "plots" in skipped:
        print(f"\nwrote {RESULTS / f'{name}.json'} (no plots: {skipped['plots']})")
    else:
        if "table" in parts:
            plot(results, RESULTS / f"{name}.png")
        plot_sweep(results, RESULTS / f"{name}_k_sweep.png")
        print(f"\nwrote {RESULTS / f'{name}.json'}, {name}.png and {name}_k_sweep.png")
    rows = sweep_rows(results)
    for result in results:
        if not result["methods"]:
            continue
        if "PARAM-WIP" not in result["methods"]:
            continue
        param = at_main(result, "PARAM-WIP")
        best_method = max(result["methods"], key=lambda m: at_main(result, m)["recall@1"])
        best = at_main(result, best_method)
        rows.append(
            row(
                f"quality/{result['group']}/R@1 best vs PARAM-WIP",
                "PARAM-WIP",
                param["recall@1"],
                best["recall@1"],
                "Recall@1",
                best_method=best_method,
                difference=best["recall@1"] - param["recall@1"],
            )
        )
        closed = best
        rows.append(
            row(
                f"quality/{result['group']}/best method's fit time",
                "PARAM-WIP fit time",
                param["fit_seconds"],
                closed["fit_seconds"],
                "s (all held-out folds)",
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Part of the quality benchmark: some groups, methods or parts."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks quality", description=main.__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--group", action="append", choices=GROUPS, help="repeatable")
    parser.add_argument("--method", action="append", choices=list(methods(1)), help="repeatable")
    parser.add_argument("--part", action="append", choices=PARTS, help="default: both")
    parser.add_argument(
        "--every-held-out",
        action="store_true",
        help="the sweep holds out each encoder in turn (no PARAM: 95 epochs a fold)",
    )
    arguments = parser.parse_args(argv)
    announce_skips("quality", needs(arguments.quick))
    with warnings_once("quality"):
        run(
            arguments.quick,
            arguments.group,
            arguments.method,
            tuple(arguments.part or PARTS),
            every_held_out=arguments.every_held_out,
        )
