"""Issue #46 items 2 and 4 on the database kinds: two ``reembed`` runs at once on one store (two
real processes: the first, ``relrep-hf reembed`` in a subprocess, paused inside its embedding
by `tests.fixtures.killable_reembed`'s hook) -- the second is refused at once, naming the first,
and nothing is written; the first, killed there, is resumed from another working directory
(its staging folder resolved once: beside the database's folder or file, pgvector's in the
embedding cache) to the vectors of an uninterrupted run, with one backup. Real stores: Chroma,
Qdrant local, PostgreSQL + pgvector (pgserver), sqlite-vec; and a parquet file with a relative
``--out``."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from relrep_hf.encoding.extraction_writer import cache_root
from relrep_hf.migration import VectorStoreError, open_store, reembed_store
from relrep_hf.migration.stores.database import StoreBusyError, parse_location
from tests.fixtures import killable_reembed
from tests.fixtures.database_stores import KINDS, build, contents
from tests.fixtures.killable_reembed import SPEC, letters
from tests.migration.test_reembed_databases import NUMBERS, TEXT, body

pytestmark = pytest.mark.slow  # a real database and a second Python process each

ROWS, D_OLD, CHUNK = 13, 4, 5  # three chunks: the first committed, the second hangs
ROOT = Path(__file__).resolve().parents[2]
CLI = "import sys; from relrep_hf.cli import main; sys.exit(main(sys.argv[1:]))"
_names = itertools.count()


def _start(arguments: list[str], marker: Path, cwd: Path) -> subprocess.Popen:
    """``relrep-hf reembed ARGUMENTS`` in a new process (in ``cwd``) that creates ``marker`` and
    sleeps inside its second encoder call (its first chunk committed)."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = os.environ | {"RELREP_TEST_HANG_AT": "2", "RELREP_TEST_MARKER": str(marker),
                        "PYTHONPATH": os.pathsep.join(paths)}  # fmt: skip
    command = [sys.executable, "-c", CLI, "reembed", *arguments, "--encoder", SPEC,
               "--chunk-rows", str(CHUNK), "--batch-size", str(CHUNK), "--quiet"]  # fmt: skip
    return subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)


def _wait_for(marker: Path, child: subprocess.Popen, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not marker.exists():
        if child.poll() is not None:
            raise AssertionError(f"the first run ended (exit {child.returncode}): "
                                 f"{child.stderr.read()[-3000:]}")  # fmt: skip
        assert time.monotonic() < deadline, "the first run never reached its marker"
        time.sleep(0.05)


def _kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)


def _resumed(run, seconds: float = 30):
    """``run()``, again while the killed run's lock is still being released (a server notices
    a dead client's session within moments)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return run()
        except StoreBusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def store(request, tmp_path):
    kind = request.param
    where = request.getfixturevalue("postgres") if kind == "pgvector" else tmp_path
    vectors = np.random.default_rng(2).standard_normal((ROWS, D_OLD)).astype(np.float32)
    return build(kind, where, f"busy{next(_names)}", vectors)


@pytest.mark.parametrize("store", KINDS, indirect=True)
def test_a_second_run_on_a_database_store_is_refused_naming_the_first(store, tmp_path, monkeypatch):
    kind = parse_location(store).kind
    text = ["--text-column", TEXT[kind]] if TEXT[kind] else []
    first_cwd, second_cwd = tmp_path / "first", tmp_path / "second"
    first_cwd.mkdir(), second_cwd.mkdir()
    before = contents(store)
    marker = tmp_path / "first-run-embedding"
    child = _start([store, *text], marker, first_cwd)
    try:
        _wait_for(marker, child)
        monkeypatch.chdir(second_cwd)
        # another encoder, so another staging folder: the store itself is what is held
        with pytest.raises(StoreBusyError, match=rf"another re-embed of it is running \(.*"
                           rf"process {child.pid} on"):  # fmt: skip
            reembed_store(store, NUMBERS, text_column=TEXT[kind], show_progress=False)
    finally:
        _kill(child)
    after = contents(store)  # nothing written by either run
    assert sorted(after, key=str) == sorted(before, key=str)
    assert all(np.array_equal(after[i][1], before[i][1]) for i in before)
    assert open_store(store).backups() == []
    # resumed from another working directory: the first run's committed chunk is found
    killable_reembed.calls = 0
    out = _resumed(lambda: reembed_store(store, SPEC, text_column=TEXT[kind], chunk_rows=CHUNK,
                                         batch_size=CHUNK, resume=True, show_progress=False))  # fmt: skip
    assert killable_reembed.calls == 2  # chunks 1 and 2 of 0..2
    for stored, vector in contents(store).values():
        np.testing.assert_array_equal(vector, letters([body(kind, stored)])[0])
    assert out.backup is not None and open_store(store).read_space().name == SPEC
    homes = [tmp_path, cache_root(None) / "reembed"]  # pgvector's: the embedding cache's
    assert not [p for home in homes for p in home.rglob(".reembed-*")]


def test_a_relative_out_is_resolved_once_and_a_resume_elsewhere_finds_its_staging(
    tmp_path, monkeypatch
):
    texts = [f"stored note {i}: " + "tea and toast " * (i % 5) for i in range(ROWS)]
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(ROWS * D_OLD, np.float32)), D_OLD)
    first_cwd, second_cwd = tmp_path / "first", tmp_path / "second"
    first_cwd.mkdir(), second_cwd.mkdir()
    pq.write_table(pa.table({"text": texts, "embedding": vectors}), first_cwd / "docs.parquet")
    marker = tmp_path / "first-run-embedding"
    child = _start(["docs.parquet", "--out", "new.parquet"], marker, first_cwd)
    try:
        _wait_for(marker, child)
    finally:
        _kill(child)
    (staging,) = first_cwd.glob(".reembed-*")  # beside the output, as resolved at the start
    monkeypatch.chdir(second_cwd)
    old, out = first_cwd / "docs.parquet", first_cwd / "new.parquet"
    with pytest.raises(VectorStoreError, match=f"left 1 committed chunk.*{staging}"):
        reembed_store(old, SPEC, out, chunk_rows=CHUNK, batch_size=CHUNK)
    killable_reembed.calls = 0
    reembed_store(old, SPEC, out, chunk_rows=CHUNK, batch_size=CHUNK, resume=True,
                  show_progress=False)  # fmt: skip
    assert killable_reembed.calls == 2
    np.testing.assert_array_equal(open_store(out).read_all(), letters(texts))
    assert not staging.exists() and not list(second_cwd.iterdir())
