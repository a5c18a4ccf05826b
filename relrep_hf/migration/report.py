"""Whether a migration is worth it: held-out Recall@1 and retention@10 of every way to serve
new-encoder queries over a corpus stored with the old encoder, and a recommendation.

- **re-embed**: the corpus embedded again by the new encoder (the reference);
- **migrate**: the stored vectors mapped old -> new once (each candidate map, and the chosen
  one), searched by new-encoder queries;
- **bridge**: the stored vectors untouched, each new-encoder query mapped new -> old (a map
  fitted the other way) and searched against them.

Retention@10 is Drift-Adapter's protocol: the share of the re-embedded corpus's 10 nearest
documents of a query that the served search also returns (the query's own document left out:
Recall@1 measures it). `recommend` turns the two into migrate / bridge / re-embed with the
thresholds `RETENTION_FLOOR` and `RECALL_FLOOR` (why these: docs/migration.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from relrep_hf.functional.least_squares import AffineMap
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.functional.retention import (
    bootstrap_interval,
    retention_per_query,
    top_k_neighbours,
    wilson_interval,
)

__all__ = [
    "MIN_HELD_OUT_ROWS",
    "RECALL_FLOOR",
    "RETENTION_FLOOR",
    "MigrationQualityError",
    "check_recommendation",
    "migration_report",
    "recommend",
]

RETENTION_K = 10
RETENTION_FLOOR = 0.90  # 9 of the re-embedded top 10 kept, on average
RECALL_FLOOR = 0.95  # the served Recall@1 over the re-embedded one
# Fewer held-out rows than this: no recommendation. At 100 queries the 95% Wilson interval of a
# Recall@1 of 0.95 is [0.89, 0.98], about the distance between the floors and a clear miss;
# at 3 rows retention@10 is retention@2 and a Recall@1 of 3/3 is [0.44, 1.0].
MIN_HELD_OUT_ROWS = 100
TIE = 0.005  # migrate and bridge closer than this: migrate (the store joins the new space)


def _served(queries: Tensor, keys: Tensor, reference: Tensor, reembedded_recall: float) -> dict:
    """Recall@1, retention@10 and Recall@1 as a fraction of re-embedding's for one search, with
    95% intervals (Wilson for Recall@1, a bootstrap over queries for retention@10);
    ``reference``: the re-embedded search's ``[n, k]`` neighbours."""
    k = reference.shape[1]
    recall = retrieval_metrics(queries, keys, ks=(1,))["recall@1"]
    kept = retention_per_query(top_k_neighbours(queries, keys, k, exclude_own=True), reference)
    fraction = recall / reembedded_recall if reembedded_recall else 0.0
    intervals = {
        "recall@1": wilson_interval(round(recall * len(queries)), len(queries)),
        "retention@10": bootstrap_interval(kept),
    }
    return {
        "recall@1": recall,
        "retention@10": kept.mean().item(),
        "fraction": fraction,
        "intervals": intervals,
    }


def migration_report(
    old: Tensor,
    new: Tensor,
    queries: Tensor,
    maps: dict[str, AffineMap],
    chosen: str,
    bridge: AffineMap | None = None,
    *,
    direction: str = "corpus",
) -> dict[str, Any]:
    """The held-out report of a migration.

    Args:
        old: ``[n, d_old]`` held-out documents as stored by the old encoder.
        new: ``[n, d_new]`` the same documents re-embedded by the new encoder.
        queries: ``[n, d_new]`` new-encoder queries, query i for document i (``new`` itself,
            or the new encoder on another column: a paraphrase, a translation).
        maps: old -> new candidate maps by name; ``chosen``: the one a migration would use.
        bridge: the new -> old map of the bridge, if measured.
        direction: the search measured: ``corpus`` (the stored vectors migrated, searched by
            new-encoder queries) or ``queries`` (old-encoder vectors mapped, as queries, into
            the new encoder's store: query i should find ``new[i]``; ``queries`` must then be
            ``new`` itself, and no bridge is measured). A map chosen for one direction can
            lose the other.

    Returns:
        ``{"re-embedded": {...}, CANDIDATE: {...}, "migrate": {...}, "bridge": {...},
        "recommendation": recommend(...)}``, each search ``{"recall@1", "retention@10",
        "fraction"}`` (``migrate`` is the chosen candidate, named in ``"candidate"``).
    """
    if len(old) < 2:
        raise ValueError(f"The report needs at least 2 held-out rows, got {len(old)}.")
    old, new, queries = old.double(), new.double(), queries.double()
    k = min(RETENTION_K, len(old) - 1)
    reference = top_k_neighbours(queries, new, k, exclude_own=True)  # [n, k]
    reembedded = retrieval_metrics(queries, new, ks=(1,))["recall@1"]
    out: dict[str, Any] = {"rows": len(old)}
    out["re-embedded"] = {"recall@1": reembedded, "retention@10": 1.0, "fraction": 1.0}
    out["re-embedded"]["intervals"] = {
        "recall@1": wilson_interval(round(reembedded * len(old)), len(old))
    }
    if direction not in ("corpus", "queries"):
        raise ValueError(f"Invalid direction {direction!r}. Valid: corpus, queries.")
    out["direction"] = direction
    with torch.no_grad():
        for name, m in maps.items():
            if direction == "corpus":
                out[name] = _served(queries, m(old).double(), reference, reembedded)
            else:  # mapped old vectors query the new encoder's store
                out[name] = _served(m(old).double(), new, reference, reembedded)
        out["migrate"] = out[chosen] | {"candidate": chosen}
        if bridge is not None and direction == "corpus":
            out["bridge"] = _served(bridge(queries).double(), old, reference, reembedded)
    out["recommendation"] = recommend(out)
    return out


def recommend(report: dict[str, Any]) -> dict[str, Any]:
    """``{"action": "migrate" | "bridge" | "re-embed", "reason": ..., "thresholds": ...}``:
    the better of migrate and bridge (by the mean of retention@10 and the Recall@1 fraction;
    migrate within `TIE`) when it keeps at least `RETENTION_FLOOR` retention@10 and
    `RECALL_FLOOR` of re-embedding's Recall@1 on held-out rows, else re-embed."""
    thresholds = {"retention@10": RETENTION_FLOOR, "recall@1 fraction": RECALL_FLOOR}
    thresholds |= {"held-out rows": MIN_HELD_OUT_ROWS}
    ways = {w: report[w] for w in ("migrate", "bridge") if w in report}
    rows = report.get("rows")
    if rows is not None and rows < MIN_HELD_OUT_ROWS:
        return {"action": "undecided", "reason": _too_few(rows, ways), "thresholds": thresholds}

    def merit(way: str) -> float:
        return (ways[way]["retention@10"] + ways[way]["fraction"]) / 2

    passing = [
        w
        for w in ways
        if ways[w]["retention@10"] >= RETENTION_FLOOR and ways[w]["fraction"] >= RECALL_FLOOR
    ]
    if not passing:
        best = max(ways, key=merit) if ways else None
        reason = (
            "no map keeps enough of re-embedding's search"
            + (
                f" (best: {best}, retention@10 {ways[best]['retention@10']:.3f}, Recall@1 "
                f"{ways[best]['fraction']:.1%} of re-embedding's)"
                if best
                else ""
            )
            + f"; the floors are retention@10 >= {RETENTION_FLOOR} and Recall@1 >= "
            f"{RECALL_FLOOR:.0%} of re-embedding's"
        )
        return {"action": "re-embed", "reason": reason, "thresholds": thresholds}
    action = max(passing, key=merit)
    if action == "bridge" and "migrate" in passing and merit("bridge") - merit("migrate") < TIE:
        action = "migrate"
    way = ways[action]
    reason = (
        f"{action} keeps retention@10 {way['retention@10']:.3f} and Recall@1 "
        f"{way['fraction']:.1%} of re-embedding's on held-out rows (floors {RETENTION_FLOOR} "
        f"and {RECALL_FLOOR:.0%})"
    )
    return {"action": action, "reason": reason, "thresholds": thresholds}


def _too_few(rows: int, ways: dict[str, dict]) -> str:
    """Why a report of ``rows`` held-out rows recommends nothing, with what it measured."""
    measured = "; ".join(
        f"{way}: retention@10 {w['retention@10']:.3f} (95% interval "
        f"{_shown(w.get('intervals', {}).get('retention@10'))})"
        for way, w in ways.items()
    )
    return (
        f"only {rows} held-out rows, fewer than the {MIN_HELD_OUT_ROWS} a recommendation needs "
        f"({measured or 'nothing measured'}): too few to tell migrate from re-embed. Hold out "
        "more rows (a run with a larger test split) and evaluate again"
    )


def _shown(interval: tuple[float, float] | None) -> str:
    return "unknown" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"


class MigrationQualityError(ValueError):
    """The map's own held-out report recommends re-embedding, or nothing (too few held-out rows);
    nothing was written."""


def check_recommendation(info: dict[str, Any], what: str, *, force: bool = False) -> None:
    """Refuse, unless ``force``, a map whose recorded held-out report (``info``, a
    `MigrationMap`'s) recommends re-embedding, or recommends nothing because it was measured on
    fewer than `MIN_HELD_OUT_ROWS` held-out rows (``undecided``); ``what``: the use refused (the
    migration, the bridge). A map with no recorded report (fitted by `fit_migration` alone)
    passes."""
    advice = info.get("recommendation") or {}
    action = advice.get("action")
    if force or action not in ("re-embed", "undecided"):
        return
    if action == "re-embed":
        raise MigrationQualityError(
            f"The map's own held-out report recommends re-embedding ({advice.get('reason', '')}); "
            f"{what} was refused and nothing was written. Re-embed the store with the new "
            "encoder, or pass force=True (--force) to use this map anyway."
        )
    held_out = info.get("held_out") or {}
    rows = held_out.get("rows")
    minimum = (advice.get("thresholds") or {}).get("held-out rows", MIN_HELD_OUT_ROWS)
    raise MigrationQualityError(
        f"The map's own held-out report recommends nothing: it was measured on "
        f"{rows if rows is not None else 'too few'} held-out rows, fewer than the {minimum} a "
        f"recommendation needs, so whether the map keeps re-embedding's search is unknown; "
        f"{what} was refused and nothing was written. Fit and evaluate the map on a run with at "
        f"least {minimum} held-out rows (relrep-hf embed --test-size {minimum}, then "
        "relrep-hf fit-migration --save-map), or pass force=True (--force) to use this map "
        "anyway."
    )
