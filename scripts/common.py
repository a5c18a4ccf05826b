"""Shared pieces of the paper-reproduction scripts in ``scripts/``.

Command line (``--smoke``, ``--seeds``, ``--output-dir``), PARAM arguments with the paper's
Table 5 defaults, the zero-shot stitching protocol of Tables 1 and 2 for encoders that see
different inputs (``EncoderData``, `stitching_f1`), "mean ± std over seeds" tables in the
paper's layout, figures and the JSON of results. Everything model- or data-specific stays in
the scripts; the math is the library's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from relrep_hf import AnchorSet, ParamTrainer, ParamTrainingArguments, RelativeProjector, Statistics
from relrep_hf.io import atomic_write_bytes
from relrep_hf.metrics import weighted_f1
from relrep_hf.zero_shot import standardize, train_classifier

PAPER_SEEDS = (0, 1, 2, 3, 4, 5)  # the paper reports mean ± std over 6 seeds
SMOKE_SEEDS = (0, 1)
STITCHING_COLUMNS = ("Abs.", "Random-Cos", "PARAM Multi", "PARAM Single")

# ---------------------------------------------------------------------------------------------
# Command line and output
# ---------------------------------------------------------------------------------------------


def experiment_parser(doc: str, name: str) -> argparse.ArgumentParser:
    """A parser with the options every script shares; the script adds its own."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny models built from configs and small local data: exercises the whole code "
        "path offline in seconds (the numbers mean nothing)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help=f"seeds to average over (default: the paper's {len(PAPER_SEEDS)} seeds unless the "
        f"script says otherwise; smoke: {list(SMOKE_SEEDS)})",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path("relrep-output") / name,
        help="where the JSON of results and the PNG figures go (default: %(default)s)",
    )
    return parser


def parse(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    *,
    default_seeds: Sequence[int] = PAPER_SEEDS,
) -> argparse.Namespace:
    """Parse ``argv``, fill in the default seeds and create the output folder."""
    args = parser.parse_args(argv)
    if args.seeds is None:
        args.seeds = list(SMOKE_SEEDS if args.smoke else default_seeds)
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds must not repeat a seed, got {args.seeds}.")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    return args


def write_results(
    output_dir: Path, payload: Mapping[str, Any], *, started: float
) -> dict[str, Any]:
    """``payload`` plus the run's ``seconds`` since ``started``, written atomically to
    ``results.json`` in ``output_dir`` (tensors and paths made JSON-able); returned."""

    def default(value: Any) -> Any:
        if isinstance(value, Tensor):
            return value.tolist()
        if isinstance(value, os.PathLike):
            return str(value)
        raise TypeError(f"Cannot write {type(value).__name__} to JSON.")

    results = {**payload, "seconds": time.perf_counter() - started}
    text = json.dumps(results, indent=2, default=default) + "\n"
    atomic_write_bytes(output_dir / "results.json", text.encode())
    print(f"wrote {output_dir} in {results['seconds']:.0f} s")
    return results


def pyplot():
    """matplotlib's pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=120, bbox_inches="tight")
    pyplot().close(fig)
    return path


def smoke_tokenizer(texts: Sequence[str], *, max_length: int = 64):
    """A word-level tokenizer fitted on ``texts`` (lower-cased, punctuation split off): the
    stand-in for Hub tokenizers in ``--smoke`` runs, where no Hub file can be fetched."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=special))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        model_max_length=max_length,
    )


# ---------------------------------------------------------------------------------------------
# PARAM anchors
# ---------------------------------------------------------------------------------------------


def param_arguments(**overrides: Any) -> ParamTrainingArguments:
    """`ParamTrainingArguments` with the paper's Table 5 values unless overridden; no
    checkpoints, no progress bar (each script trains many anchor sets)."""
    overrides.setdefault("output_dir", "")
    return ParamTrainingArguments(save_strategy="no", disable_tqdm=True, **overrides)


def support_indices(num_rows: int, size: int | None, seed: int) -> Tensor:
    """The sorted parallel rows that make up the support set (all rows for ``size=None``).

    Passed to every anchor set of a seed, so PARAM Multi, PARAM Single and random anchors mix
    the same support inputs and differ only in how they mix them.
    """
    if size is None or size >= num_rows:
        return torch.arange(num_rows)
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(num_rows, generator=generator)[:size].sort().values


def train_anchor_set(
    args: ParamTrainingArguments, spaces: Mapping[str, Tensor], support: Tensor
) -> AnchorSet:
    """PARAM on the parallel ``spaces`` (one encoder: single-space losses only, the paper's
    PARAM Single); the trainer's copy on disk goes to a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="relrep-param-") as folder:
        trainer = ParamTrainer(
            replace(args, output_dir=folder), dict(spaces), support_indices=support
        )
        return trainer.train()


def random_anchor_set(support: Tensor, num_anchors: int, seed: int) -> AnchorSet:
    """Random anchors (the baseline of Moschella et al.) among the same support rows."""
    return AnchorSet.random([{"index": int(i)} for i in support], num_anchors, seed=seed)


# ---------------------------------------------------------------------------------------------
# Zero-shot stitching (Algorithm 1) for Tables 1 and 2
# ---------------------------------------------------------------------------------------------


@dataclass
class EncoderData:
    """One encoder's embeddings: its own labelled train / test inputs, and the parallel set.

    For images every encoder sees the same inputs, so ``parallel`` may simply be ``train``. For
    the cross-lingual task each encoder reads its own language: its reviews differ from the
    other encoders' (``train``, ``test``), and only the translated ``parallel`` sentences are
    row-aligned across encoders. Whitening statistics come from ``train``.
    """

    train: Tensor  # [N_train, d]
    train_labels: Tensor  # [N_train]
    test: Tensor  # [N_test, d]
    test_labels: Tensor  # [N_test]
    parallel: Tensor  # [N_parallel, d], row i is the same input (or its translation) everywhere


def stitching_f1(
    data: Mapping[str, EncoderData],
    *,
    args: ParamTrainingArguments,
    head_epochs: int,
    progress: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """One seed of the paper's Tables 1 / 2: weighted F1 for every (test encoder, classifier).

    Rows are ``{"Encoder": t, "Classifier": s, "Abs.", "Random-Cos", "PARAM Multi",
    "PARAM Single"}`` ("Abs." on the diagonal only): a linear head trained on encoder s's
    features of its train inputs, evaluated unchanged on encoder t's features of its test
    inputs. PARAM Multi is trained on every encoder but t (Algorithm 1: t never takes part);
    PARAM Single on s alone with the single-space losses; Random-Cos uses random support points
    and cosine. All anchor sets of a seed share one support set.
    """
    names = list(data)
    if len(names) < 2:
        raise ValueError(f"Zero-shot stitching needs at least 2 encoders, got {names}.")
    sizes = {len(d.parallel) for d in data.values()}
    if len(sizes) != 1:
        raise ValueError(f"The parallel sets must have the same rows for every encoder: {sizes}.")
    num_labels = int(max(int(d.train_labels.max()) for d in data.values())) + 1
    support = support_indices(sizes.pop(), args.support_size, args.seed)
    stats = {name: Statistics.from_embeddings(d.train) for name, d in data.items()}

    def project(anchor_set: AnchorSet, name: str, similarity: str) -> tuple[Tensor, Tensor]:
        projector = RelativeProjector.from_anchor_set(
            anchor_set, data[name].parallel[support], stats[name], similarity=similarity
        )
        with torch.no_grad():
            return projector(data[name].train), projector(data[name].test)

    def head(features: Tensor, labels: Tensor):
        return train_classifier(
            features, labels, num_labels=num_labels, seed=args.seed, epochs=head_epochs
        )

    @torch.no_grad()
    def f1(classifier, features: Tensor, labels: Tensor) -> float:
        return weighted_f1(classifier(features).logits.argmax(dim=-1), labels)

    random_set = random_anchor_set(support, args.num_anchors, args.seed)
    random_rel = {name: project(random_set, name, "cosine") for name in names}
    random_heads = {s: head(random_rel[s][0], data[s].train_labels) for s in names}
    single_heads, single_sets = {}, {}
    for s in names:
        progress(f"  PARAM Single on {s}")
        single_sets[s] = train_anchor_set(args, {s: data[s].parallel}, support)
        single_heads[s] = head(project(single_sets[s], s, "wip")[0], data[s].train_labels)

    rows = []
    for t in names:
        progress(f"  PARAM Multi without {t}")
        multi_set = train_anchor_set(args, {n: data[n].parallel for n in names if n != t}, support)
        multi_rel = {name: project(multi_set, name, "wip") for name in names}
        absolute_train, absolute_test = standardize(data[t].train, data[t].test)
        test_labels = data[t].test_labels
        for s in names:
            row: dict[str, Any] = {"Encoder": t, "Classifier": s}
            if s == t:
                absolute = head(absolute_train, data[t].train_labels)
                row["Abs."] = f1(absolute, absolute_test, test_labels)
            row["Random-Cos"] = f1(random_heads[s], random_rel[t][1], test_labels)
            multi_head = head(multi_rel[s][0], data[s].train_labels)
            row["PARAM Multi"] = f1(multi_head, multi_rel[t][1], test_labels)
            single_test = project(single_sets[s], t, "wip")[1]
            row["PARAM Single"] = f1(single_heads[s], single_test, test_labels)
            rows.append(row)
    return rows


def run_stitching(
    data: Mapping[str, EncoderData],
    seeds: Sequence[int],
    *,
    make_args: Callable[[int], ParamTrainingArguments],
    head_epochs: int,
) -> dict[str, Any]:
    """`stitching_f1` for every seed; the per-seed rows and their mean ± std."""
    per_seed = {}
    for seed in seeds:
        print(f"seed {seed}")
        per_seed[seed] = stitching_f1(data, args=make_args(seed), head_epochs=head_epochs)
    table = summarize(list(per_seed.values()), ("Encoder", "Classifier"), STITCHING_COLUMNS)
    return {"table": table, "per_seed": per_seed}


# ---------------------------------------------------------------------------------------------
# Tables: mean ± std over seeds, in the paper's layout
# ---------------------------------------------------------------------------------------------


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation (0 for a single seed)."""
    values = [float(v) for v in values]
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std}


def summarize(
    runs: Sequence[Sequence[Mapping[str, Any]]], keys: Sequence[str], columns: Sequence[str]
) -> list[dict[str, Any]]:
    """Rows of several seeds (same rows, same order) to one row each, every column present in
    the rows as ``{"mean", "std"}`` (absent columns stay absent, e.g. "Abs." off the diagonal)."""
    first = runs[0]
    for run in runs[1:]:
        if [tuple(r[k] for k in keys) for r in run] != [tuple(r[k] for k in keys) for r in first]:
            raise ValueError("Every seed must produce the same rows in the same order.")
    table = []
    for i, row in enumerate(first):
        out: dict[str, Any] = {k: row[k] for k in keys}
        for column in columns:
            if column in row:
                out[column] = mean_std([run[i][column] for run in runs])
        table.append(out)
    return table


def format_table(
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    columns: Sequence[str],
    *,
    scale: float = 100.0,
    digits: int = 2,
) -> str:
    """A Markdown table of ``mean ± std`` cells, the first key written once per group as in the
    paper's tables; ``scale=100`` prints fractions as percentages."""
    names = list(keys) + list(columns)
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    previous = None
    for row in rows:
        cells = [str(row[k]) for k in keys]
        if keys and row[keys[0]] == previous:
            cells[0] = ""
        previous = row[keys[0]] if keys else None
        for column in columns:
            value = row.get(column)
            if value is None:
                cells.append("")
            else:
                mean, std = value["mean"] * scale, value["std"] * scale
                cells.append(f"{mean:.{digits}f} ± {std:.{digits}f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def check_finite_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """Raise if a cell of the summary is not a finite number (a silent NaN would print)."""
    for row in rows:
        for column in columns:
            value = row.get(column)
            if value is not None and not all(math.isfinite(value[k]) for k in ("mean", "std")):
                raise ValueError(f"Non-finite {column} in row {row}.")


def f1_heatmaps(
    table: Sequence[Mapping[str, Any]], encoders: Sequence[str], path: Path, *, title: str
) -> Path:
    """The F1 matrix of each relative method (rows: test encoder, columns: classifier)."""
    plt = pyplot()
    methods = [c for c in STITCHING_COLUMNS if c != "Abs."]
    fig, axes = plt.subplots(1, len(methods), figsize=(4 * len(methods) + 1, 3.8), squeeze=False)
    index = {name: i for i, name in enumerate(encoders)}
    for ax, method in zip(axes[0], methods, strict=True):
        grid = torch.full((len(encoders), len(encoders)), float("nan"))
        for row in table:
            grid[index[row["Encoder"]], index[row["Classifier"]]] = row[method]["mean"]
        image = ax.imshow(grid.numpy(), vmin=0, vmax=1, cmap="viridis")
        for i in range(len(encoders)):
            for j in range(len(encoders)):
                value = grid[i, j].item()
                color = "white" if value < 0.6 else "black"
                ax.text(
                    j, i, f"{100 * value:.0f}", ha="center", va="center", color=color, fontsize=7
                )
        ax.set_xticks(range(len(encoders)), encoders, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(encoders)), encoders, fontsize=7)
        ax.set_title(method, fontsize=9)
        ax.set_xlabel("classifier trained on", fontsize=8)
        ax.set_ylabel("test encoder", fontsize=8)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="weighted F1")
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)
