"""Readers never see a false corruption error while other processes save the same folder.

Two writer processes save versions of a projector into one folder without pause (each save
that finds the other's lock tries again); the test process loads the folder over and over and
checks that every load gives one complete version, byte for byte the one it names. Print the
figures with ``python -m pytest -q -s tests/test_concurrent_reads.py``.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
import torch

from relrep_hf import RelativeProjector
from relrep_hf.utils.locking import FolderLockedError
from tests.fixtures import killable_save

SIZES = killable_save.SMALL
LOADS, VERSIONS = 100, 10  # loads until this many, and this many versions seen
SECONDS = 120.0  # at most (a loaded shared machine managed 75 loads in 8 s)

needs_fork = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork"
)


def save_until(folder: Path, first: int, stop) -> None:  # stop: a multiprocessing Event
    """Save versions first, first + 1, ... into ``folder`` until ``stop`` is set."""
    torch.set_num_threads(1)  # the parent's OpenMP pool does not survive fork
    version = first
    while not stop.is_set():
        try:
            killable_save.projector_version(version, **SIZES).save_pretrained(folder)
        except FolderLockedError:  # the other writer is saving: try again
            continue
        version += 1


def version_of(projector: RelativeProjector) -> int:
    return int(projector.config.encoder_revision.removeprefix("version-"))


@pytest.mark.slow
@needs_fork
def test_loads_during_two_concurrent_writers_never_fail(tmp_path):
    folder = tmp_path / "projector"
    killable_save.projector_version(0, **SIZES).save_pretrained(folder)
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    writers = [
        context.Process(target=save_until, args=(folder, first, stop)) for first in (1, 10**6)
    ]
    for writer in writers:
        writer.start()
    loads, errors, versions = 0, [], set()
    try:
        deadline = time.monotonic() + SECONDS
        while (loads < LOADS or len(versions) < VERSIONS) and time.monotonic() < deadline:
            loads += 1
            try:
                loaded = RelativeProjector.from_pretrained(folder)
            except Exception as error:  # counted: the assertion below shows every one
                errors.append(f"{type(error).__name__}: {error}")
                continue
            version = version_of(loaded)
            versions.add(version)
            expected = killable_save.projector_version(version, **SIZES)
            if not torch.equal(loaded.weight, expected.weight):  # config and weights of two saves
                errors.append(f"a mix: config.json of version {version}, weights of another")
    finally:
        stop.set()
        for writer in writers:
            writer.join(60)
    assert all(writer.exitcode == 0 for writer in writers)
    false = sum("Corrupted" in e for e in errors)
    print(f"\n{loads} loads, {len(versions)} distinct versions seen, "
          f"{len(errors)} errors ({false} false corruption errors)")  # fmt: skip
    assert errors == [], f"{len(errors)} of {loads} loads failed: {errors[:3]}"
    assert loads >= LOADS and len(versions) >= VERSIONS, "too few loads overlapped the saves"
