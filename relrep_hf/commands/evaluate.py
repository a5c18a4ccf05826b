"""``relrep-hf evaluate``: zero-shot retrieval and classification of a fitted run."""

from __future__ import annotations

import argparse

from relrep_hf.commands.arguments import (
    add_command,
    add_run_dir,
    print_report,
    settle_garbage_collector,
    show_progress,
)
from relrep_hf.pipeline.run_file import check_run_folder
from relrep_hf.utils.defaults import DEFAULT_HEAD_EPOCHS


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "evaluate",
        help="zero-shot retrieval and classification: tables, JSON, heatmap",
    )
    add_run_dir(parser)
    parser.add_argument(
        "--head-epochs", type=int, default=DEFAULT_HEAD_EPOCHS, help="epochs of each classifier"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    check_run_folder(args.run_dir)  # at once, before the pipeline's imports
    from relrep_hf.pipeline import steps as pipeline  # evaluate, matplotlib: only now

    settle_garbage_collector()

    report = pipeline.evaluate(
        args.run_dir, head_epochs=args.head_epochs, show_progress=show_progress(args)
    )
    print_report(report)
