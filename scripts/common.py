"""What the paper-reproduction scripts in ``scripts/`` share beyond the library: the command
line (``--smoke``, ``--seeds``, ``--output-dir``), the JSON of results, PARAM arguments with the
paper's Table 5 defaults, a tokenizer for offline smoke runs, and Tables 1 / 2 over seeds.

Algorithm 1 is `relrep_hf.evaluation.zero_shot.ZeroShotStitching`, tables are `relrep_hf.functional.markdown_tables`, figures
`relrep_hf.evaluation.plots`; everything model- or data-specific stays in the scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import Tensor

from relrep_hf import ParamTrainingArguments
from relrep_hf.commands.arguments import settle_garbage_collector
from relrep_hf.evaluation import EncoderData, ZeroShotStitching, heatmap
from relrep_hf.evaluation.zero_shot import PAPER_TABLE_1
from relrep_hf.functional.markdown_tables import format_table, summarize_seeds
from relrep_hf.utils.io import atomic_write_bytes

PAPER_SEEDS = (0, 1, 2, 3, 4, 5)  # the paper reports mean ± std over 6 seeds
SMOKE_SEEDS = (0, 1)
STITCHING_KEYS = ("Encoder", "Classifier")
STITCHING_COLUMNS = ("Abs.", *(method.name for method in PAPER_TABLE_1))


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
    """Parse ``argv``, fill in the default seeds, create the output folder and note the start
    (``started``, for the run's seconds in `write_results`). The objects alive after the
    script's imports are kept off the garbage collector, as the CLI's long commands do
    (`settle_garbage_collector`): each of the many small head fits (transformers' Trainer) runs a
    full ``gc.collect()``, which walked all of them (0.32 s a fit, 12.7 of 14.7 s of the 40 fits of
    the offline multilingual run, measured under cProfile). No result changes."""
    args = parser.parse_args(argv)
    settle_garbage_collector()
    if args.seeds is None:
        args.seeds = list(SMOKE_SEEDS if args.smoke else default_seeds)
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds must not repeat a seed, got {args.seeds}.")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    args.started = time.perf_counter()
    return args


def write_results(args: argparse.Namespace, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` plus the run's ``smoke``, ``seeds`` and ``seconds`` since `parse`, written
    atomically to ``results.json`` in ``args.output_dir`` (tensors, paths made JSON-able)."""

    def default(value: Any) -> Any:
        if isinstance(value, Tensor):
            return value.tolist()
        if isinstance(value, os.PathLike):
            return str(value)
        raise TypeError(f"Cannot write {type(value).__name__} to JSON.")

    run = {"smoke": args.smoke, "seeds": args.seeds, "seconds": time.perf_counter() - args.started}
    results = {**payload, **run}
    text = json.dumps(results, indent=2, default=default) + "\n"
    atomic_write_bytes(args.output_dir / "results.json", text.encode())
    print(f"wrote {args.output_dir} in {results['seconds']:.0f} s")
    return results


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


def param_arguments(**overrides: Any) -> ParamTrainingArguments:
    """`ParamTrainingArguments` with the paper's Table 5 values unless overridden; no
    checkpoints, no progress bar (each script trains many anchor sets)."""
    overrides.setdefault("output_dir", "")
    return ParamTrainingArguments(save_strategy="no", disable_tqdm=True, **overrides)


def stitching_experiment(
    data: Mapping[str, EncoderData],
    args: argparse.Namespace,
    *,
    overrides: Mapping[str, Any],
    head_epochs: int,
    title: str,
    **record: Any,
) -> dict[str, Any]:
    """Tables 1 / 2 for every seed of ``args.seeds`` (`PAPER_TABLE_1`: Random-Cos, PARAM Multi,
    PARAM Single; "Abs." on the diagonal), printed as mean ± std, the F1 heatmaps drawn
    (``title``) and everything written (`write_results`, ``record`` first); returned."""
    per_seed = {}
    for seed in args.seeds:
        print(f"seed {seed}")
        fit_args = param_arguments(seed=seed, **overrides)
        stitching = ZeroShotStitching(data, args=fit_args, head_epochs=head_epochs, progress=print)
        per_seed[seed] = stitching.classification(PAPER_TABLE_1, keys=STITCHING_KEYS)
    table = summarize_seeds(list(per_seed.values()), STITCHING_KEYS, STITCHING_COLUMNS)
    print(format_table(table, STITCHING_COLUMNS, keys=STITCHING_KEYS, group=True))
    heatmap = f1_heatmaps(table, list(data), args.output_dir / "f1_heatmaps.png", title=title)
    results = {
        **record,
        "encoders": {name: int(d.train.shape[1]) for name, d in data.items()},
        "param_overrides": overrides,
        "head_epochs": head_epochs,
        "table": table,
        "per_seed": per_seed,
        "figures": {"f1_heatmaps": heatmap},
    }
    return write_results(args, results)


def f1_heatmaps(
    table: Sequence[Mapping[str, Any]], encoders: Sequence[str], path: Path, *, title: str
) -> Path:
    """The mean F1 matrix of each relative method (rows: test encoder, columns: classifier)."""
    index = {name: i for i, name in enumerate(encoders)}
    matrices = {}
    for method in STITCHING_COLUMNS[1:]:
        grid = [[float("nan")] * len(encoders) for _ in encoders]
        for row in table:
            grid[index[row["Encoder"]]][index[row["Classifier"]]] = row[method]["mean"]
        matrices[method] = grid
    return heatmap(
        matrices,
        encoders,
        path,
        title=title,
        xlabel="classifier trained on",
        ylabel="test encoder",
        colorbar_label="weighted F1",
        blank_diagonal=False,
        scale=100,
        digits=0,
    )
