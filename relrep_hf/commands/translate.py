"""``relrep-hf translate``: a run's migration map between two of its encoders, fitted, saved,
measured or applied to stored vectors."""

from __future__ import annotations

import argparse
from pathlib import Path

from relrep_hf.commands.arguments import add_command, add_run_dir
from relrep_hf.commands.migrate import add_store_flags, migrate_vectors


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "translate",
        help="migrate old-encoder vectors into a new encoder's space: the map chosen by "
        "cross-validated recall on the run's training rows (the anchor path among the "
        "candidates); without --vectors, measure the recall every candidate keeps",
    )
    add_run_dir(parser)
    parser.add_argument("--source", required=True, metavar="NAME", help="the old encoder")
    parser.add_argument("--target", required=True, metavar="NAME", help="the new encoder")
    add_store_flags(parser, required=False)
    parser.add_argument(
        "--map",
        choices=("chosen", "anchors"),
        default="chosen",
        help="chosen: fit_migration's choice; anchors: the anchor path alone",
    )
    parser.add_argument(
        "--save-map", type=Path, default=None, metavar="DIR", help="also save the map used here"
    )
    parser.add_argument(
        "--queries",
        metavar="NAME",
        default=None,
        help="evaluation: the run's encoder whose test rows query the migrated corpus (the new "
        "encoder on another column; default: --target)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from relrep_hf.pipeline import migration

    if args.vectors is None and args.save_map is None:
        _print_recall(args)
        return
    if args.save_map is not None:  # refused before the fit, as the save itself would refuse it
        from relrep_hf.utils.artifacts import check_save_folder

        check_save_folder(args.save_map, "migration_map", what="migration map")
    if args.map == "anchors":
        migration_map = migration.anchor_path_map(args.run_dir, args.source, args.target)
    else:
        migration_map = migration.run_migration_map(args.run_dir, args.source, args.target)
    if args.save_map is not None:
        migration_map.save_pretrained(args.save_map)
        print(f"Saved the migration map ({migration_map.info.get('chosen')}) to {args.save_map}")
    if args.vectors is not None:
        migrate_vectors(args, migration_map)


def _print_recall(args: argparse.Namespace) -> None:
    """The recall every candidate map keeps on the run's test rows, beside re-embedding."""
    from relrep_hf.functional.tables import format_table
    from relrep_hf.pipeline import migration

    report = migration.evaluate_migration(args.run_dir, args.source, args.target, args.queries)
    names = [n for n in report if isinstance(report[n], dict) and "recall@1" in report[n]]
    rows = [
        {
            "corpus": name,
            "R@1": report[name]["recall@1"],
            "R@5": report[name]["recall@5"],
            "MRR": report[name]["mrr"],
            "R@1 / re-embedded R@1": report[name].get("fraction", 1.0),
        }
        | ({"CV R@1 (train rows)": report[name]["cv_recall@1"]} if name != "re-embedded" else {})
        for name in names
    ]
    print(
        f"Queries {report['queries']} against the {report['rows']} test rows of "
        f"{report['source']} migrated to {report['target']} (chosen by cross-validation on the "
        f"training rows: {report['choice']}):\n"
    )
    columns = ["R@1", "R@5", "MRR", "R@1 / re-embedded R@1", "CV R@1 (train rows)"]
    print(format_table(rows, columns) + "\n(in %)")
