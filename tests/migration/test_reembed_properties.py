"""Property test of ``reembed_store`` (issue #46 item 2) over file kinds x dtypes x sizes x kill
points, as tests/migration/test_store_properties.py does for migrations: a forked child
re-embeds and is SIGKILLed inside the encoder call of chunk ``k`` (`tests.fixtures.
killable_reembed`'s hook: ``k`` chunks committed), then ``resume=True`` finishes the run. The
properties: until the swap the original is byte-identical and no output exists; the resumed
result equals an uninterrupted run's (a parquet file byte for byte, a datasets folder's rows,
schema and recorded space); after it nothing is left beside the stores but an in-place parquet
file's backup, which holds the original bytes."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings, strategies as st

from relrep_hf.migration import open_store, reembed_store
from tests.fixtures import killable_reembed
from tests.fixtures.killable_reembed import SPEC
from tests.migration.test_store_properties import SETTINGS, tree_digest

NAMES = {"parquet": "docs.parquet", "datasets": "docs"}
D_OLD = 3


def write(kind: str, path: Path, rows: int, dtype: str) -> Path:
    """A ``kind`` store of ``rows`` texts (ids 0, 2, 4, ...) and old ``dtype`` vectors."""
    texts = [f"note {i}: " + "tea and toast " * (i % 4) for i in range(rows)]
    old = np.random.default_rng(rows).standard_normal((rows, D_OLD)).astype(dtype)
    column = pa.FixedSizeListArray.from_arrays(pa.array(old.reshape(-1)), D_OLD)
    table = pa.table({"id": np.arange(rows) * 2, "text": texts, "embedding": column})
    if kind == "parquet":
        pq.write_table(table, path)
    else:
        datasets.Dataset(table).save_to_disk(str(path))
    return path


def result(kind: str, path: Path) -> object:
    """What a re-embed wrote: a parquet file's bytes; a datasets folder's rows, features and
    recorded space (its state file holds a fingerprint of the run)."""
    if kind == "parquet":
        return path.read_bytes()
    store = open_store(path)
    loaded = datasets.load_from_disk(str(path))
    return loaded[:], loaded.features, store.read_space().to_json()


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(sorted(NAMES)))
    dtype = draw(st.sampled_from(["float32", "float16"]))
    chunk_rows = draw(st.integers(2, 3))
    size = draw(st.sampled_from(["one row", "a chunk", "a chunk + 1", "a few chunks"]))
    rows = {"one row": 1, "a chunk": chunk_rows, "a chunk + 1": chunk_rows + 1,
            "a few chunks": 3 * chunk_rows + 1}[size]  # fmt: skip
    chunks = -(-rows // chunk_rows)
    kill_at = draw(st.integers(0, chunks - 1))  # chunks committed when killed
    in_place = draw(st.booleans())
    return kind, dtype, chunk_rows, rows, kill_at, in_place


def _killed_at(store: Path, out: Path | None, chunk_rows: int, kill_at: int, marker: Path):
    """Fork a re-embed of ``store`` into ``out``; SIGKILL it inside chunk ``kill_at``'s
    encoder call (``kill_at`` chunks committed)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            killable_reembed.calls = 0
            os.environ |= {
                "RELREP_TEST_HANG_AT": str(kill_at + 1),
                "RELREP_TEST_MARKER": str(marker),
            }
            reembed_store(store, SPEC, out, chunk_rows=chunk_rows, batch_size=chunk_rows,
                          show_progress=False)  # fmt: skip
        finally:
            os._exit(0)
    deadline = time.monotonic() + 120
    while not marker.exists():
        done, _ = os.waitpid(pid, os.WNOHANG)
        assert done == 0, "the re-embed ended before the kill point"
        assert time.monotonic() < deadline, "the re-embed never reached the kill point"
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


@pytest.mark.slow  # a forked child and three re-embeds an example: 103 s (15 s of CPU) on 2 busy cores
@settings(SETTINGS, max_examples=8)
@given(case=cases())
def test_a_reembed_killed_at_any_chunk_resumes_to_an_uninterrupted_runs_result(
    case, tmp_path_factory
):
    kind, dtype, chunk_rows, rows, kill_at, in_place = case
    reference = tmp_path_factory.mktemp("reference")
    whole = write(kind, reference / NAMES[kind], rows, dtype)
    reembed_store(
        whole, SPEC, chunk_rows=chunk_rows, batch_size=chunk_rows, dtype=dtype, show_progress=False
    )  # fmt: skip (in place: the uninterrupted run)
    folder = tmp_path_factory.mktemp(kind)
    old = write(kind, folder / NAMES[kind], rows, dtype)
    out = None if in_place else folder / ("new_" + NAMES[kind])
    before = tree_digest(old)
    original = (
        shutil.copy2(old, folder.parent / f"{folder.name}.original") if kind == "parquet" else None
    )
    _killed_at(old, out, chunk_rows, kill_at, folder.parent / f"{folder.name}.marker")
    assert tree_digest(old) == before  # untouched until the swap
    assert out is None or not out.exists()
    (staging,) = folder.glob(".reembed-*/")
    assert len(list(staging.glob("chunk-*.npy"))) == kill_at
    reembed_store(old, SPEC, out, chunk_rows=chunk_rows, batch_size=chunk_rows, dtype=dtype,
                  resume=True, show_progress=False)  # fmt: skip
    written = old if in_place else out
    assert result(kind, written) == result(kind, whole)
    assert str(open_store(written).dtype) == dtype
    left = sorted(p.name for p in folder.iterdir() if p.name not in {old.name, written.name})
    if in_place and kind == "parquet":  # the replaced file, kept for rollback until cleanup
        (backup,) = left
        assert backup.startswith(".docs.parquet.backup-")
        assert (folder / backup).read_bytes() == Path(original).read_bytes()
    else:
        assert left == []
    if not in_place:
        assert tree_digest(old) == before
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(reference, ignore_errors=True)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the forked child is safe from the parent's thread pools
    yield
    torch.set_num_threads(threads)
