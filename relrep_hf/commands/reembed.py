"""``relrep-hf reembed``: a store re-embedded from its own text by any encoder the library
loads, written aside and swapped in as ``migrate`` does, resumable (``--resume``), with a dry
run (``--max-rows``) that projects the whole store's time."""

from __future__ import annotations

import argparse

from relrep_hf.commands.arguments import add_command, add_ray_flags, join_ray, step_keywords
from relrep_hf.utils.defaults import DEFAULT_EMBED_BATCH_SIZE, DEFAULT_REEMBED_CHUNK_ROWS


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "reembed",
        help="re-embed every row of a store from its text (a column, or a file of id,text) with "
        "any encoder spec, written aside and swapped in; resumable",
    )
    parser.add_argument(
        "store",
        metavar="STORE",
        help="a store with a text column: a .parquet file, a datasets folder, a LanceDB folder, "
        "a Chroma, Qdrant, pgvector or sqlite-vec URI (--engine ray: a folder of parquet shards, "
        "a datasets folder, a Lance dataset such as a LanceDB table's TABLE.lance folder)",
    )
    parser.add_argument(
        "--encoder",
        required=True,
        metavar="SPEC",
        help="the new encoder: ID[@REV][:POOLING][:LAYER] (e.g. 'minilm:mean'), st:FOLDER_OR_ID, "
        "a GGUF file, py:module:function",
    )
    parser.add_argument(
        "--out", default=None, help="the new store (same kind; default: STORE itself, in place)"
    )
    parser.add_argument(
        "--text-column",
        default=None,
        help="the column (or field) of texts (default: text; a Chroma collection's documents; "
        "a Qdrant payload field, a pgvector or sqlite-vec column)",
    )
    parser.add_argument(
        "--texts",
        default=None,
        metavar="FILE",
        help="instead of the store's text column: a .jsonl or .parquet file of --id-column and "
        "--text-column, joined on the store's --id-column",
    )
    parser.add_argument(
        "--id-column",
        default=None,
        help="the column of ids (with --texts; default: id, sqlite-vec's rowid, pgvector's key)",
    )
    parser.add_argument(
        "--column", default=None, help="the vector column (default: embedding/vector)"
    )
    parser.add_argument("--table", default=None, help="the LanceDB table (default: the only one)")
    parser.add_argument(
        "--chunk-rows",
        type=int,
        default=DEFAULT_REEMBED_CHUNK_ROWS,
        help="rows per committed chunk (what --resume keeps)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=DEFAULT_EMBED_BATCH_SIZE, help="texts per encoder call"
    )
    switches = {
        "--overwrite": "replace --out (a store of the same kind only)",
        "--skip-missing": "leave rows without text out of the new store (they are named; the "
        "old store or its backup keeps them) instead of refusing (--engine local)",
        "--resume": "go on from the committed chunks (--engine ray: the shards) of a killed run",
        "--force": "re-embed although the plan lists what would not be carried (a LanceDB or "
        "Chroma embedding function of the old model)",
    }
    for flag, text in switches.items():
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument(
        "--max-rows",
        type=int,
        default=None,
        metavar="N",
        help="dry run: embed the first N rows, write nothing, print rows/s and the projected time",
    )
    parser.add_argument(
        "--dtype",
        choices=["float16", "float32", "float64"],
        default=None,
        help="the new vectors' dtype (default: the store's)",
    )
    add_engine_flags(parser)
    parser.set_defaults(func=run)


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """--engine and the Ray cluster's flags."""
    parser.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: this process; ray: encoder actors on Ray, one shard of a folder of parquet "
        "shards or a datasets folder (one fragment of a Lance dataset) at a time, into a new "
        "--out (pip install 'relrep-hf[ray]')",
    )
    add_ray_flags(parser)


# what --engine ray does not take: the local path's texts by id, database tables, dropped rows
LOCAL_ONLY = ("texts", "id_column", "table", "skip_missing", "force")


def run(args: argparse.Namespace) -> None:
    from relrep_hf.migration.reembed import reembed_store

    join_ray(args)
    if args.engine == "ray":
        _run_ray(args)
        return

    names = ("text_column", "texts", "id_column", "column", "table", "chunk_rows", "batch_size")
    result = reembed_store(
        args.store,
        args.encoder,
        args.out,
        **step_keywords(
            args, *names, "overwrite", "resume", "max_rows", "dtype", "skip_missing", "force"
        ),
    )
    if args.max_rows is not None:
        print(result)
        return
    print(f"Re-embedded {args.store} with {args.encoder} into {result}")


def _run_ray(args: argparse.Namespace) -> None:
    from relrep_hf.migration.ray_reembed import estimate_shards, reembed_shards

    local = [name for name in LOCAL_ONLY if getattr(args, name)]
    if local:
        raise ValueError(
            f"--{local[0].replace('_', '-')} applies to --engine local, not --engine ray (a "
            "sharded store re-embedded from its own text column)."
        )
    where = {"text_column": args.text_column or "text", "column": args.column}
    if args.max_rows is not None:
        print(estimate_shards(args.store, args.encoder, args.max_rows, **where,
                              batch_size=args.batch_size))  # fmt: skip
        return
    if args.out is None:
        raise ValueError(
            "--engine ray writes the new shards into a new folder and never replaces the input "
            "in place: give --out."
        )
    out = reembed_shards(
        args.store,
        args.encoder,
        args.out,
        **where,
        **step_keywords(args, "chunk_rows", "batch_size", "dtype", "overwrite", "resume"),
        num_workers=args.num_workers,
        num_gpus=args.num_gpus,
    )
    print(f"Re-embedded {args.store} with {args.encoder} into {out} on Ray")
