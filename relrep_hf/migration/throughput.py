"""Throughput you can plan with: rows measured in seconds by some workers, and the time and cost
they project for a store of any size, as one function (`project`) that the benchmarks
(``python -m benchmarks ray_throughput``) and the dry runs (``relrep-hf reembed --max-rows``,
``relrep-hf migrate --max-rows``) share.

The projection is linear: ``rows / (rows/s per worker) / workers``, and the cost is the worker
hours times a price per worker hour, an assumption the caller states (the defaults,
`relrep_hf.utils.defaults.DEFAULT_CPU_HOUR_USD` and ``DEFAULT_GPU_HOUR_USD``, are documented
there as assumptions). It holds while storage and the network keep up with the workers. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from relrep_hf.utils.defaults import DEFAULT_CPU_HOUR_USD, DEFAULT_GPU_HOUR_USD

__all__ = [
    "PLANNED_ROWS",
    "Projection",
    "Throughput",
    "dry_run_text",
    "format_duration",
    "project",
]

PLANNED_ROWS = (1_000_000, 100_000_000, 1_000_000_000)  # the sizes a benchmark projects


@dataclass(frozen=True)
class Throughput:
    """``rows`` of ``work`` (re-embed, migrate) done in ``seconds`` by ``workers`` workers of
    one ``kind`` (``"CPU"``: one CPU each; ``"GPU"``: one GPU each)."""

    work: str
    rows: int
    seconds: float
    workers: int = 1
    kind: str = "CPU"

    def __post_init__(self) -> None:
        if self.kind not in ("CPU", "GPU"):
            raise ValueError(f"Invalid worker kind {self.kind!r}. Valid: 'CPU', 'GPU'.")
        if self.rows < 0 or not self.seconds >= 0 or self.workers < 1:
            raise ValueError(
                f"A throughput needs rows >= 0, seconds >= 0 and workers >= 1, got {self.rows} "
                f"rows, {self.seconds} s, {self.workers} workers."
            )

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    @property
    def per_worker(self) -> float:
        """Rows per second of one worker."""
        return self.rows_per_second / self.workers


@dataclass(frozen=True)
class Projection:
    """``rows`` at a `Throughput`'s per-worker rate on ``workers`` workers: ``seconds`` of wall
    time, ``worker_hours``, and ``cost_usd`` at ``hour_usd`` per worker hour (an assumption)."""

    throughput: Throughput
    rows: int
    workers: int
    hour_usd: float

    @property
    def worker_hours(self) -> float:
        return self.rows / self.throughput.per_worker / 3600

    @property
    def seconds(self) -> float:
        return self.worker_hours * 3600 / self.workers

    @property
    def cost_usd(self) -> float:
        return self.worker_hours * self.hour_usd

    def __str__(self) -> str:
        kind = self.throughput.kind
        return (
            f"{self.rows:,} rows: about {format_duration(self.seconds)} on {self.workers} "
            f"{kind} worker(s), {self.worker_hours:,.1f} {kind} worker hours, about "
            f"${self.cost_usd:,.2f} at ${self.hour_usd:g} per {kind} hour (an assumption)"
        )


def project(
    throughput: Throughput,
    rows: int,
    *,
    workers: int | None = None,
    hour_usd: float | None = None,
) -> Projection:
    """The time and cost of ``rows`` rows at ``throughput``'s measured rate per worker, on
    ``workers`` workers (default: as many as were measured). ``hour_usd``: the price of one
    worker hour (default: `DEFAULT_CPU_HOUR_USD` or `DEFAULT_GPU_HOUR_USD`, assumptions)."""
    if throughput.rows == 0 or throughput.per_worker in (0.0, float("inf")):
        raise ValueError(
            f"{throughput.work}: {throughput.rows} rows in {throughput.seconds} s is no rate to "
            "project from: measure some rows in some time."
        )
    if hour_usd is None:
        hour_usd = DEFAULT_GPU_HOUR_USD if throughput.kind == "GPU" else DEFAULT_CPU_HOUR_USD
    if not hour_usd >= 0:
        raise ValueError(f"hour_usd must be a price >= 0 (US$ per worker hour), got {hour_usd}.")
    return Projection(throughput, int(rows), workers or throughput.workers, float(hour_usd))


def format_duration(seconds: float) -> str:
    """``3 d 04 h``, ``2 h 05 min``, ``4 min 09 s``: a duration a person plans with."""
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days:,} d {hours:02d} h"
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {rest:02d} s"


def dry_run_text(measured: Throughput, total_rows: int, *, done: str, note: str = "") -> str:
    """What a dry run prints: the rows measured and their rate, and the projection of the whole
    store's ``total_rows`` on one worker (time, worker hours, cost at the default price)."""
    text = (
        f"{done} {measured.rows:,} rows in {measured.seconds:.1f} s "
        f"({measured.rows_per_second:,.1f} rows/s{', ' + note if note else ''})"
    )
    if measured.rows == 0 or measured.seconds <= 0:
        return f"{text}: no rate to project the whole store ({total_rows:,} rows) from."
    whole = project(measured, total_rows, workers=1)
    return (
        f"{text}; the whole store ({total_rows:,} rows) would take about "
        f"{format_duration(whole.seconds)} on 1 {measured.kind} worker "
        f"({whole.worker_hours:,.2f} worker hours, about ${whole.cost_usd:,.2f} at "
        f"${whole.hour_usd:g} per {measured.kind} hour, an assumption). Nothing was written."
    )
