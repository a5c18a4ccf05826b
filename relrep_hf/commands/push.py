"""``relrep-hf push``: a run folder's artifacts, or one saved artifact, to the Hub."""

from __future__ import annotations

import argparse
from pathlib import Path

from relrep_hf.commands.arguments import add_command, add_run_dir


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands, "push", help="push a run folder's anchor set, projectors and heads to the Hub"
    )
    add_run_dir(parser)
    parser.add_argument(
        "--repo-id",
        required=True,
        help="Hub repo id of the anchor set; projectors and heads go beside it",
    )
    parser.add_argument("--private", action="store_true", help="create private repos")
    parser.add_argument("--revision", default=None, help="branch to push to")
    parser.add_argument("--token", default=None, help="Hub token (default: the logged-in one)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from relrep_hf.publishing.hub import artifact_kind, push_artifact, push_run

    options = {"private": args.private or None, "token": args.token, "revision": args.revision}
    if artifact_kind(Path(args.run_dir)) == "run":
        pushed = push_run(args.run_dir, args.repo_id, **options)
    else:
        pushed = [(args.repo_id, push_artifact(args.run_dir, args.repo_id, **options))]
    for repo, commit in pushed:
        print(f"{repo}: {commit}")
