"""Timing and memory helpers shared by the benchmarks."""

from __future__ import annotations

import gc
import multiprocessing
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil


def median_seconds(function: Callable[[], Any], *, repeats: int = 7, warmup: int = 2) -> float:
    """Median wall time of ``function()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(
    functions: dict[str, Callable[[], Any]], *, repeats: int = 9, warmup: int = 2
) -> dict[str, float]:
    """Median time of each function, runs interleaved so that drift hits all alike."""
    for _ in range(warmup):
        for function in functions.values():
            function()
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            gc.collect()
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def _peak_child(target: Callable[..., Any], args: tuple, queue) -> None:
    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = baseline
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    target(*args)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    queue.put((seconds, max(peak, process.memory_info().rss) - baseline))


def peak_memory(target: Callable[..., Any], *args: Any) -> tuple[float, int]:
    """Run ``target(*args)`` in a fresh process: (seconds, peak RSS growth in bytes).

    RSS is sampled every 2 ms from a thread, from just before the call to its end.
    """
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_peak_child, args=(target, args, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def row(name: str, baseline: str, baseline_value: float, value: float, unit: str, **extra) -> dict:
    """One result: ``value`` of ours against ``baseline_value``, and their ratio."""
    return {
        "benchmark": name,
        "baseline": baseline,
        "baseline_value": baseline_value,
        "value": value,
        "unit": unit,
        "ratio": value / baseline_value if baseline_value else float("nan"),
        **extra,
    }
