"""Streaming whitening statistics against ``numpy.cov`` on the whole array in memory."""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.common import interleaved_medians, peak_memory, row
from relrep_hf import Statistics

CHUNK = 8192


def _chunks(n: int, d: int):
    for start in range(0, n, CHUNK):
        generator = torch.Generator().manual_seed(start)
        yield torch.randn(min(CHUNK, n - start), d, generator=generator)


def _stream(n: int, d: int) -> None:
    stats = Statistics.empty(d)
    for chunk in _chunks(n, d):  # only one chunk is alive at a time
        stats = stats.update(chunk)
    stats.covariance()


def _numpy(n: int, d: int) -> None:
    data = torch.cat(list(_chunks(n, d))).numpy()
    np.cov(data.T)


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads: none (the core install runs it)."""
    return {}


def run(quick: bool = False) -> list[dict]:
    n, d = (4000, 768) if quick else (200000, 768)  # quick: a crash check, not a figure
    data = torch.cat(list(_chunks(n, d)))
    array = data.numpy()

    def stream() -> None:
        stats = Statistics.empty(d)
        for chunk in data.split(CHUNK):
            stats = stats.update(chunk)
        stats.covariance()

    times = interleaved_medians(
        {"numpy": lambda: np.cov(array.T), "stream": stream},
        repeats=1 if quick else 3,
        warmup=1,
    )
    (_, numpy_peak), (_, stream_peak) = (
        peak_memory(_numpy, n, d, quick=quick),
        peak_memory(_stream, n, d, quick=quick),
    )
    mib = 1024**2
    return [
        row(
            f"statistics time (N={n}, d={d})",
            "numpy.cov in memory",
            times["numpy"],
            times["stream"],
            "s",
        ),
        row(
            f"statistics peak memory (N={n}, d={d})",
            "numpy.cov in memory",
            numpy_peak / mib,
            stream_peak / mib,
            "MiB",
        ),
    ]
