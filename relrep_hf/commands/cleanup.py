"""``relrep-hf cleanup STORE``: list (and with ``--yes`` remove) the backups, staging
collections/tables and partial files that migrations of one store left
(`relrep_hf.migration.rollback.cleanup_store`)."""

from __future__ import annotations

import argparse

from relrep_hf.commands.arguments import add_command


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "cleanup",
        help="list, and with --yes remove, what migrations of a store left: backups, staging "
        "collections/tables, partial files (nothing else)",
    )
    parser.add_argument(
        "store",
        metavar="STORE",
        help="the store: a database URI (as migrate takes it) or a file/folder store's path",
    )
    parser.add_argument(
        "--yes", action="store_true", help="remove them (without it: list them only)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from relrep_hf.migration.rollback import cleanup_store

    found = cleanup_store(args.store, remove=args.yes)
    if not found:
        print(f"Nothing left by migrations of {args.store}.")
        return
    verb = "Removed" if args.yes else "Left by migrations (remove them with --yes)"
    print(f"{verb}:\n" + "\n".join(f"  {name}" for name in found))
