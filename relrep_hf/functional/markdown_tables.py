"""Results as text: Markdown tables, metric names, and "mean ± std" over seeds.

`markdown_table` is the one table writer (cells as given, ``|`` escaped); `format_table` lays
out rows of results on it, each cell a fraction, a ``{"mean", "std"}`` summary or text.
`summarize_seeds` turns the rows of several seeds into such summaries.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

_METRIC_LABELS = {
    "mrr": "MRR",
    "f1": "F1",
    "accuracy": "Accuracy",
    "weighted_f1": "Weighted F1",
    "macro_f1": "Macro F1",
    "micro_f1": "Micro F1",
}


def metric_label(name: str) -> str:
    """A metric's name as people write it: ``recall@1`` -> ``Recall@1``, ``mrr`` -> ``MRR``."""
    if name.startswith("recall@"):
        return f"Recall@{name[7:]}"
    return _METRIC_LABELS.get(name, name)


def markdown_table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table: one line per row, each cell ``str()``-ed with ``|`` escaped."""

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), line(["---"] * len(header)), *(line(r) for r in rows)])


def format_cell(value: Any, *, scale: float = 100.0, digits: int = 2) -> str:
    """``None`` -> blank; a number -> ``value * scale`` to ``digits`` decimals; a
    ``{"mean", "std"}`` summary -> ``mean ± std`` (both scaled); anything else as text."""
    if value is None:
        return ""
    if isinstance(value, Mapping) and {"mean", "std"} <= set(value):
        mean, std = value["mean"] * scale, value["std"] * scale
        return f"{mean:.{digits}f} ± {std:.{digits}f}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value * scale:.{digits}f}"
    return str(value)


def format_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    keys: Sequence[str] | None = None,
    scale: float = 100.0,
    digits: int = 2,
    group: bool = False,
) -> str:
    """A Markdown table of ``rows``: the ``keys`` (default: every field of the first row that is
    not a column) as text, then the value ``columns`` through `format_cell` (missing: blank).
    ``group`` writes the first key once per run of equal values, as in the paper's tables;
    ``scale=100`` prints fractions as percentages."""
    if keys is None:
        keys = [k for k in rows[0] if k not in columns] if rows else []
    lines = []
    previous = None
    for row in rows:
        cells = [str(row[k]) for k in keys]
        if group and keys:
            if row[keys[0]] == previous:
                cells[0] = ""
            previous = row[keys[0]]
        cells += [format_cell(row.get(c), scale=scale, digits=digits) for c in columns]
        lines.append(cells)
    return markdown_table([*keys, *columns], lines)


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    values = [float(v) for v in values]
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std}


def summarize_seeds(
    runs: Sequence[Sequence[Mapping[str, Any]]], keys: Sequence[str], columns: Sequence[str]
) -> list[dict[str, Any]]:
    """The rows of several seeds (same rows, same order) as one row each, every column present
    in the rows as ``{"mean", "std"}`` (absent columns stay absent, e.g. "Abs." off the
    diagonal). Raises ``ValueError`` if a summary is not finite (a silent NaN would print)."""
    first = runs[0]
    for run in runs[1:]:
        if [tuple(r[k] for k in keys) for r in run] != [tuple(r[k] for k in keys) for r in first]:
            raise ValueError("Every seed must produce the same rows in the same order.")
    table = []
    for i, row in enumerate(first):
        out: dict[str, Any] = {k: row[k] for k in keys}
        for column in columns:
            if column in row:
                out[column] = mean_std([run[i][column] for run in runs])
                if not all(math.isfinite(v) for v in out[column].values()):
                    raise ValueError(f"Non-finite {column} in row {out}.")
        table.append(out)
    return table
