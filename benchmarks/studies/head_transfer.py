"""Head transfer: does a head trained on other encoders keep the held-out encoder's own F1?

Algorithm 1 with labels (issue #29). For each held-out encoder and each number K of fit rows,
the anchor set (the library's default, ``AnchorSet.shared_linear``, m = 300, every fit row a
support input) is fitted on the other encoders' first K rows; every encoder is onboarded from
its own K rows. Heads are trained on the first K rows' labels and scored (weighted F1) on the
held-out encoder's last 1,000 rows:

- **Abs**: the held-out encoder's own classifier, a logistic regression on its standardised
  absolute vectors (float64, scikit-learn): the reference every other figure is divided by;
- **own-relative**: the library's head on the held-out encoder's own relative features;
- **multi-source**: the library's way, one `HeadTrainer` head on every training encoder's
  features at once (``{encoder: features}``: rows stacked, the number of directions chosen by
  leave-one-encoder-out transfer among them), zero-shot on the held-out encoder;
- **single-source**: a head on one training encoder's features reading that chosen number
  (mean and worst over the sources), and today's single-source head reading all m;
- **Random-Cos** (random support points, cosine) and **PARAM-WIP** (the paper's `ParamTrainer`,
  support the first min(K, 1,000) rows), each with the library's multi-source head.

    OMP_NUM_THREADS=1 python -m benchmarks head_transfer [--group verses|minilm] [--every-held-out]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

import torch
from torch import Tensor

from benchmarks.common import Table, row
from benchmarks.spaces.head_spaces import GROUPS, LabelledSpaces, labelled_spaces, verse_spaces
from relrep_hf import (
    AnchorSet,
    ParamTrainer,
    ParamTrainingArguments,
    RelativeHeadConfig,
    RelativeHeadForClassification,
    RelativeProjector,
    Statistics,
    train_in_memory,
)
from relrep_hf.functional import weighted_f1
from relrep_hf.models.configuration_relative_head import SWAPPABLE_HEAD_LAYERS

KS = (500, 1000, 2000, 4000)
QUICK_KS = (100,)  # --quick: one K, a crash check
TEST_ROWS = 1000
NUM_ANCHORS = 300
QUICK_ANCHORS = 50
PARAM_EPOCHS = 95  # the paper's default, as the quality benchmark
PARAM_SUPPORT = 1000
HELD_OUT = {"verses": ("smollm2:last",), "minilm": ("minilm-cls-L-1",)}  # as quality's sweep
PLOTTED = {"multi-source": "C0-", "single mean": "C1-", "single worst": "C1:",
           "multi all-m": "C2--", "own-relative": "C7-", "today single mean": "C3-",
           "today single worst": "C3:", "Random-Cos": "C4-", "PARAM-WIP": "C5-"}  # fmt: skip
QUICK_HELD_OUT = ("e5-small",)  # as the quality benchmark's real group; CI: about a minute
FLOORS = {4000: (0.95, 0.99), 1000: (0.90, 0.97)}  # (single-source, multi-source) of Abs
METHODS = ("own-relative", "multi-source", "single mean", "single worst", "multi all-m",
           "single all-m mean", "single all-m worst", "multi linear",
           "single linear mean", "single linear worst", "today single mean", "today single worst",
           "Random-Cos", "PARAM-WIP")  # fmt: skip


def abs_f1(x: Tensor, labels: Tensor, fit: Tensor, test: Tensor) -> float:
    """Weighted F1 of a logistic regression on standardised absolute vectors (float64)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    train = x[fit].double().numpy()
    scaler = StandardScaler().fit(train)
    model = LogisticRegression(max_iter=2000).fit(scaler.transform(train), labels[fit].numpy())
    predicted = model.predict(scaler.transform(x[test].double().numpy()))
    return weighted_f1(torch.from_numpy(predicted), labels[test])


def train_head(
    features, labels, num_labels: int, *, learning_rate: float | None = None, **config
) -> RelativeHeadForClassification:
    """The library's head (`RelativeHeadConfig.for_projector`'s layers, `HeadTrainer`'s
    defaults) on one tensor or ``{encoder: tensor}``; ``config`` changes the head."""
    first = next(iter(features.values())) if isinstance(features, dict) else features
    torch.manual_seed(0)
    head = RelativeHeadForClassification(
        RelativeHeadConfig(
            num_anchors=first.shape[1],
            num_labels=num_labels,
            **{**SWAPPABLE_HEAD_LAYERS, **config},
        )
    )
    arguments = {} if learning_rate is None else {"learning_rate": learning_rate}
    if "RELREP_HF_DIRECTION_TOLERANCE" in os.environ:  # another than the default, to compare
        arguments["direction_tolerance"] = float(os.environ["RELREP_HF_DIRECTION_TOLERANCE"])
    return train_in_memory(head, features, labels, **arguments)


def f1_of(head: RelativeHeadForClassification, features: Tensor, labels: Tensor) -> float:
    with torch.no_grad():
        return weighted_f1(head(features).logits.argmax(dim=-1), labels)


def relative(anchor_set, spaces, support_rows, fit, rows, **kwargs) -> dict[str, Tensor]:
    """Every space's ``rows`` in ``anchor_set``'s coordinates, onboarded from its support rows."""
    out = {}
    for name, x in spaces.items():
        projector = RelativeProjector.from_anchor_set(
            anchor_set, x[support_rows], Statistics.from_embeddings(x[fit]), **kwargs
        )
        with torch.no_grad():
            out[name] = projector(x[rows]).float()
    return out


def _multi(anchor_set, ls, held, support_rows, fit, test, num_labels, **kwargs) -> float:
    spaces, y = ls.spaces, ls.labels
    train = relative(anchor_set, spaces, support_rows, fit, fit, **kwargs)
    sources = {n: train[n] for n in spaces if n != held}
    head = train_head(sources, y[fit], num_labels)
    held_test = relative(anchor_set, {held: spaces[held]}, support_rows, fit, test, **kwargs)[held]
    return f1_of(head, held_test, y[test])


def fold(ls: LabelledSpaces, held: str, k: int, *, m: int, param: bool) -> dict[str, float]:
    """Every method's weighted F1 on ``held``'s test rows, and Abs, for K = ``k``."""
    spaces, y = ls.spaces, ls.labels
    n, num_labels = len(y), int(y.max()) + 1
    fit, test = torch.arange(k), torch.arange(n - min(TEST_ROWS, n // 4), n)
    sources = [name for name in spaces if name != held]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cap's and thin statistics' warnings
        anchor_set = AnchorSet.shared_linear(
            [{"index": int(i)} for i in fit], {s: spaces[s][fit] for s in sources}, m,
            support_rows=fit,
        )  # fmt: skip
    train = relative(anchor_set, spaces, fit, fit, fit)
    held_test = relative(anchor_set, {held: spaces[held]}, fit, fit, test)[held]
    out = {"Abs": abs_f1(spaces[held], y, fit, test), "shrinkage": anchor_set.shrinkage}
    out["own-relative"] = f1_of(train_head(train[held], y[fit], num_labels), held_test, y[test])

    def sources_head(**config) -> float:
        return train_head({s: train[s] for s in sources}, y[fit], num_labels, **config)

    def singles(name: str, **config) -> None:
        scores = [
            f1_of(train_head(train[s], y[fit], num_labels, **config), held_test, y[test])
            for s in sources
        ]
        out[f"{name} mean"], out[f"{name} worst"] = mean(scores), min(scores)

    multi = sources_head()
    m_read = anchor_set.num_anchors  # every direction, no choice
    out["multi-source"] = f1_of(multi, held_test, y[test])
    out["directions"] = multi.config.input_width
    out["direction_scores"] = multi.config.direction_selection or {}
    singles("single", num_directions=multi.config.num_directions)
    out["multi all-m"] = f1_of(sources_head(num_directions=m_read), held_test, y[test])
    singles("single all-m", num_directions=m_read)
    linear = sources_head(hidden_sizes=[])
    out["multi linear"] = f1_of(linear, held_test, y[test])
    out["linear directions"] = linear.config.input_width
    singles("single linear", hidden_sizes=[], num_directions=linear.config.num_directions)
    singles("today single", hidden_sizes=[], dropout=0.1, learning_rate=1e-3)
    random_set = AnchorSet.random([{"index": int(i)} for i in fit], anchor_set.num_anchors)
    out["Random-Cos"] = _multi(
        random_set, ls, held, fit, fit, test, num_labels, similarity="cosine"
    )
    if param:
        support = fit[: min(k, PARAM_SUPPORT)]
        with tempfile.TemporaryDirectory() as folder:
            args = ParamTrainingArguments(
                folder, num_anchors=anchor_set.num_anchors, num_train_epochs=PARAM_EPOCHS,
                save_strategy="no", disable_tqdm=True,
            )  # fmt: skip
            param_set = ParamTrainer(
                args, {s: spaces[s][fit] for s in sources}, support_indices=support
            ).train()
        out["PARAM-WIP"] = _multi(param_set, ls, held, support, fit, test, num_labels)
    return out


def sweep(ls: LabelledSpaces, held_outs, *, quick: bool, param: bool, ks=None) -> dict[int, dict]:
    """``{K: {method: mean F1 over held-out encoders, method ratio: F1 / Abs, ...}}``."""
    n = len(ls.labels)
    test = min(TEST_ROWS, n // 4)
    ks = [k for k in (ks or (QUICK_KS if quick else KS)) if k <= n - test]
    m = QUICK_ANCHORS if quick else NUM_ANCHORS
    results = {}
    table = None
    for k in ks:
        started = time.perf_counter()
        folds = [fold(ls, h, k, m=m, param=param) for h in held_outs]
        summary: dict = {"held_out": list(held_outs), "Abs": mean(f["Abs"] for f in folds)}
        for method in METHODS:
            if method in folds[0]:
                summary[method] = mean(f[method] for f in folds)
                ratios = [f[method] / f["Abs"] for f in folds]
                summary[f"{method} / Abs"] = mean(ratios)
                summary[f"{method} / Abs worst fold"] = min(ratios)
        summary["directions"] = [f["directions"] for f in folds]
        summary["linear directions"] = [f["linear directions"] for f in folds]
        summary["direction_scores"] = [f["direction_scores"] for f in folds]
        summary["shrinkage"] = [f["shrinkage"] for f in folds]
        summary["seconds"] = time.perf_counter() - started
        results[k] = summary
        table = table or _table(ls.name, held_outs, summary)
        methods = [m for m in METHODS if f"{m} / Abs" in summary]
        table.add(k, summary["Abs"], *(summary[f"{m} / Abs"] for m in methods),
                  str(summary["directions"]), summary["seconds"])  # fmt: skip
    return results


def _table(group: str, held_outs, summary: dict) -> Table:
    """One row per K as it is measured: Abs's F1, each method's F1 as a fraction of it."""
    methods = [m for m in METHODS if f"{m} / Abs" in summary]
    return Table(
        f"{group}: head transfer, weighted F1 of Abs and each method / Abs, held out "
        f"{', '.join(held_outs)} (load {os.getloadavg()[0]:.1f})",
        [("K", 6, "d"), ("Abs", 6, ".3f"), *((m, max(len(m), 6), ".3f") for m in methods),
         ("directions", 14, ""), ("s", 5, ".0f")],
    )  # fmt: skip


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The verses' encoders and the baseline's scikit-learn."""
    from benchmarks.spaces.groups import group_needs

    return {"": (*group_needs("real", quick=quick), "sklearn")}


def run(quick: bool = False) -> list[dict]:
    """The benchmark rows (`benchmarks.__main__`): ``--quick`` is the verses' quick encoders
    (MiniLM, USE on German, e5 on French; 200 rows), e5 held out, K = 100, no PARAM."""
    ls = labelled_spaces("verses", quick=quick)
    held_outs = QUICK_HELD_OUT if quick else HELD_OUT["verses"]
    results = sweep(ls, held_outs, quick=quick, param=not quick)
    rows = []
    for k, s in results.items():
        for method in ("multi-source", "single mean", "today single mean"):
            rows.append(
                row(
                    f"head_transfer/{ls.name}/K={k}/{method}",
                    "Abs (held-out encoder's own logistic regression)",
                    s["Abs"],
                    s[method],
                    "weighted F1",
                    directions=str(s["directions"]),
                )
            )
    return rows


def plot(results: dict[str, dict], path: Path) -> None:
    """One panel per group: each method's F1 as a fraction of Abs against K, the floors dashed."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5 * len(results), 4))
    for index, (group, sweep_results) in enumerate(results.items()):
        ax = fig.add_subplot(1, len(results), index + 1)
        ks = [int(k) for k in sweep_results]
        for method, style in PLOTTED.items():
            key = f"{method} / Abs"
            if all(key in s for s in sweep_results.values()):
                values = [s[key] for s in sweep_results.values()]
                ax.plot(ks, values, style, marker="o", markersize=4, label=method)
        for k, (single, multi) in FLOORS.items():
            if k not in ks:
                continue
            ax.plot([k], [single], marker="_", markersize=18, color="black")
            ax.plot([k], [multi], marker="_", markersize=18, color="red")
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("K (fit rows = labelled head-training rows)")
        ax.set_ylabel("weighted F1 / Abs (held-out encoder)")
        ax.set_title(
            f"{group}\n(bars: the floors, black single-source, red multi-source)", fontsize=9
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks head_transfer", description=__doc__)
    parser.add_argument("--group", nargs="*", default=["verses"], choices=GROUPS)
    parser.add_argument("--every-held-out", action="store_true", help="hold out each encoder")
    parser.add_argument("--no-param", action="store_true", help="skip PARAM-WIP (minutes)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ks", type=int, nargs="*", default=None, help="fit sizes (default KS)")
    parser.add_argument("--encoders", nargs="*", default=None, help="a subset of the verses'")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args(argv)
    results = {}
    for group in args.group:
        if args.encoders and group == "verses":  # never embeds the others
            ls = verse_spaces(quick=args.quick, encoders=tuple(args.encoders))
        else:
            ls = labelled_spaces(group, quick=args.quick)
        held = tuple(ls.spaces) if args.every_held_out else HELD_OUT[group]
        held = QUICK_HELD_OUT if args.quick and not args.every_held_out else held
        results[group] = sweep(ls, held, quick=args.quick, param=not args.no_param, ks=args.ks)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    if args.plot:
        plot(results, args.plot)
