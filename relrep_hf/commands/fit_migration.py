"""``relrep-hf fit-migration``: a run's migration map between two of its encoders, fitted, saved,
measured or applied to stored vectors.

Named for what it fits (`relrep_hf.fit_migration`); ``translate``, its old name, still runs it
and says the new one (`relrep_hf.translate` is latent space translation, not this).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from relrep_hf.commands.arguments import add_command, add_run_dir
from relrep_hf.commands.migrate import add_store_flags, migrate_vectors
from relrep_hf.pipeline.run_file import check_run_folder

NAME, OLD_NAME = "fit-migration", "translate"


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        NAME,
        aliases=[OLD_NAME],
        help="fit a migration map (old name: translate) and migrate old-encoder vectors into a new encoder's space: the map chosen by "
        "cross-validated recall on the run's training rows (the anchor path among the "
        "candidates), with the held-out report (every candidate, the chosen map and the bridge "
        "against re-embedding: Recall@1, retention@10) and a recommendation: migrate, bridge "
        "or re-embed",
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
    parser.add_argument(
        "--direction",
        choices=("store", "queries"),
        default="store",
        help="the search the map is chosen and reported on: store (the stored vectors migrated, "
        "searched by new-encoder queries) or queries (old-encoder vectors mapped to search the "
        "new encoder's store); a map chosen for one can lose the other",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="apply the map to --vectors although its held-out report recommends re-embedding "
        "or nothing (too few held-out rows), or the plan lists what the store's rewrite cannot carry",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON (timings go to stderr)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    if getattr(args, "command", NAME) == OLD_NAME:  # the command line names it; a caller may not
        print(f"relrep-hf {OLD_NAME} is now relrep-hf {NAME}; running it.", file=sys.stderr)
    if args.save_map is not None:  # refused before the fit, as the save itself would refuse it
        from relrep_hf.utils.artifacts import check_save_folder

        check_save_folder(args.save_map, "migration_map", what="migration map")
    check_run_folder(args.run_dir)  # at once, before the pipeline's imports
    from relrep_hf.pipeline import migration

    start = time.perf_counter()
    report = None
    if args.map == "anchors":
        migration_map = migration.anchor_path_map(args.run_dir, args.source, args.target)
    else:
        direction = "corpus" if args.direction == "store" else "queries"
        report, migration_map = migration.evaluate_migration(
            args.run_dir, args.source, args.target, args.queries, direction=direction
        )
    fit_seconds = time.perf_counter() - start
    if report is not None and not args.json:
        _print_report(report)
    # with --json, stdout holds the JSON alone: what the steps below say goes to stderr
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        if args.save_map is not None:
            migration_map.save_pretrained(args.save_map)
            print(
                f"Saved the migration map ({migration_map.info.get('chosen')}) to {args.save_map}"
            )
        if args.vectors is not None:
            start = time.perf_counter()
            migrate_vectors(args, migration_map)
            stream_seconds = time.perf_counter() - start
            print(f"Fit and evaluation {fit_seconds:.2f} s; stream {stream_seconds:.2f} s")
    if args.json and report is not None:
        print(json.dumps(report, indent=2))


def _print_report(report: dict) -> None:
    """Every search's held-out Recall@1 and retention@10 beside re-embedding, and the advice."""
    from relrep_hf.functional.markdown_tables import format_table

    searches = [n for n in report if isinstance(report[n], dict) and "recall@1" in report[n]]
    rows = [
        {
            "corpus": name + (f" ({report[name]['candidate']})" if name == "migrate" else ""),
            "R@1": report[name]["recall@1"],
            "R@1 / re-embedded R@1": report[name]["fraction"],
            "retention@10": report[name]["retention@10"],
        }
        | ({"CV R@1": report[name]["cv_recall@1"]} if "cv_recall@1" in report[name] else {})
        | (
            {"CV retention@10": report[name]["cv_retention@10"]}
            if "cv_retention@10" in report[name]
            else {}
        )
        for name in searches
    ]
    bridge = report.get("bridge_choice")
    print(
        f"Queries {report['queries']} against the {report['rows']} test rows of "
        f"{report['source']}: re-embedded by {report['target']}, migrated to it by every "
        f"candidate (chosen by cross-validation on the training rows: {report['choice']})"
        + (f", or searched through the bridge (queries mapped back by {bridge})" if bridge else "")
        + f"; direction {report.get('direction', 'corpus')}:\n"
    )
    columns = ["R@1", "R@1 / re-embedded R@1", "retention@10", "CV R@1", "CV retention@10"]
    print(format_table(rows, columns) + "\n(in %)")
    print(
        "95% intervals over the held-out queries (Wilson for R@1, a bootstrap for "
        "retention@10): "
        + "; ".join(
            f"{name} R@1 {_interval(report[name], 'recall@1')}, retention@10 "
            f"{_interval(report[name], 'retention@10')}"
            for name in ("migrate", "bridge")
            if name in report
        )
    )
    advice = report["recommendation"]
    print(f"\nRecommendation: {advice['action']}: {advice['reason']}.")


def _interval(search: dict, metric: str) -> str:
    low, high = search.get("intervals", {}).get(metric, (float("nan"), float("nan")))
    return f"[{low:.3f}, {high:.3f}]"
