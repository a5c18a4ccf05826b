"""The pieces cards are made of: metric names and labels, dataset records, Markdown tables
and links, and the ``model-index`` results (`huggingface_hub.EvalResult`) of measured pairs.

Metrics come as ``{"a->b": {"recall@1": .., ...}}`` (``"a->b"``: queries embedded by a, keys, or
the head's training encoder, b) or per encoder; datasets as ``{"id", "name", "config", "split",
"revision"}`` records (``{"type": "custom", "name": ...}`` for data that is not on the Hub).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from huggingface_hub import EvalResult

from relrep_hf.encoding.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.functional.markdown_tables import markdown_table, metric_label
from relrep_hf.utils import hub_files


def metric_type(name: str) -> str:
    if name.startswith("recall@"):
        return "recall"
    if name in ("f1", "weighted_f1", "macro_f1", "micro_f1"):
        return "f1"
    return name


def metric_args(name: str) -> dict[str, Any] | None:
    if name.startswith("recall@") and name[7:].isdigit():
        return {"k": int(name[7:])}
    if name.endswith("_f1"):
        return {"average": name[: -len("_f1")]}
    return None


def metric_names(rows: Any) -> list[str]:
    """Metric names in a fixed order (whatever the JSON's key order): recall@k by k, MRR,
    accuracy, the F1s, then the rest alphabetically."""
    names = {n for row in rows for n, v in row.items() if is_number(v)}
    known = ["mrr", "accuracy", "f1", "weighted_f1", "macro_f1", "micro_f1"]

    def key(name: str) -> tuple[int, int, str]:
        if name.startswith("recall@") and name[7:].isdigit():
            return (0, int(name[7:]), name)
        return (1, known.index(name), name) if name in known else (2, 0, name)

    return sorted(names, key=key)


def parse_pairs(section: Any, order: Sequence[str] = ()) -> dict[tuple[str, str], dict[str, Any]]:
    """``{"a->b": {...}}`` as ``{(a, b): {...}}`` (malformed entries skipped), sorted by the
    position of a then b in ``order`` (names not in it last, alphabetically)."""
    pairs = {}
    for key, values in (section or {}).items():
        if isinstance(key, str) and "->" in key and isinstance(values, Mapping):
            a, b = key.split("->", 1)
            pairs[(a.strip(), b.strip())] = dict(values)
    rank = {name: i for i, name in enumerate(order)}

    def position(name: str) -> tuple[int, str]:
        return (rank.get(name, len(rank)), name)

    return dict(
        sorted(pairs.items(), key=lambda item: (position(item[0][0]), position(item[0][1])))
    )


def pairs_section(
    pairs: Mapping[tuple[str, str], Mapping[str, Any]],
    dataset: Mapping[str, Any],
    *,
    query: str,
    key: str,
    empty: str,
    note: str,
) -> str:
    if not pairs:
        return empty
    names = metric_names(pairs.values())
    rows = [
        [f"`{a}`", f"`{b}`", *(number_cell(values.get(n)) for n in names)]
        for (a, b), values in pairs.items()
    ]
    table = markdown_table([query, key, *(metric_label(n) for n in names)], rows)
    return f"{note} Measured on {dataset_text(dataset)}.\n\n{table}"


def heatmap_metric(pairs: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    names = metric_names(pairs.values())
    return "recall@1" if "recall@1" in names else names[0]


def eval_results(
    pairs: Mapping[tuple[str, str], Mapping[str, Any]],
    task_type: str,
    task_name: str,
    dataset: Mapping[str, Any],
) -> list[EvalResult]:
    return [
        EvalResult(
            task_type=task_type,
            task_name=task_name,
            metric_type=metric_type(name),
            metric_name=f"{metric_label(name)} ({a} → {b})",
            metric_value=values[name],
            metric_args=metric_args(name),
            **dataset_fields(dataset),
        )
        for (a, b), values in pairs.items()
        for name in metric_names([values])
    ]


def dataset_record(spec: Any, fallback: Mapping[str, Any]) -> dict[str, Any]:
    """A dataset record ``{"type", "name", "config", "split", "revision"}``."""
    if isinstance(spec, str) and spec:
        spec = {"id": spec}
    if not isinstance(spec, Mapping) or not (spec.get("id") or spec.get("type")):
        return dict(fallback)
    kind = str(spec.get("id") or spec.get("type"))
    return {
        "type": kind,
        "name": str(spec.get("name") or kind),
        "config": spec.get("config"),
        "split": spec.get("split"),
        "revision": spec.get("revision"),
    }


def support_dataset(reference: Mapping[str, Any] | None, rows: Any) -> dict[str, Any]:
    if reference and reference.get("dataset_id"):
        return dataset_record(
            {
                "id": reference["dataset_id"],
                "split": reference.get("split"),
                "revision": reference.get("revision"),
                "config": reference.get("config"),
            },
            {},
        )
    return {
        "type": "custom",
        "name": f"the anchor set's parallel training data ({rows_text(rows)})",
    }


def dataset_fields(dataset: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "dataset_type": dataset["type"],
        "dataset_name": dataset["name"],
        "dataset_config": dataset.get("config"),
        "dataset_split": dataset.get("split"),
        "dataset_revision": dataset.get("revision"),
    }


def dataset_text(dataset: Mapping[str, Any]) -> str:
    if dataset["type"] == "custom":
        return dataset["name"]
    kind = dataset["type"]
    text = (
        f"[`{kind}`](https://huggingface.co/datasets/{kind})"
        if is_linkable_hub_id(kind)
        else f"`{kind}`"
    )
    details = [f"{k} `{dataset[k]}`" for k in ("config", "split", "revision") if dataset.get(k)]
    return text + (f" ({', '.join(details)})" if details else "")


def hub_datasets(*datasets: Mapping[str, Any]) -> list[str] | None:
    ids = []
    for dataset in datasets:
        kind = dataset.get("type") or ""
        if kind != "custom" and is_linkable_hub_id(kind) and kind not in ids:
            ids.append(kind)
    return ids or None


def key_value_table(
    values: Mapping[str, Any], empty: str, *, header: Sequence[str] = ("setting", "value")
) -> str:
    if not values:
        return empty
    return markdown_table(
        header, [[key, f"`{plain_text(value)}`"] for key, value in values.items()]
    )


def repo_link(repo_id: str, revision: str, unknown: str) -> str:
    if not repo_id:
        return unknown
    at = f" (commit `{revision[:12]}`)" if revision else ""
    if is_linkable_hub_id(repo_id):
        return f"[`{repo_id}`](https://huggingface.co/{repo_id}){at}"
    return f"`{repo_id}` (a local folder, not on the Hub)"


def card_title(repo_id: str | None, default: str) -> str:
    return repo_id.split("/")[-1] if repo_id else default


def setting_of(encoder: str, source: str) -> str:
    return "trained on" if encoder == source else "zero-shot"


def number_cell(value: Any) -> str:
    return f"{float(value):.4f}" if is_number(value) else ""


def python_literal(value: Any) -> str:
    """A str or None as a Python literal with double quotes (for snippets)."""
    return "None" if value is None else json.dumps(value)


def plain_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def rows_text(rows: Any) -> str:
    return f"{rows} rows" if isinstance(rows, int) else "held-out rows"


def shorten(text: str, width: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_linkable_hub_id(value: str) -> bool:
    """A Hub repo id, not a ``local:`` record, the packaged sentences or an existing path."""
    return value != BUNDLED_SENTENCES_ID and hub_files.is_hub_id(value)
