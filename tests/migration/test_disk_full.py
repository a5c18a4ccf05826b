"""A full disk during a store's rewrite (issue #46 item 4): a clear error naming the bytes
needed and free, nothing left behind (no partial file, no lock, no backup table), the input
intact. Before, a .npy migration written through a memory map died of SIGBUS (exit 135) and
left its ``.partial`` and ``.lock``; sqlite-vec hid SQLITE_FULL behind "cannot rollback".

The disk fills for real, without root: a forked child lowers its file size limit
(``RLIMIT_FSIZE``; SIGXFSZ ignored, so a write past it fails with EFBIG as a full disk fails with
ENOSPC) and migrates; where this process may mount a tmpfs (root), a 1 MiB one is filled too.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import subprocess
import traceback
from pathlib import Path

import numpy as np
import pytest
import torch

from relrep_hf import MigrationMap, migrate_store
from relrep_hf.migration import open_store
from relrep_hf.migration.disk import DiskFullError, check_free_space
from tests.fixtures.database_stores import build

ROWS, D_OLD, D_NEW = 2000, 4, 64
LIMIT = 256 * 1024  # bytes a child may write per file: the input fits, the output does not


def wide_map(width: int = D_NEW) -> MigrationMap:
    generator = torch.Generator().manual_seed(0)
    return MigrationMap(torch.randn(D_OLD, width, generator=generator), torch.zeros(width))


def vectors() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((ROWS, D_OLD)).astype(np.float32)


def _child(result: Path, limit: int, args: tuple, kwargs: dict) -> None:
    """In the fork: at most ``limit`` bytes per file, then the migration; what it raised (type
    and message) written to ``result``."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        migrate_store(*args, show_progress=False, **kwargs)
        text = "no error"
    except BaseException as error:
        text = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
    result.write_text(text[:4000])


def migrate_in_child(tmp_path: Path, *args, limit: int = LIMIT, **kwargs) -> str:
    """``migrate_store(*args)`` in a forked child whose files may not grow past ``limit``;
    what it raised. A child killed by a signal (SIGBUS) fails the test."""
    result = tmp_path / "result.txt"
    process = multiprocessing.get_context("fork").Process(
        target=_child, args=(result, limit, args, kwargs)
    )
    process.start()
    process.join(120)
    assert process.exitcode == 0, f"the migration's process died (exit {process.exitcode})"
    return result.read_text()


@pytest.mark.parametrize("suffix", [".npy", ".safetensors"])
def test_a_memory_mapped_file_store_past_the_size_limit_is_a_clear_error(tmp_path, suffix):
    folder = tmp_path / "store"
    folder.mkdir()
    old = folder / f"old{suffix}"
    if suffix == ".npy":
        np.save(old, vectors())
    else:
        from safetensors.numpy import save_file

        save_file({"embedding": vectors(), "ids": np.arange(ROWS)}, str(old), {"note": "mine"})
    before = old.read_bytes()
    for out in (folder / f"new{suffix}", old):  # a new file, and the input replaced in place
        error = migrate_in_child(tmp_path, wide_map(), old, out, overwrite=out == old)
        message = " ".join(error.split())
        assert message.startswith("DiskFullError: "), error
        needed = f"it needs {ROWS * D_NEW * 4 + (128 if suffix == '.npy' else 0):,} bytes"
        assert (needed in message) == (suffix == ".npy"), message  # safetensors: + its header
        assert "ulimit -f" in message and "free" in message and "input is as it was" in message
        assert sorted(os.listdir(folder)) == [old.name]  # no partial file, no lock
        assert old.read_bytes() == before
    assert open_store(old).read_all().shape == (ROWS, D_OLD)


def test_not_enough_free_space_is_refused_before_writing(tmp_path):
    free = __import__("shutil").disk_usage(tmp_path).free
    with pytest.raises(DiskFullError, match=r"it needs [\d,]+ bytes .* more in .* which has"):
        check_free_space(tmp_path, free + 2**30, "npy store 'x'")
    check_free_space(tmp_path, 1, "npy store 'x'")


def test_sqlite_full_is_reported_and_the_table_stays(tmp_path):
    """A sqlite-vec table migrated in place grows its file past the limit: SQLite's own error
    (not "cannot rollback"), the transaction rolled back, the table and its rows as they were,
    no backup table."""
    store_folder = tmp_path / "sqlite"
    store_folder.mkdir()
    location = build("sqlite-vec", store_folder, "docs", vectors())
    database = store_folder / "store.db"
    size = database.stat().st_size
    assert size < LIMIT
    before, tables = open_store(location).read_all(), sorted(open_store(location).names())
    error = migrate_in_child(tmp_path, wide_map(), location, location, overwrite=True)
    message = " ".join(error.split())
    assert message.startswith("DiskFullError: "), error
    assert "SQLite could not write the database" in message and "rolled back" in message
    assert "cannot rollback" not in message and "free" in message
    store = open_store(location)
    assert store.dim == D_OLD and store.rows == ROWS
    np.testing.assert_array_equal(store.read_all(), before)
    assert sorted(store.names()) == tables  # no backup table, no new table
    assert sorted(p.name for p in store_folder.iterdir()) == ["store.db"]  # no journal left


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
    )
    return done.returncode == 0


def test_a_full_tmpfs_is_a_clear_error_not_sigbus(tmp_path):
    """A real full disk (a 1 MiB tmpfs, where this process may mount one): the input fits, the
    output does not: where the sparse file's memory map died of SIGBUS, the free-space check
    refuses it before any byte is written (the child fails the test if a signal kills it)."""
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "1m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        old = disk / "old.npy"
        np.save(old, vectors())
        before = old.read_bytes()
        error = migrate_in_child(tmp_path, wide_map(256), old, disk / "new.npy", limit=2**40)
        message = " ".join(error.split())
        assert message.startswith("DiskFullError: "), error
        assert f"it needs {ROWS * 256 * 4 + 128:,} bytes" in message
        assert "checked before writing" in message
        assert sorted(os.listdir(disk)) == ["old.npy"] and old.read_bytes() == before
    finally:
        subprocess.run(["umount", str(disk)], check=False)
