"""``relrep-hf fit``: an anchor set fitted by a registered method, and every encoder's projector."""

from __future__ import annotations

import argparse

from relrep_hf.commands.arguments import (
    add_command,
    add_method_flag,
    add_run_dir,
    fitting_flags,
    method_args,
    settle_garbage_collector,
)
from relrep_hf.pipeline.run_file import check_run_folder


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "fit",
        help="fit an anchor set and one projector per encoder",
        parents=[fitting_flags()],
    )
    add_run_dir(parser)
    parser.add_argument(
        "--held-out",
        action="append",
        metavar="NAME",
        help="encoder kept out of the fit, to test zero-shot onboarding on (repeatable; "
        "default: the last one)",
    )
    add_method_flag(parser)
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a fit already in the run: deletes its anchor set, projectors, heads and "
        "report once the new anchor set is fitted (without it, a fitted run is refused)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    # the method's registry entry refuses a flag it ignores, before the run is read
    fit_args = method_args(args, args.method, given=getattr(args, "given", ()))
    check_run_folder(args.run_dir)  # at once, before the pipeline's imports

    from relrep_hf.pipeline import steps as pipeline

    settle_garbage_collector()

    anchor_set = pipeline.fit(
        args.run_dir,
        held_out=args.held_out,
        method=args.method,
        args=fit_args,
        overwrite=args.overwrite,
    )
    print(
        f"Anchor set ({anchor_set.num_anchors} anchors over {anchor_set.support_size} support "
        f"inputs) and projectors written to {args.run_dir}"
    )
