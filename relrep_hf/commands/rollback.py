"""``relrep-hf rollback STORE``: serve the vectors a migration replaced again, from the backup
it kept (`relrep_hf.migration.rollback.rollback_store`)."""

from __future__ import annotations

import argparse

from relrep_hf.commands.arguments import add_command


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "rollback",
        help="restore the vectors a database migration replaced, from the backup it kept",
    )
    parser.add_argument(
        "store",
        metavar="STORE",
        help="the migrated database store: chroma:PATH#NAME, sqlite-vec:PATH#TABLE, "
        "postgresql://USER@HOST/DB?table=TABLE or qdrant:PATH#ALIAS",
    )
    parser.add_argument(
        "--backup",
        default=None,
        help="the backup to restore (default: the newest of the store's name; a Qdrant alias's "
        "first migration kept the original collection under its own name: name it)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="roll back although rows were written since the migration (they are lost)",
    )
    parser.add_argument("--column", default=None, help="the vector column (default: embedding)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from relrep_hf.migration.rollback import rollback_store

    restored = rollback_store(args.store, backup=args.backup, force=args.force, column=args.column)
    print(f"Rolled back {args.store}: it serves the vectors of {restored} again.")
