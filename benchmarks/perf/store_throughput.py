"""Migrating every file store kind: ``migrate_store`` against the plain pass of that format.

For each file kind ``migrate_store`` reads (.npy, .safetensors, parquet, a ``datasets`` folder, a
FAISS flat index, a LanceDB table), a store of N x 384 float32 vectors (with int64 ids where the
kind holds other columns) is mapped to 768-d by ``migrate_store`` (checks in and out, lock,
written aside, fsync, rename) and by the pass a careful engineer would write with that format's
own library, at the same chunk size: NumPy memory maps (.npy), ``safe_open`` slices +
``save_file`` (.safetensors), ``iter_batches`` + ``ParquetWriter`` (parquet), ``with_format
("numpy").map`` + ``save_to_disk`` (datasets), ``reconstruct_n`` + a new ``IndexIDMap2`` (FAISS, a
cosine index: unit rows, written unit again), ``to_batches`` + ``create_table`` (LanceDB). Runs
interleaved, medians; the two outputs compared on their first and last rows; each one's peak RSS
growth measured in a fresh process (`benchmarks.common.peak_memory`, the libraries imported
before). Each kind's row is printed as it is measured.

    python -m benchmarks store_throughput [--quick] [--rows N] [--kinds npy parquet ...]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import Table, interleaved_medians, peak_memory, row
from relrep_hf import MigrationMap, migrate_store

D_IN, D_OUT, CHUNK_ROWS = 384, 768, 32768
ROWS, QUICK_ROWS = 200_000, 20_000
KINDS = ("npy", "safetensors", "parquet", "datasets", "faiss", "lancedb")
PACKAGES = {"safetensors": ("safetensors",), "datasets": ("datasets",), "faiss": ("faiss",),
            "lancedb": ("lancedb",)}  # fmt: skip
SUFFIX = {"npy": ".npy", "safetensors": ".safetensors", "parquet": ".parquet", "faiss": ".faiss"}
SAMPLE = 256  # rows compared at each end

for _name in ("faiss", "lancedb", "datasets", "safetensors.numpy", "pyarrow.parquet",
              "relrep_hf.migration.stores"):  # fmt: skip
    with contextlib.suppress(ImportError):  # imported here, so a peak measures the work alone
        importlib.import_module(_name)
with contextlib.suppress(ImportError):
    import datasets

    datasets.disable_progress_bars()  # a bar per map and save would bury the table


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages of each kind."""
    return dict(PACKAGES)


def _map() -> MigrationMap:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(D_IN, D_OUT, generator=generator) / D_IN**0.5
    return MigrationMap(weight, torch.randn(D_OUT, generator=generator))


def _parameters() -> tuple[np.ndarray, np.ndarray]:
    return _map().numpy_parameters()  # weight [D_IN, D_OUT], bias [D_OUT], float32


def _chunks(rows: int, unit: bool) -> Iterator[tuple[int, np.ndarray]]:
    """``(start, vectors [n, D_IN])`` of the store, chunk by chunk (unit rows for FAISS)."""
    generator = np.random.default_rng(0)
    for start in range(0, rows, CHUNK_ROWS):
        chunk = generator.standard_normal((min(CHUNK_ROWS, rows - start), D_IN), dtype=np.float32)
        if unit:
            chunk /= np.linalg.norm(chunk, axis=1, keepdims=True)
        yield start, chunk


def _batch(start: int, vectors: np.ndarray):
    import pyarrow as pa

    ids = pa.array(np.arange(start, start + len(vectors), dtype=np.int64))
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
    return pa.RecordBatch.from_arrays([ids, column], names=["id", "embedding"])


def make_store(kind: str, folder: Path, rows: int) -> Path:
    """A ``kind`` store of ``rows`` x D_IN float32 vectors (and ids) in ``folder``."""
    path = folder / f"old{SUFFIX.get(kind, '')}"
    if kind == "npy":
        out = np.lib.format.open_memmap(path, "w+", np.float32, (rows, D_IN))
        for start, chunk in _chunks(rows, False):
            out[start : start + len(chunk)] = chunk
        out.flush()
    elif kind == "safetensors":
        from safetensors.numpy import save_file

        vectors = np.concatenate([chunk for _, chunk in _chunks(rows, False)])
        save_file({"embedding": vectors, "ids": np.arange(rows, dtype=np.int64)}, str(path))
    elif kind in ("parquet", "datasets", "lancedb"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        batches = [_batch(start, chunk) for start, chunk in _chunks(rows, False)]
        if kind == "parquet":
            pq.write_table(pa.Table.from_batches(batches), path)
        elif kind == "datasets":
            import datasets

            datasets.Dataset(pa.Table.from_batches(batches)).save_to_disk(str(path))
        else:
            import lancedb

            lancedb.connect(str(path)).create_table("docs", data=pa.Table.from_batches(batches))
    else:
        import faiss

        index = faiss.IndexIDMap2(faiss.IndexFlatIP(D_IN))
        for start, chunk in _chunks(rows, True):
            index.add_with_ids(chunk, np.arange(start, start + len(chunk), dtype=np.int64))
        faiss.write_index(index, str(path))
    return path


def ours(kind: str, source: Path, out: Path) -> None:
    """`migrate_store` with its defaults, over ``out`` (``overwrite``)."""
    migrate_store(_map(), source, out, chunk_rows=CHUNK_ROWS, overwrite=True, show_progress=False)


def _fresh(out: Path) -> None:
    if out.is_dir():
        shutil.rmtree(out)
    out.unlink(missing_ok=True)


def plain(kind: str, source: Path, out: Path) -> None:
    """The plain pass of ``kind`` with its own library (over ``out``, removed first)."""
    weight, bias = _parameters()
    _fresh(out)
    if kind == "npy":
        vectors = np.load(source, mmap_mode="r")
        result = np.lib.format.open_memmap(out, "w+", np.float32, (len(vectors), D_OUT))
        for start in range(0, len(vectors), CHUNK_ROWS):
            result[start : start + CHUNK_ROWS] = vectors[start : start + CHUNK_ROWS] @ weight + bias
        result.flush()
    elif kind == "safetensors":
        from safetensors import safe_open
        from safetensors.numpy import save_file

        with safe_open(str(source), framework="numpy") as file:
            vectors = file.get_slice("embedding")
            rows = vectors.get_shape()[0]
            result = np.empty((rows, D_OUT), np.float32)  # save_file takes whole arrays
            for start in range(0, rows, CHUNK_ROWS):
                stop = min(start + CHUNK_ROWS, rows)  # a slice past the end is an error here
                result[start:stop] = vectors[start:stop] @ weight + bias
            save_file({"embedding": result, "ids": file.get_tensor("ids")}, str(out))
    elif kind == "parquet":
        _plain_parquet(source, out, weight, bias)
    elif kind == "datasets":
        _plain_datasets(source, out, weight, bias)
    elif kind == "faiss":
        _plain_faiss(source, out, weight, bias)
    else:
        _plain_lancedb(source, out, weight, bias)


def _new_batch(batch, weight: np.ndarray, bias: np.ndarray):
    import pyarrow as pa

    rows = batch.column("embedding")
    old = rows.flatten().to_numpy().reshape(len(rows), D_IN)
    column = pa.FixedSizeListArray.from_arrays(pa.array((old @ weight + bias).reshape(-1)), D_OUT)
    return pa.RecordBatch.from_arrays([batch.column("id"), column], names=["id", "embedding"])


def _plain_parquet(source: Path, out: Path, weight: np.ndarray, bias: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.int64()), ("embedding", pa.list_(pa.float32(), D_OUT))])
    with pq.ParquetWriter(out, schema) as writer:
        for batch in pq.ParquetFile(source).iter_batches(batch_size=CHUNK_ROWS):
            writer.write_batch(_new_batch(batch, weight, bias))


def _plain_datasets(source: Path, out: Path, weight: np.ndarray, bias: np.ndarray) -> None:
    import datasets

    old = datasets.load_from_disk(str(source)).with_format("numpy")
    features = old.features.copy()
    features["embedding"] = datasets.List(datasets.Value("float32"), length=D_OUT)
    cache = out.with_name(f"{out.name}.cache.arrow")
    new = old.map(
        lambda rows: {"embedding": rows["embedding"] @ weight + bias},
        batched=True,
        batch_size=CHUNK_ROWS,
        features=features,
        cache_file_name=str(cache),
        load_from_cache_file=False,
    )
    new.save_to_disk(str(out))
    del new
    cache.unlink()


def _plain_faiss(source: Path, out: Path, weight: np.ndarray, bias: np.ndarray) -> None:
    import faiss

    index = faiss.read_index(str(source))
    flat, ids = faiss.downcast_index(index.index), faiss.vector_to_array(index.id_map)
    new = faiss.IndexIDMap2(faiss.IndexFlatIP(D_OUT))
    for start in range(0, flat.ntotal, CHUNK_ROWS):
        chunk = flat.reconstruct_n(start, min(CHUNK_ROWS, flat.ntotal - start))
        vectors = np.ascontiguousarray(chunk @ weight + bias)
        faiss.normalize_L2(vectors)  # a cosine index: unit rows
        new.add_with_ids(vectors, ids[start : start + len(chunk)])
    faiss.write_index(new, str(out))


def _plain_lancedb(source: Path, out: Path, weight: np.ndarray, bias: np.ndarray) -> None:
    import lancedb
    import pyarrow as pa

    old = lancedb.connect(str(source)).open_table("docs")
    schema = pa.schema([("id", pa.int64()), ("embedding", pa.list_(pa.float32(), D_OUT))])
    reader = old.search().limit(None).to_batches(CHUNK_ROWS)
    batches = (_new_batch(batch, weight, bias) for batch in reader)
    data = pa.RecordBatchReader.from_batches(schema, batches)
    lancedb.connect(str(out)).create_table("docs", data=data, schema=schema)


def sample(kind: str, path: Path, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The ids and vectors of the first and last `SAMPLE` rows of the store at ``path``."""
    picked = np.r_[0 : min(SAMPLE, rows), max(rows - SAMPLE, 0) : rows]
    if kind == "npy":
        return picked, np.asarray(np.load(path, mmap_mode="r")[picked])
    if kind == "safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as file:
            return file.get_tensor("ids")[picked], file.get_tensor("embedding")[picked]
    if kind == "faiss":
        import faiss

        index = faiss.read_index(str(path))
        flat = faiss.downcast_index(index.index)
        vectors = np.stack([flat.reconstruct(int(i)) for i in picked])
        return faiss.vector_to_array(index.id_map)[picked], vectors
    if kind == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path).take(picked)
    elif kind == "datasets":
        import datasets

        table = datasets.load_from_disk(str(path)).with_format("arrow")[picked.tolist()]
    else:
        import lancedb

        found = lancedb.connect(str(path)).open_table("docs").search().limit(None)
        found = found.where(f"id < {SAMPLE} OR id >= {rows - SAMPLE}").to_arrow()
        table = found.sort_by("id")
    vectors = table.column("embedding").combine_chunks().flatten().to_numpy()
    return table.column("id").to_numpy(), vectors.reshape(len(picked), -1)


def _equal(kind: str, a: Path, b: Path, rows: int) -> bool:
    (ids_a, vectors_a), (ids_b, vectors_b) = sample(kind, a, rows), sample(kind, b, rows)
    return bool(np.array_equal(ids_a, ids_b) and np.allclose(vectors_a, vectors_b, atol=1e-4))


def measure(kind: str, rows: int, folder: Path, *, repeats: int, memory: bool) -> dict:
    """One kind: medians of both passes (interleaved), outputs compared, peak RSS growth."""
    where = folder / kind
    where.mkdir()
    try:
        source = make_store(kind, where, rows)
        a, b = where / f"plain{SUFFIX.get(kind, '')}", where / f"ours{SUFFIX.get(kind, '')}"
        times = interleaved_medians(
            {"plain": lambda: plain(kind, source, a), "ours": lambda: ours(kind, source, b)},
            repeats=repeats,
            warmup=1,
        )
        same = _equal(kind, a, b, rows)
        peaks = {"plain": float("nan"), "ours": float("nan")}
        if memory:
            peaks = {
                name: peak_memory(function, kind, source, out)[1] / 2**20
                for name, function, out in (("plain", plain, a), ("ours", ours, b))
            }
    finally:
        shutil.rmtree(where, ignore_errors=True)
    return row(
        f"migrate_store {rows:,} x {D_IN} -> {D_OUT} {kind}",
        f"the plain {kind} pass with its own library",
        times["plain"],
        times["ours"],
        "s",
        peak_rss_mib=peaks["ours"],
        baseline_peak_rss_mib=peaks["plain"],
        outputs_equal=same,
        load=os.getloadavg()[0],
    )


def run(
    quick: bool = False,
    rows: int | None = None,
    kinds: Sequence[str] = KINDS,
    repeats: int | None = None,
) -> list[dict]:
    """Each kind whose package is installed, its row printed as it is measured."""
    rows = rows or (QUICK_ROWS if quick else ROWS)
    repeats = repeats or 3
    table = Table(
        f"migrate_store against the plain pass, {rows:,} x {D_IN} -> {D_OUT} float32, chunks "
        f"of {CHUNK_ROWS:,}, {torch.get_num_threads()} thread(s), medians of {repeats}",
        [("kind", 12, ""), ("ours s", 8, ".2f"), ("plain s", 8, ".2f"), ("ratio", 6, ".2f"),
         ("ours MiB", 9, ".0f"), ("plain MiB", 10, ".0f"), ("equal", 6, ""), ("load", 5, ".1f")],
    )  # fmt: skip
    results = []
    folder = Path(tempfile.mkdtemp(prefix="relrep-bench-stores-"))
    try:
        for kind in kinds:
            missing = [p for p in PACKAGES.get(kind, ()) if importlib.util.find_spec(p) is None]
            if missing:
                print(f"  {kind}: skipped, needs {', '.join(missing)}", flush=True)
                continue
            r = measure(kind, rows, folder, repeats=repeats, memory=not quick)
            table.add(kind, r["value"], r["baseline_value"], r["ratio"], r["peak_rss_mib"],
                      r["baseline_peak_rss_mib"], r["outputs_equal"], r["load"])  # fmt: skip
            results.append(r)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks store_throughput", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows, no memory")
    parser.add_argument("--rows", type=int, default=None, help=f"rows (default {ROWS:,})")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--repeats", type=int, default=None, help="timed runs of each (3)")
    args = parser.parse_args(argv)
    run(args.quick, args.rows, args.kinds, args.repeats)
