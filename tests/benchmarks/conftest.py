"""Fixtures shared by the benchmark tests."""

from __future__ import annotations

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
