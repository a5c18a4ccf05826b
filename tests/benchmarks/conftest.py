"""Fixtures shared by the benchmark tests."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def quick_lms(tmp_path_factory):
    """``(cache, {name: folder})``: the quick small LMs, trained once per session (seconds each)
    on one thread; ``test_small_lms`` checks them and their cache, ``test_groups`` copies them
    into its benchmark cache."""
    import torch

    from benchmarks.spaces.small_lms import ensure_small_lms

    cache = tmp_path_factory.mktemp("small_lms")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models on a shared machine
    try:
        return cache, ensure_small_lms(quick=True, cache_dir=cache, progress=False)
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _plain_titles():
    """Tables titled as a full run's in every test: a test that runs `python -m benchmarks
    --quick` in this process leaves the crash-check note switched on for the tests after it."""
    from benchmarks.common import crash_check_titles

    crash_check_titles(False)
    yield
    crash_check_titles(False)


@pytest.fixture
def quick_run(monkeypatch, capsys):
    """``run(argv, missing=())``: ``python -m benchmarks ARGV`` in this process (its ``main``)
    with the packages ``missing`` hidden (``sys.modules[name] = None``: `find_spec` answers None,
    `import` raises), as an interpreter without them; its stdout. What the run changes in the
    process is restored: the torch threads and ``OMP_NUM_THREADS`` (--quick sets them), the
    global random state, transformers' progress bars."""
    import torch
    from transformers.utils import logging as transformers_logging

    from benchmarks.__main__ import main

    def run(argv: list[str], missing=()) -> str:
        for name in missing:
            monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
        threads, bars = torch.get_num_threads(), transformers_logging.is_progress_bar_enabled()
        capsys.readouterr()
        try:
            with torch.random.fork_rng():
                main(argv)
        finally:
            torch.set_num_threads(threads)
            if bars:
                transformers_logging.enable_progress_bar()
        return capsys.readouterr().out

    return run
