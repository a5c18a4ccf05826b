"""A run's language pairs: when its encoders read different columns of a parallel dataset (one
language each, ``SPEC#de``), the report adds one row per ordered pair of languages and encoders,
with every method's Recall@1 and zero-shot weighted F1 beside a supervised pairwise affine map.

The affine baseline is fitted per ordered pair on the same parallel training rows the anchor
set saw (`relrep_hf.functional.least_squares.fit_affine`): retrieval maps the source's test rows into the
target's space; classification maps the target's test rows into the source's space and applies
the source's own absolute-space classifier. It is supervised and pairwise: one map per pair,
where the anchor set is one fit for every encoder, and onboards an encoder with no pairing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from relrep_hf.evaluation.stitching_steps import head_f1, standardize
from relrep_hf.functional.least_squares import fit_affine
from relrep_hf.functional.metrics import retrieval_metrics

AFFINE = "Affine-LS (supervised, per pair)"
RIDGE = 1e-4  # a negligible ridge: the normal equations, far faster than an SVD solve


def language_pair_rows(
    report: dict[str, Any],
    spaces: dict[str, Tensor],
    train: Tensor,
    test: Tensor,
    labels: Tensor | None,
    absolute_head: Callable[[str], Any] | None = None,
) -> list[dict[str, Any]]:
    """Per ordered pair of encoders that read different columns: ``pair`` (``en->de``),
    ``source``, ``target``, every method's ``R@1`` and ``F1`` and the affine baseline's
    (``absolute_head(name)``: the head on that encoder's standardized absolute embeddings,
    `ZeroShotStitching.absolute_head`)."""
    columns = {
        e["name"]: e.get("column") or report["dataset"]["column"] for e in report["encoders"]
    }
    if len(set(columns.values())) < 2:
        return []
    f1 = {(r["classifier"], r["encoder"]): r for r in report["classification"]}
    rows = []
    for source in columns:
        for target in columns:
            if source == target or columns[source] == columns[target]:
                continue
            pair = f"{source}->{target}"
            row = {
                "pair": f"{columns[source]}->{columns[target]}",
                "source": source,
                "target": target,
            }
            for method, matrix in report["retrieval"].items():
                row[f"{method} R@1"] = matrix[pair]["recall@1"]
            forward = fit_affine(
                spaces[source][train].double(), spaces[target][train].double(), ridge=RIDGE
            )
            mapped = forward(spaces[source][test].double())
            row[f"{AFFINE} R@1"] = retrieval_metrics(mapped, spaces[target][test].double())[
                "recall@1"
            ]
            if labels is not None and absolute_head is not None:
                for method in report["retrieval"]:
                    row[f"{method} F1"] = f1.get((source, target), {}).get(method)
                backward = fit_affine(
                    spaces[target][train].double(), spaces[source][train].double(), ridge=RIDGE
                )
                into_source = backward(spaces[target][test].double()).float()
                _, into_source = standardize(spaces[source][train], into_source)
                row[f"{AFFINE} F1"] = head_f1(absolute_head(source), into_source, labels[test])
            rows.append(row)
    return rows
