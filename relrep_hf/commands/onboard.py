"""``relrep-hf onboard``: a projector for a new encoder, from the run's anchor set, no training."""

from __future__ import annotations

import argparse

from relrep_hf.commands.arguments import (
    add_command,
    add_run_dir,
    settle_garbage_collector,
    show_progress,
)
from relrep_hf.encoding.encoder_kinds import ENCODER_KINDS_HELP
from relrep_hf.pipeline.run_file import check_run_folder


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands, "onboard", help="a projector for a new encoder, with no training"
    )
    add_run_dir(parser)
    parser.add_argument("--encoder", required=True, metavar="SPEC", help=ENCODER_KINDS_HELP)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    check_run_folder(args.run_dir)  # at once, before the pipeline's imports
    from relrep_hf.pipeline import steps as pipeline

    settle_garbage_collector()

    projector = pipeline.onboard(args.run_dir, args.encoder, show_progress=show_progress(args))
    print(
        f"Onboarded {args.encoder}: a projector of {projector.config.num_anchors} features, "
        "no training."
    )
