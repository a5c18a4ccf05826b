"""How time and memory grow with the size of the problem.

Each curve is a set of rows whose ratio is against the curve's smallest size (the ``size_ratio``
extra says how much larger the size is), and a PNG in ``benchmarks/results/``.

(a) Projection: `RelativeProjector` forward (wip, d=768, m=300, float32) for N = 1e3 ... 1e6
    rows: time, and the peak RSS of a fresh process that makes the N rows and projects them
    (compared with the bytes of input + output: no hidden copy of the input).
(b) PARAM: the time of one epoch (``ParamTrainer.train_runtime["epoch_seconds"]``, setup
    excluded) against N, K, m and the number of encoders, one at a time around a base run.
(c) Statistics of a `datasets` Arrow dataset larger than a memory budget, streamed from disk
    in batches through `Statistics.update`: the peak RSS of a fresh process against the size
    of the data it read.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import datasets
import numpy as np
import torch
from datasets.arrow_writer import ArrowWriter

from benchmarks.common import RESULTS, median_seconds, peak_memory, row
from relrep_hf import ParamTrainer, ParamTrainingArguments, RelativeProjector, Statistics

MIB = 1024**2
# PARAM steps are many small kernels: on a shared 2-core machine, two OpenMP threads made epochs
# 30-100x slower and erratic whenever another process held a core. One thread measures how the
# work grows, which is what these curves are for.
PARAM_THREADS = 1
D, M = 768, 300  # projection: a BERT-base-sized encoder, the paper's 300 anchors


# ---------------------------------------------------------------------------------------------
# (a) projection
# ---------------------------------------------------------------------------------------------


def _projector(dim: int = D, num_anchors: int = M) -> RelativeProjector:
    generator = torch.Generator().manual_seed(0)
    support = torch.randn(1024, dim, generator=generator, dtype=torch.float64)
    return RelativeProjector.from_statistics(
        support[:num_anchors], Statistics.from_embeddings(support)
    )


def _rows(n: int, dim: int = D) -> torch.Tensor:
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(n))


def _project_fresh(n: int) -> None:
    """In a fresh process (see `peak_memory`): make N rows and project them."""
    projector = _projector()
    with torch.inference_mode():
        projector(_rows(n))


def _projection_seconds(sizes: list[int], repeats: int) -> list[float]:
    projector = _projector()
    x = _rows(sizes[-1])
    with torch.inference_mode():
        return [
            median_seconds(lambda n=n: projector(x[:n]), repeats=repeats, warmup=1) for n in sizes
        ]


def projection_curves(
    sizes: list[int], memory_sizes: list[int], repeats: int, quick: bool = False
) -> list[dict]:
    """Time for every N in ``sizes``, peak RSS (one fresh process each) for ``memory_sizes``."""
    seconds, peaks = _projection_seconds(sizes, repeats), []
    for n in memory_sizes:
        peaks.append(peak_memory(_project_fresh, n, quick=quick)[1] / MIB)
    results = [
        row(f"projection time (N={n:,}, d={D}, m={M})", f"N={sizes[0]:,}", seconds[0], s, "s",
            size_ratio=n / sizes[0], ns_per_row=1e9 * s / n, threads=torch.get_num_threads())
        for n, s in zip(sizes, seconds, strict=True)
    ]  # fmt: skip
    for n, peak in zip(memory_sizes, peaks, strict=True):
        data_mib = n * (D + M) * 4 / MIB  # float32 input [N, d] + output [N, m]
        results.append(
            row(f"projection peak RSS (N={n:,}, d={D}, m={M})", f"N={memory_sizes[0]:,}",
                peaks[0], peak, "MiB", size_ratio=n / memory_sizes[0],
                input_plus_output_mib=data_mib, peak_over_input_plus_output=peak / data_mib)
        )  # fmt: skip
    _plot("projection_time", "rows N", {"projector forward": (sizes, seconds)}, "seconds",
          f"Projection time (wip, d={D}, m={M}, float32)")  # fmt: skip
    _plot(
        "projection_memory",
        "rows N",
        {"peak RSS": (memory_sizes, peaks),
         "input + output": (memory_sizes, [n * (D + M) * 4 / MIB for n in memory_sizes])},
        "MiB",
        "Peak memory of projecting N rows (fresh process)",
        reference=False,
    )  # fmt: skip
    return results


# ---------------------------------------------------------------------------------------------
# (b) PARAM epochs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamSize:
    rows: int  # N
    dim: int  # d of every encoder
    support: int  # K
    anchors: int  # m
    encoders: int
    batch_size: int


def _param_epoch_seconds(size: ParamSize, repeats: int) -> float:
    """The fastest of ``repeats`` one-epoch runs (the least disturbed by other processes)."""
    generator = torch.Generator().manual_seed(0)
    latent = torch.randn(size.rows, size.dim, generator=generator)
    spaces = {
        f"encoder{i}": latent @ torch.randn(size.dim, size.dim, generator=generator)
        + torch.randn(size.dim, generator=generator)
        for i in range(size.encoders)
    }
    with tempfile.TemporaryDirectory() as out:
        args = ParamTrainingArguments(
            out, num_anchors=size.anchors, support_size=size.support, num_train_epochs=1,
            train_batch_size=size.batch_size, save_strategy="no", disable_tqdm=True,
        )  # fmt: skip
        seconds = []
        for _ in range(repeats):
            trainer = ParamTrainer(args, spaces)
            trainer.train()
            seconds.append(trainer.train_runtime["epoch_seconds"])
    return min(seconds)


def param_curves(
    base: ParamSize, axes: dict[str, list[int]], repeats: int, warmup: bool = True
) -> list[dict]:
    """Epoch time along each axis, on PARAM_THREADS threads (restored afterwards), after a
    warm-up run that is not counted (``warmup``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(PARAM_THREADS)
    try:
        if warmup:
            _param_epoch_seconds(replace(base, rows=min(axes["rows"])), 1)
        measured = {
            size: _param_epoch_seconds(size, repeats)
            for size in dict.fromkeys(
                replace(base, **{field: value})
                for field, values in axes.items()
                for value in values
            )
        }
    finally:
        torch.set_num_threads(threads)
    results, curves = [], {}
    labels = {"rows": "N", "support": "K", "anchors": "m", "encoders": "encoders"}
    for field, values in axes.items():
        seconds = [measured[replace(base, **{field: value})] for value in values]
        curves[labels[field]] = (values, seconds)
        others = ", ".join(
            f"{labels.get(k, k)}={v:,}"
            for k, v in vars(base).items()
            if k not in (field, "batch_size")
        )
        for value, s in zip(values, seconds, strict=True):
            results.append(
                row(f"PARAM epoch vs {labels[field]} ({labels[field]}={value:,}; {others})",
                    f"{labels[field]}={values[0]:,}", seconds[0], s, "s",
                    size_ratio=value / values[0], threads=PARAM_THREADS)
            )  # fmt: skip
    for label, curve in curves.items():
        _plot(f"param_epoch_vs_{label}", label, {"epoch": curve}, "seconds per epoch",
              f"PARAM epoch time against {label} (batch {base.batch_size}, 1 thread)")  # fmt: skip
    return results


# ---------------------------------------------------------------------------------------------
# (c) statistics of a dataset larger than the memory budget
# ---------------------------------------------------------------------------------------------


def write_arrow_shards(folder: Path, shards: int, rows_per_shard: int) -> list[str]:
    """Arrow files of float32 rows ``embedding [768]``, written by `datasets`' own writer in
    blocks (`Dataset.from_generator` writes row by row: ~10 MB/s here)."""
    features = datasets.Features({"embedding": datasets.List(datasets.Value("float32"), length=D)})
    files = []
    for shard in range(shards):
        path = folder / f"embeddings-{shard:05d}.arrow"
        rng = np.random.default_rng(shard)
        with ArrowWriter(path=str(path), features=features) as writer:
            for start in range(0, rows_per_shard, 2048):  # record batches of 6 MiB
                block = rng.standard_normal((min(2048, rows_per_shard - start), D), np.float32)
                writer.write_batch({"embedding": 3.0 * block + 1.0})
            writer.finalize()
        files.append(str(path))
    return files


def streamed_statistics(files: list[str], batch_size: int) -> Statistics:
    """Statistics of every row of the Arrow files, one batch in memory at a time."""
    stream = datasets.load_dataset("arrow", data_files=files, split="train", streaming=True)
    stats = Statistics.empty(D)
    for batch in stream.with_format("arrow").iter(batch_size=batch_size):
        column = batch.column("embedding").combine_chunks()  # FixedSizeList of n x 768 floats
        values = column.values.to_numpy(zero_copy_only=False, writable=True)  # [n * 768]
        stats = stats.update(torch.from_numpy(values).view(-1, D))
    return stats


def _stream_statistics(files: list[str], batch_size: int) -> None:
    """In a fresh process (see `peak_memory`)."""
    streamed_statistics(files, batch_size).covariance()


def dataset_curves(quick: bool) -> list[dict]:
    shards, rows_per_shard, budget_mib, batch_size = (
        (2, 4_000, 128, 1024) if quick else (4, 128_000, 256, 4096)
    )  # quick: a crash check, 23 MiB of data (under the budget); full: 1.5 GiB for 256 MiB
    results, sizes, peaks = [], [], []
    with tempfile.TemporaryDirectory(prefix="relrep-bench-scale-") as folder:
        start = time.perf_counter()
        files = write_arrow_shards(Path(folder), shards, rows_per_shard)
        write_seconds = time.perf_counter() - start
        counts = [shards] if quick else list(range(1, shards + 1))
        for count in counts:
            used = files[:count]
            size_mib = sum(Path(f).stat().st_size for f in used) / MIB
            seconds, peak = peak_memory(_stream_statistics, used, batch_size, quick=quick)
            sizes.append(size_mib)
            peaks.append(peak / MIB)
            results.append(
                row(f"statistics streamed from a {size_mib:,.0f} MiB Arrow dataset: peak RSS",
                    f"{sizes[0]:,.0f} MiB dataset", peaks[0], peaks[-1], "MiB",
                    size_ratio=size_mib / sizes[0], budget_mib=budget_mib,
                    rows=count * rows_per_shard, rows_per_second=count * rows_per_shard / seconds,
                    write_seconds=write_seconds)
            )  # fmt: skip
    results.append(
        row(f"statistics of a {sizes[-1]:,.0f} MiB dataset: peak RSS against its size",
            "dataset size", sizes[-1], peaks[-1], "MiB", budget_mib=budget_mib,
            within_budget=peaks[-1] <= budget_mib)
    )  # fmt: skip
    _plot("statistics_dataset_memory", "dataset size (MiB)",
          {"peak RSS": (sizes, peaks), "dataset size": (sizes, sizes),
           "budget": (sizes, [budget_mib] * len(sizes))},
          "MiB", f"Streamed statistics (d={D}, batches of {batch_size})",
          reference=False)  # fmt: skip
    return results


# ---------------------------------------------------------------------------------------------


def _plot(
    name: str,
    xlabel: str,
    curves: dict[str, tuple[list[float], list[float]]],
    ylabel: str,
    title: str,
    *,
    reference: bool = True,
) -> None:
    """Log-log curves (with a dashed linear-growth line through the first point) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    RESULTS.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for label, (xs, ys) in curves.items():
        ax.plot(xs, ys, marker="o", label=label)
    if reference:
        xs, ys = next(iter(curves.values()))
        ax.plot(xs, [ys[0] * x / xs[0] for x in xs], "k--", linewidth=0.8, label="linear")
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
    xs = sorted({x for xs, _ in curves.values() for x in xs})
    ax.set_xticks(xs, [f"{x:,.0f}" for x in xs], minor=False)
    ax.set_xticks([], minor=True)
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(RESULTS / f"scale_{name}.png", dpi=120)
    plt.close(fig)


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": ("matplotlib",)}


def run(quick: bool = False) -> list[dict]:
    datasets.disable_progress_bars()
    if quick:
        # a crash check of each kind of curve: two sizes, one fresh process a memory curve,
        # PARAM along one axis and no warm-up (every axis and the warm-up run the same code; a
        # trainer is ~3 CPU s)
        projection_sizes, memory_sizes = [1_000, 10_000], [10_000]
        base = ParamSize(rows=1000, dim=32, support=200, anchors=20, encoders=2, batch_size=512)
        axes = {"rows": [500, 1000]}
    else:
        projection_sizes = memory_sizes = [1_000, 10_000, 100_000, 1_000_000]
        base = ParamSize(rows=8000, dim=384, support=2000, anchors=200, encoders=3, batch_size=1024)
        axes = {"rows": [2000, 4000, 8000, 16000], "support": [500, 1000, 2000, 4000],
                "anchors": [50, 100, 200, 400], "encoders": [1, 2, 4, 8]}  # fmt: skip
    return [
        *projection_curves(projection_sizes, memory_sizes, repeats=1 if quick else 5, quick=quick),
        *param_curves(base, axes, repeats=1 if quick else 2, warmup=not quick),
        *dataset_curves(quick),
    ]
