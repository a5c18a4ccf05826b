"""``relrep-hf``: the pipeline from the command line.

    relrep-hf embed OUT --encoder minilm:mean:-1 --encoder minilm:cls:-1 ...
    relrep-hf fit OUT --held-out minilm-cls-L-1
    relrep-hf onboard OUT --encoder minilm:mean:3
    relrep-hf evaluate OUT
    relrep-hf translate OUT --source OLD --target NEW --vectors old.npy --out new.npy
    relrep-hf migrate MAP --vectors old.parquet --out new.parquet
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
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from relrep_hf.cli_parser import _method_args, _training_args, build_parser
from relrep_hf.encoding.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.encoding.parallel_corpus import PARALLEL_VERSES_ID  # light: no datasets until called
from relrep_hf.training.anchor_methods import ANCHOR_METHODS
from relrep_hf.utils.defaults import (
    DEFAULT_ENCODERS,
    DEFAULT_METHOD,
    MULTILINGUAL_DEMO_ROWS,
    MULTILINGUAL_ENCODERS,
    QUICK_DEMO_ROWS,
)

__all__ = ["build_parser", "main", "run"]


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
        for name, why in ANCHOR_METHODS[args.method].unused.items():
            flag = f"--{name.replace('_', '-')}"
            if {flag, f"--{name}"} & getattr(args, "given", set()):
                raise ValueError(
                    f"{flag} does not apply to --method {args.method}: {why}. Drop {flag}, or "
                    "choose another --method."
                )
        anchor_set = pipeline.fit(
            args.run_dir,
            held_out=args.held_out,
            method=args.method,
            args=_method_args(args, args.method),
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
    elif args.command in ("translate", "migrate"):
        _translate(args) if args.command == "translate" else _migrate_store(args, args.map)
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
        fit_args = dataclasses.replace(_method_args(args, DEFAULT_METHOD), support_size=None)
        pipeline.fit(args.run_dir, method=DEFAULT_METHOD, args=fit_args)
        report = pipeline.evaluate(
            args.run_dir, head_epochs=sizes["head_epochs"], param_args=_training_args(args)
        )
        _print_report(report)
        print(
            f"\nWrote {args.run_dir}/: anchor_set/, projectors/, heads/, report.json, report.md, "
            f"stitching_heatmap.png, relative_spaces.png ({time.perf_counter() - start:.0f} s)"
        )


def _migrate_store(args: argparse.Namespace, migration_map) -> None:
    from relrep_hf.pipeline import migration

    if args.vectors is None or args.out is None:
        raise ValueError("--vectors needs --out, where the migrated store goes (same kind).")
    out = migration.migrate_store(
        migration_map,
        args.vectors,
        args.out,
        column=args.column,
        table=args.table,
        chunk_rows=args.chunk_rows,
        overwrite=args.overwrite,
        show_progress=False if args.quiet else None,
    )
    print(f"Migrated {args.vectors} into {out}")


def _translate(args: argparse.Namespace) -> None:
    from relrep_hf.pipeline import migration

    if args.vectors is not None or args.save_map is not None:
        if args.map == "anchors":
            migration_map = migration.anchor_path_map(args.run_dir, args.source, args.target)
        else:
            migration_map = migration.run_migration_map(args.run_dir, args.source, args.target)
        if args.save_map is not None:
            migration_map.save_pretrained(args.save_map)
            print(
                f"Saved the migration map ({migration_map.info.get('chosen')}) to {args.save_map}"
            )
        if args.vectors is not None:
            _migrate_store(args, migration_map)
        return
    from relrep_hf.functional.tables import format_table

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
