"""A run's evaluation report: ``report.json``, ``report.md`` (`render_report`), the figures,
and the evaluated heads' metrics in their cards."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor

from relrep_hf.evaluation.plots import relative_spaces_plot, stitching_heatmap
from relrep_hf.functional.markdown_tables import format_table
from relrep_hf.models.modeling_relative_head import write_head_metrics
from relrep_hf.utils.io import atomic_write_bytes


def write_report(
    run_dir: Path,
    report: dict[str, Any],
    test_features: Mapping[str, Mapping[str, Tensor]],
    labels: Tensor | None,
    label_names: Mapping[int, str] | None,
) -> None:
    """``report.json``, ``report.md``, ``stitching_heatmap.png`` and ``relative_spaces.png``
    (``test_features``: ``{method: {encoder: relative features of the test rows}}``)."""
    atomic_write_bytes(run_dir / "report.json", (json.dumps(report, indent=2) + "\n").encode())
    atomic_write_bytes(run_dir / "report.md", (render_report(report) + "\n").encode())
    names = [e["name"] for e in report["encoders"]]
    stitching_heatmap(
        report["retrieval"], names, run_dir / "stitching_heatmap.png", held_out=report["held_out"]
    )
    relative_spaces_plot(
        test_features, labels, run_dir / "relative_spaces.png", label_names=label_names
    )


def write_heads_metrics(
    run_dir: Path, run: dict[str, Any], classification: list[dict[str, Any]], method: str
) -> None:
    """Each saved head's (of ``method``) weighted F1 on every encoder's held-out rows, into its
    card in ``heads/<encoder>``."""
    for source in dict.fromkeys(row["classifier"] for row in classification):
        write_head_metrics(
            run_dir / "heads" / source,
            {
                row["encoder"]: {"weighted_f1": row[method]}
                for row in classification
                if row["classifier"] == source
            },
            dataset={
                "id": run["dataset"]["id"],
                "split": f"{run['dataset']['split']}, held-out test rows",
            },
            source_encoder=source,  # encoders are named for model, pooling and layer
        )


def retrieval_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per ordered pair: every method's (Random-Cos, PARAM-WIP, ...) Recall@1,
    Recall@5 and MRR."""
    held_out = set(report["held_out"])
    methods = list(report["retrieval"])
    rows = []
    for pair in report["retrieval"][methods[-1]]:
        source, target = pair.split("->")
        row = {
            "source": source,
            "target": target + (" *" if target in held_out or source in held_out else ""),
        }
        for method in methods:
            metrics = report["retrieval"][method][pair]
            row.update(
                {
                    f"{method} R@1": metrics["recall@1"],
                    f"{method} R@5": metrics["recall@5"],
                    f"{method} MRR": metrics["mrr"],
                }
            )
        rows.append(row)
    return rows


def render_report(report: dict[str, Any]) -> str:
    """The report as Markdown: retrieval for every ordered pair, then classification."""
    rows = retrieval_rows(report)
    columns = [k for k in rows[0] if k not in ("source", "target")]
    parts = [
        "Encoders: "
        + "; ".join(_encoder_summary(e) for e in report["encoders"])
        + f" (dataset {report['dataset']['id']}).",
        "",
        f"Zero-shot retrieval between relative spaces on {report['test_rows']} held-out rows "
        f"({report['num_anchors']} anchors; the run's anchor set has {report['support_size']} "
        "support inputs; * = pair with an encoder held out of fitting: its projector was built "
        "with no gradient step). Recall@k and MRR in %.",
        "",
        format_table(rows, columns),
    ]
    if report["classification"]:
        parts += [
            "",
            "Zero-shot classification, weighted F1 in % (classifier trained on one encoder's "
            "features, evaluated on another's; Abs. = the encoder's own absolute-space classifier).",
            "",
            format_table(report["classification"], ["Abs.", *report["retrieval"]]),
        ]
    if report.get("swappable_head"):
        parts += [
            "",
            "The swappable head (heads/swappable): one head trained on every training encoder's "
            "features at once, the number of directions it reads chosen by leave-one-encoder-out "
            "transfer among them: weighted F1, the encoder's own Abs., and the head's F1 as a "
            "fraction of it (zero-shot on a held-out encoder).",
            "",
            format_table(
                report["swappable_head"],
                ["weighted F1", "Abs.", "of Abs."],
                keys=["encoder", "setting"],
                scale=1.0,
                digits=3,
            ),
        ]
    if report.get("language_pairs"):
        rows = report["language_pairs"]
        parts += [
            "",
            "Language pairs: Recall@1 of the source's verse finding the same verse in the "
            "target's language, and weighted F1 of the source's classifier on the target's "
            "features (zero-shot across language and encoder), in %. Affine-LS is a supervised "
            "affine map fitted per pair on the same parallel training rows.",
            "",
            format_table(rows, [k for k in rows[0] if k not in ("pair", "source", "target")]),
        ]
    return "\n".join(parts)


def _encoder_summary(entry: dict[str, Any]) -> str:
    """``name`` (architecture or kind, Hub id or source, GGUF quantisation, column read)."""
    facts = [
        entry.get("architecture") or entry.get("encoder_kind") or "",
        entry.get("encoder_id") or entry.get("encoder_source") or "",
        f"{entry['encoder_quantization']} GGUF" if entry.get("encoder_quantization") else "",
        f"reads {entry['column']!r}" if entry.get("column") else "",
    ]
    facts = [fact for fact in facts if fact]
    return f"`{entry['name']}`" + (f" ({', '.join(facts)})" if facts else "")
