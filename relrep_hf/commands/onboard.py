"""``relrep-hf onboard``: a projector for a new encoder, from the run's anchor set, no training
(``--engine ray``: its statistics and support embeddings from parquet shards on Ray Data)."""

from __future__ import annotations

import argparse

from relrep_hf.commands.arguments import (
    add_command,
    add_ray_flags,
    add_run_dir,
    join_ray,
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
    parser.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: embed the run's rows here; ray: statistics and support embeddings from "
        "--shards on Ray Data (pip install 'relrep-hf[ray]'; --address or RAY_ADDRESS names "
        "the cluster)",
    )
    ray = parser.add_argument_group("--engine ray")
    ray.add_argument(
        "--shards", default=None, help="a folder of parquet shards, or a glob of them (a corpus)"
    )
    ray.add_argument("--out", default=None, help="the projector's folder")
    ray.add_argument(
        "--column",
        default=None,
        help="the shards' vector column of this encoder (default: embed --text-column with it)",
    )
    ray.add_argument("--text-column", default="text", help="the shards' column of texts")
    ray.add_argument(
        "--key-column",
        default=None,
        help="the column that finds the support inputs (default: text for an anchor set of "
        "texts, id for one of row indices)",
    )
    add_ray_flags(ray)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    ray_only = [f for f in ("shards", "out", "column", "key_column") if getattr(args, f)]
    if args.engine == "local" and ray_only:
        raise ValueError(
            f"--{ray_only[0].replace('_', '-')} applies to --engine ray (statistics from "
            "shards on Ray Data), not --engine local."
        )
    if args.engine == "ray" and (args.shards is None or args.out is None):
        raise ValueError("--engine ray needs --shards (the corpus) and --out (the projector).")
    check_run_folder(args.run_dir)  # at once, before the pipeline's imports
    join_ray(args)
    if args.engine == "ray":
        _run_ray(args)
        return
    from relrep_hf.pipeline import steps as pipeline

    settle_garbage_collector()

    projector = pipeline.onboard(args.run_dir, args.encoder, show_progress=show_progress(args))
    print(
        f"Onboarded {args.encoder}: a projector of {projector.config.num_anchors} features, "
        "no training."
    )


def _run_ray(args: argparse.Namespace) -> None:
    from relrep_hf.migration.ray_onboarding import onboard_shards
    from relrep_hf.pipeline.run_folder import read_run

    read_run(args.run_dir, fitted=True)
    projector = onboard_shards(
        args.run_dir / "anchor_set",
        args.shards,
        args.encoder,
        args.out,
        column=args.column,
        text_column=args.text_column,
        key_column=args.key_column,
        num_workers=args.num_workers,
        num_gpus=args.num_gpus,
    )
    print(
        f"Onboarded {args.encoder} on Ray into {args.out}: a projector of "
        f"{projector.config.num_anchors} features, no training."
    )
