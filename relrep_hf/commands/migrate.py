"""``relrep-hf migrate``: stored vectors streamed through a saved migration map, and the store
flags that ``translate`` shares."""

from __future__ import annotations

import argparse
from typing import Any

from relrep_hf.commands.arguments import add_command, add_ray_flags, join_ray, step_keywords


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "migrate",
        help="stream stored vectors through a saved migration map (folder or Hub id)",
    )
    parser.add_argument("map", metavar="MAP", help="a saved migration map: folder or Hub id")
    add_store_flags(parser, required=True)
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print what the migration carries and what it cannot, and write nothing",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="migrate although the plan lists what would not be carried (triggers, foreign "
        "keys of other tables, partitioning, ...), or the map's own held-out report recommends "
        "re-embedding, or nothing (fewer held-out rows than a recommendation needs)",
    )
    parser.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: this process; ray: one Ray task per shard of a folder of parquet shards, "
        "a datasets folder or a Lance dataset (pip install 'relrep-hf[ray]'; --address or "
        "RAY_ADDRESS names the cluster)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="--engine ray: keep the verified shards of an earlier run that stopped",
    )
    add_ray_flags(parser, workers=False)
    parser.add_argument(
        "--max-rows",
        type=int,
        default=None,
        metavar="N",
        help="dry run: migrate the first N rows to a scratch file, write nothing, print rows/s "
        "and the whole store's projected time and cost",
    )
    parser.set_defaults(func=run)


def add_store_flags(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """--vectors, --out and how to read and write them (translate, migrate)."""
    parser.add_argument(
        "--vectors",
        type=str,
        required=required,
        default=None,
        help="old-encoder vectors: a .npy, .safetensors, .parquet or FAISS flat index "
        "(.faiss/.index) file, a datasets folder, a LanceDB database folder, or a database "
        "URI: qdrant:PATH#COLLECTION, chroma:PATH#COLLECTION, sqlite-vec:PATH#TABLE, "
        "postgresql://USER@HOST/DB?table=TABLE (pgvector)",
    )
    parser.add_argument(
        "--out",
        type=str,
        required=required,
        default=None,
        help="the new store (same kind; for a database, the same database's collection/table "
        "searches use: swapped in, the old one kept as a backup)",
    )
    parser.add_argument(
        "--column", default=None, help="the vector column or tensor (default: embedding/vector)"
    )
    parser.add_argument(
        "--table",
        default=None,
        help="the LanceDB table (default: the only one), or a database's collection/table",
    )
    parser.add_argument("--chunk-rows", type=int, default=32768, help="rows per chunk")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace --out (a store of the same kind only) once the new store is complete",
    )
    parser.add_argument(
        "--dtype",
        choices=["float16", "float32", "float64"],
        default=None,
        help="the new vectors' dtype (default: the store's; float32 where float16 overflows)",
    )


def migrate_vectors(args: argparse.Namespace, migration_map: Any) -> None:
    """``--vectors`` through ``migration_map`` (a `MigrationMap`, a folder or a Hub id) into
    ``--out``."""
    from relrep_hf.migration.migrate import migrate_store, plan_migration

    if args.vectors is None or args.out is None:
        raise ValueError("--vectors needs --out, where the migrated store goes (same kind).")
    where = {"column": args.column, "table": args.table}
    print(plan_migration(migration_map, args.vectors, args.out, **where).text())
    if getattr(args, "plan", False):
        print("Nothing was written (--plan).")
        return
    out = migrate_store(
        migration_map,
        args.vectors,
        args.out,
        force=getattr(args, "force", False),
        **step_keywords(args, "column", "table", "chunk_rows", "overwrite", "dtype"),
    )
    print(f"Migrated {args.vectors} into {out}")
    if getattr(out, "backup", None):  # a database store swapped in place
        print(f"The replaced vectors are kept as {out.backup}")


def run(args: argparse.Namespace) -> None:
    if args.max_rows is not None:
        from relrep_hf.migration.migrate import estimate_migration

        where = {"column": args.column, "table": args.table, "chunk_rows": args.chunk_rows}
        print(estimate_migration(args.map, args.vectors, args.max_rows, **where))
        return
    join_ray(args)
    if args.engine == "ray":
        from relrep_hf.migration.ray_shards import migrate_shards

        out = migrate_shards(
            args.map,
            args.vectors,
            args.out,
            **step_keywords(args, "column", "chunk_rows", "overwrite", "dtype", "resume", "force"),
        )
        print(f"Migrated {args.vectors} into {out} on Ray")
        return
    if args.resume:
        raise ValueError("--resume applies to --engine ray (a sharded store), not --engine local.")
    migrate_vectors(args, args.map)
