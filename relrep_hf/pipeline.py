"""The run folder pipeline behind ``relrep-hf``: embed -> fit -> onboard -> evaluate.

Each step reads what the previous one wrote into one run folder::

    run.json                  encoders, dataset, train/test rows, held-out encoders
    embeddings/               Arrow embeddings, one cache folder per encoder (never recomputed)
    anchor_set/               the PARAM AnchorSet (fitted without the held-out encoders)
    projectors/<encoder>/     one RelativeProjector per encoder (held-out ones onboarded)
    heads/<encoder>/          a classifier on that encoder's relative features
    report.json, report.md    zero-shot retrieval and classification, PARAM-WIP vs Random-Cos
    stitching_heatmap.png, relative_spaces.png
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import datasets
import torch
from torch import Tensor

from relrep_hf.anchor_set import AnchorSet
from relrep_hf.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.defaults import DEFAULT_ENCODERS, DEFAULT_METHOD, METHODS
from relrep_hf.encoders import EncoderSpec, extraction_id, load_encoder, resolve_pooling
from relrep_hf.extraction import embeddings_tensor, extract_embedding_views, extract_embeddings
from relrep_hf.io import atomic_write_bytes
from relrep_hf.modeling_relative_head import write_head_metrics
from relrep_hf.modeling_relative_projector import RelativeProjector
from relrep_hf.param_trainer import ParamTrainer, ParamTrainingArguments
from relrep_hf.plots import relative_spaces_plot, stitching_heatmap
from relrep_hf.statistics import Statistics
from relrep_hf.zero_shot import (
    format_table,
    head_f1,
    retrieval_matrix,
    standardize,
    train_classifier,
)

logger = logging.getLogger(__name__)

RUN_FILE = "run.json"
BUNDLED_DATASET = BUNDLED_SENTENCES_ID


class RunError(ValueError):
    """A run folder is missing a step or holds something inconsistent."""


def _read_run(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_FILE
    if not path.is_file():
        raise RunError(
            f"{run_dir} is not a run folder (no {RUN_FILE}): run 'relrep-hf embed' first."
        )
    return json.loads(path.read_text())


def _write_run(run_dir: Path, run: dict[str, Any]) -> None:
    atomic_write_bytes(run_dir / RUN_FILE, (json.dumps(run, indent=2) + "\n").encode())


# The main job at full size on the 4,192 bundled sentences; `demo_sizes` scales it down.
FULL_DEMO = {
    "rows": 4192,
    "test_size": 1000,
    "support_size": 2000,
    "num_anchors": 300,
    "num_train_epochs": 95,
    "head_epochs": 30,
}
QUICK_DEMO_ROWS = 1000  # --quick: about a minute on a quiet laptop CPU
# Sizes scaled with the rows, and their floors (below them the tables say nothing). Epochs are
# passes over the rows, so their cost already shrinks with the rows; fewer epochs on fewer rows
# left PARAM with 23 optimizer steps and worse than random anchors (tried: R@1 43-83%).
_DEMO_FLOORS = {"test_size": 20, "support_size": 8, "num_anchors": 8}


def demo_sizes(
    available: int,
    *,
    limit: int | None = None,
    quick: bool = False,
    **given: int | None,
) -> dict[str, int]:
    """The main job's sizes for ``limit`` rows (``quick``: 1,000), checked before any embedding.

    The sizes of `FULL_DEMO` that grow with the data (test rows, support points, anchors) are
    scaled by the share of rows used, down to small floors; the epochs stay (each one costs less
    on fewer rows). Sizes in ``given`` that are not ``None`` are kept as given. Raises `RunError`
    naming the size that does not fit.
    """
    if limit is None and quick:
        limit = QUICK_DEMO_ROWS
    rows = available if limit is None else limit
    if rows < 2 or rows > available:
        raise RunError(f"--limit {rows}: the dataset has {available} rows; use 2 to {available}.")
    scale = rows / FULL_DEMO["rows"]
    sizes = {"rows": rows}
    for name, full in FULL_DEMO.items():
        if name in _DEMO_FLOORS:
            sizes[name] = max(_DEMO_FLOORS[name], round(full * scale))
        elif name != "rows":
            sizes[name] = full
    sizes["support_size"] = max(sizes["support_size"], sizes["num_anchors"])
    sizes.update({name: value for name, value in given.items() if value is not None})
    train_rows = rows - sizes["test_size"]
    if train_rows < 2:
        raise RunError(
            f"--test-size {sizes['test_size']} leaves {max(train_rows, 0)} training rows out of "
            f"{rows}: use a smaller --test-size or a larger --limit."
        )
    if sizes["support_size"] > train_rows:
        raise RunError(
            f"--support-size {sizes['support_size']} exceeds the {train_rows} training rows "
            f"({rows} rows - {sizes['test_size']} test rows): use a smaller --support-size or a "
            "larger --limit."
        )
    if sizes["num_anchors"] > sizes["support_size"]:
        raise RunError(
            f"--num-anchors {sizes['num_anchors']} exceeds --support-size "
            f"{sizes['support_size']}: each anchor mixes support points, so use fewer anchors."
        )
    return sizes


def load_dataset_for_run(
    dataset: str = BUNDLED_DATASET,
    *,
    split: str = "train",
    column: str = "text",
    limit: int | None = None,
) -> datasets.Dataset:
    """The embedded English sentences, or any `datasets` dataset by Hub id / local path."""
    if dataset == BUNDLED_DATASET:
        from relrep_hf.corpora import load_sentences

        data = load_sentences(limit)
    else:
        data = datasets.load_dataset(dataset, split=split)
        if limit is not None:
            data = data.select(range(min(limit, len(data))))
    if column not in data.column_names:
        raise RunError(
            f"The dataset has no column {column!r}; its columns are {data.column_names}."
        )
    return data


def embed(
    run_dir: str | os.PathLike,
    encoders: Sequence[str] = DEFAULT_ENCODERS,
    *,
    dataset: str = BUNDLED_DATASET,
    split: str = "train",
    column: str = "text",
    label_column: str | None = "label",
    limit: int | None = None,
    test_size: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
    show_progress: bool | None = None,
) -> dict[str, Any]:
    """Embed the dataset with every encoder into ``run_dir/embeddings`` and write run.json.

    Specs of the same model (several layers / poolings) share one load and one forward pass.
    """
    run_dir = Path(run_dir)
    data = load_dataset_for_run(dataset, split=split, column=column, limit=limit)
    if test_size >= len(data):
        raise RunError(f"test_size={test_size} leaves no training rows out of {len(data)}.")
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
    specs = [EncoderSpec.parse(spec) for spec in encoders]
    by_index: dict[int, dict[str, Any]] = {}
    models: dict[
        tuple[str, str | None, str | None], list[int]
    ] = {}  # one load and one pass per model
    for i, spec in enumerate(specs):
        models.setdefault((spec.model_id, spec.revision, spec.gguf_file), []).append(i)
    for indices in models.values():
        model, tokenizer, provenance = load_encoder(specs[indices[0]])
        for i in indices:
            specs[i] = resolve_pooling(specs[i], model)
        logger.info("Embedding %d rows with %s", len(data), [str(specs[i]) for i in indices])
        embedded_views = extract_embedding_views(
            model,
            tokenizer,
            data,
            views=[(specs[i].pooling, specs[i].layer) for i in indices],
            column=column,
            batch_size=batch_size,
            cache_dir=run_dir / "embeddings",
            encoder_id=extraction_id(specs[indices[0]], provenance),
            encoder_revision=provenance["encoder_revision"],
            show_progress=show_progress,
        )
        for i, embedded in zip(indices, embedded_views, strict=True):
            by_index[i] = _entry(specs[i], provenance, embedded, run_dir)
        del model  # the next model loads without this one in memory
    entries = [by_index[i] for i in range(len(specs))]
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        raise RunError(
            f"Two encoders have the same name: {names}. Give distinct poolings or layers."
        )
    run = {
        "encoders": entries,
        "dataset": {
            "id": dataset,
            "split": split,
            "column": column,
            "label_column": label_column,
            "rows": len(data),
        },
        "test_rows": order[:test_size].sort().values.tolist(),
        "train_rows": order[test_size:].sort().values.tolist(),
    }
    if label_column not in data.column_names:
        run["dataset"]["label_column"] = None
    run_dir.mkdir(parents=True, exist_ok=True)
    _write_run(run_dir, run)
    return run


def _entry(
    spec: EncoderSpec, provenance: dict[str, str], embedded: datasets.Dataset, run_dir: Path
) -> dict[str, Any]:
    """run.json's record of one encoder: its spec, provenance and embeddings file."""
    arrow = next(
        f["filename"] for f in embedded.cache_files if f["filename"].endswith("embeddings.arrow")
    )
    return {
        "name": spec.name,
        "spec": str(spec),
        **provenance,
        "pooling": spec.pooling,
        "layer": spec.layer,
        "dim": len(embedded[0]["embedding"]),
        "embeddings": os.path.relpath(arrow, run_dir),
    }


def _dataset(run: dict[str, Any]) -> datasets.Dataset:
    info = run["dataset"]
    return load_dataset_for_run(
        info["id"], split=info["split"], column=info["column"], limit=info["rows"]
    )


def _labels(run: dict[str, Any]) -> tuple[Tensor, dict[int, str]] | tuple[None, None]:
    """The class ids of every row and their names: a ``ClassLabel``'s names, the sorted
    strings of a string column, or ``LABEL_i`` for plain integers (as transformers names them)."""
    column = run["dataset"]["label_column"]
    if not column:
        return None, None
    data = _dataset(run)
    values = list(data[column])
    feature = data.features[column]
    if isinstance(feature, datasets.ClassLabel):
        names = list(feature.names)
    elif values and isinstance(values[0], str):
        names = sorted(set(values))
        index = {name: i for i, name in enumerate(names)}
        values = [index[v] for v in values]
    else:
        names = [f"LABEL_{i}" for i in range(max(values) + 1)]
    return torch.tensor(values), dict(enumerate(names))


def _embeddings(run_dir: Path, entry: dict[str, Any]) -> Tensor:
    return embeddings_tensor(datasets.Dataset.from_file(str(run_dir / entry["embeddings"])))


SHARED_LINEAR_SUPPORT = 1000  # K when ParamTrainingArguments.support_size is None
METHOD_LABELS = {
    "param": "PARAM-WIP",
    "shared_linear": "Shared-Linear-WIP",
    "full_support": "Full-Support-WIP",
}


def fit(
    run_dir: str | os.PathLike,
    *,
    held_out: Sequence[str] | None = None,
    args: ParamTrainingArguments | None = None,
    method: str = DEFAULT_METHOD,
) -> AnchorSet:
    """Fit an anchor set on the training rows of every encoder but the held-out ones (``method``:
    the shared linear closed form, the paper's PARAM or full support; ``args`` give the number
    of anchors, support size, shrinkage and, for PARAM, its training), then build every
    encoder's projector (held-out ones onboarded, no training)."""
    if method not in METHODS:
        raise RunError(f"Invalid method {method!r}. Valid: {', '.join(map(repr, METHODS))}.")
    run_dir = Path(run_dir)
    run = _read_run(run_dir)
    names = [e["name"] for e in run["encoders"]]
    held_out = list(held_out) if held_out is not None else [names[-1]]
    unknown = [h for h in held_out if h not in names]
    if unknown:
        raise RunError(f"Unknown held-out encoder(s) {unknown}; the run's encoders are {names}.")
    training_names = [n for n in names if n not in held_out]
    if not training_names:
        raise RunError("Every encoder is held out: PARAM needs at least one encoder to train on.")
    args = args or ParamTrainingArguments(str(run_dir / "anchor_set"))
    args = ParamTrainingArguments(**{**asdict(args), "output_dir": str(run_dir / "anchor_set")})
    train_rows = torch.tensor(run["train_rows"])
    spaces = {e["name"]: _embeddings(run_dir, e) for e in run["encoders"]}
    entries = {e["name"]: e for e in run["encoders"]}
    data = _dataset(run)
    column = run["dataset"]["column"]
    texts = list(data[column]) if isinstance(data[0][column], str) else None
    encoders = {
        name: {k: entries[name][k] for k in ("encoder_id", "encoder_revision", "pooling", "layer")}
        for name in training_names
    }
    support_reference = (
        None
        if texts
        else {
            "dataset_id": run["dataset"]["id"],
            "split": run["dataset"]["split"],
            "column": column,
        }
    )
    if method == "param":
        trainer = ParamTrainer(
            args,
            {name: spaces[name][train_rows] for name in training_names},
            inputs=[texts[i] for i in run["train_rows"]] if texts else None,
            support_reference=support_reference,
            encoders=encoders,
        )
        anchor_set = trainer.train()
        support_indices = trainer.support_indices
    else:
        k = min(args.support_size or SHARED_LINEAR_SUPPORT, len(train_rows))
        support_indices = torch.arange(k)
        rows = [run["train_rows"][i] for i in range(k)]
        support = [texts[i] for i in rows] if texts else [{"index": i} for i in rows]
        if method == "full_support":
            anchor_set = AnchorSet.full_support(support, shrinkage=args.shrinkage, eps=args.eps)
        else:
            anchor_set = AnchorSet.shared_linear(
                support,
                {name: spaces[name][train_rows] for name in training_names},
                args.num_anchors,
                support_rows=support_indices,
                shrinkage=args.shrinkage,
                eps=args.eps,
            )
        anchor_set.support_reference = support_reference
        anchor_set.encoders = [
            {"name": name, "dim": spaces[name].shape[1], **encoders[name]}
            for name in training_names
        ]
        anchor_set.save_pretrained(run_dir / "anchor_set")
    support_rows = train_rows[support_indices]
    for name, space in spaces.items():
        entry = entries[name]
        projector = RelativeProjector.from_anchor_set(
            anchor_set,
            space[support_rows],
            Statistics.from_embeddings(space[train_rows]),
            encoder_id=entry["encoder_id"],
            encoder_revision=entry["encoder_revision"],
            pooling=entry["pooling"],
            layer=entry["layer"],
            **{k: entry[k] for k in ("encoder_gguf_file", "encoder_quantization") if k in entry},
        )
        projector.save_pretrained(run_dir / "projectors" / name)
    run.update(
        held_out=held_out,
        support_rows=support_rows.tolist(),
        fit={**args.to_dict(), "method": method},
    )
    _write_run(run_dir, run)
    return anchor_set


def onboard(
    run_dir: str | os.PathLike,
    encoder: str,
    *,
    batch_size: int = 64,
    show_progress: bool | None = None,
) -> RelativeProjector:
    """A projector for a new encoder: embed the run's rows with it, estimate its statistics on
    the training rows, take its anchors from the anchor set's support rows. No gradient step."""
    run_dir = Path(run_dir)
    run = _read_run(run_dir)
    if "support_rows" not in run:
        raise RunError(f"{run_dir} has no anchor set yet: run 'relrep-hf fit' first.")
    data = _dataset(run)
    spec = EncoderSpec.parse(encoder)
    model, tokenizer, provenance = load_encoder(spec)
    spec = resolve_pooling(spec, model)
    if spec.name in {e["name"] for e in run["encoders"]}:
        raise RunError(f"The run already has an encoder named {spec.name!r}.")
    embedded = extract_embeddings(
        model,
        tokenizer,
        data,
        column=run["dataset"]["column"],
        pooling=spec.pooling,
        layer=spec.layer,
        batch_size=batch_size,
        cache_dir=run_dir / "embeddings",
        encoder_id=extraction_id(spec, provenance),
        encoder_revision=provenance["encoder_revision"],
        show_progress=show_progress,
    )
    space = embeddings_tensor(embedded)
    anchor_set = AnchorSet.from_pretrained(run_dir / "anchor_set")
    projector = RelativeProjector.from_anchor_set(
        anchor_set,
        space[torch.tensor(run["support_rows"])],
        Statistics.from_embeddings(space[torch.tensor(run["train_rows"])]),
        pooling=spec.pooling,
        layer=spec.layer,
        **provenance,
    )
    projector.save_pretrained(run_dir / "projectors" / spec.name)
    arrow = next(
        f["filename"] for f in embedded.cache_files if f["filename"].endswith("embeddings.arrow")
    )
    run["encoders"].append(
        {
            "name": spec.name,
            "spec": str(spec),
            **provenance,
            "pooling": spec.pooling,
            "layer": spec.layer,
            "dim": space.shape[1],
            "embeddings": os.path.relpath(arrow, run_dir),
            "onboarded": True,
        }
    )
    run["held_out"] = [*run.get("held_out", []), spec.name]
    _write_run(run_dir, run)
    return projector


def evaluate(run_dir: str | os.PathLike, *, head_epochs: int = 30) -> dict[str, Any]:
    """Zero-shot retrieval (every ordered pair) and classification (a head per source encoder
    evaluated on every encoder), PARAM-WIP against Random-Cos; report, tables and figures."""
    run_dir = Path(run_dir)
    run = _read_run(run_dir)
    if "support_rows" not in run:
        raise RunError(f"{run_dir} has no anchor set yet: run 'relrep-hf fit' first.")
    names = [e["name"] for e in run["encoders"]]
    train_rows, test_rows = torch.tensor(run["train_rows"]), torch.tensor(run["test_rows"])
    support_rows = torch.tensor(run["support_rows"])
    spaces = {e["name"]: _embeddings(run_dir, e) for e in run["encoders"]}
    anchor_set = AnchorSet.from_pretrained(run_dir / "anchor_set")
    random_set = AnchorSet.random(
        anchor_set.support, anchor_set.num_anchors, seed=run.get("fit", {}).get("seed", 0)
    )
    saved = METHOD_LABELS.get(anchor_set.strategy, anchor_set.strategy)
    relatives: dict[str, dict[str, Tensor]] = {"Random-Cos": {}, saved: {}}
    closed_form = None
    if anchor_set.strategy == "param":  # the winner beside the paper's method: seconds to fit
        training = [n for n in names if n not in run.get("held_out", [])]
        rows = torch.arange(len(support_rows))
        closed_form = AnchorSet.shared_linear(
            anchor_set.support,
            {n: torch.cat([spaces[n][support_rows], spaces[n][train_rows]]) for n in training},
            anchor_set.num_anchors,
            support_rows=rows,
            fit_rows=len(rows) + torch.arange(len(train_rows)),
            shrinkage=anchor_set.shrinkage,
            eps=anchor_set.eps,
        )
        relatives[METHOD_LABELS["shared_linear"]] = {}
    for name, space in spaces.items():
        projector = RelativeProjector.from_pretrained(run_dir / "projectors" / name)
        relatives[saved][name] = projector(space).detach()
        cosine = RelativeProjector.from_anchor_set(
            random_set, space[support_rows], None, similarity="cosine"
        )
        relatives["Random-Cos"][name] = cosine(space).detach()
        if closed_form is not None:
            relatives[METHOD_LABELS["shared_linear"]][name] = RelativeProjector.from_anchor_set(
                closed_form,
                space[support_rows],
                Statistics.from_embeddings(space[train_rows]),
            )(space).detach()
    test = {method: {n: r[test_rows] for n, r in rel.items()} for method, rel in relatives.items()}
    retrieval = {method: retrieval_matrix(rel) for method, rel in test.items()}

    classification = []
    labels, id2label = _labels(run)
    if labels is not None:
        num_labels = len(id2label)
        heads = {
            method: {
                source: train_classifier(
                    rel[source][train_rows],
                    labels[train_rows],
                    num_labels=num_labels,
                    epochs=head_epochs,
                    id2label=id2label,
                )
                for source in names
            }
            for method, rel in relatives.items()
        }
        for source in names:
            heads[saved][source].config.anchor_set_id = anchor_set.repo_id
            heads[saved][source].config.source_encoder_id = next(
                e["encoder_id"] for e in run["encoders"] if e["name"] == source
            )
            heads[saved][source].save_pretrained(run_dir / "heads" / source)
        for target in names:
            absolute_train, absolute_test = standardize(
                spaces[target][train_rows], spaces[target][test_rows]
            )
            absolute = train_classifier(
                absolute_train, labels[train_rows], num_labels=num_labels, epochs=head_epochs
            )
            for source in names:
                row = {"encoder": target, "classifier": source}
                if source == target:
                    row["Abs."] = head_f1(absolute, absolute_test, labels[test_rows])
                for method in relatives:
                    row[method] = head_f1(
                        heads[method][source],
                        relatives[method][target][test_rows],
                        labels[test_rows],
                    )
                classification.append(row)
        for source in names:  # the saved heads' cards show where they were evaluated
            _write_head_metrics(run_dir / "heads" / source, run, source, classification, saved)

    held_out = run.get("held_out", [])
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "encoders": run["encoders"],
        "held_out": held_out,
        "dataset": run["dataset"],
        "test_rows": len(test_rows),
        "num_anchors": anchor_set.num_anchors,
        "support_size": anchor_set.support_size,
        "retrieval": retrieval,
        "classification": classification,
    }
    atomic_write_bytes(run_dir / "report.json", (json.dumps(report, indent=2) + "\n").encode())
    atomic_write_bytes(run_dir / "report.md", (render_report(report) + "\n").encode())
    stitching_heatmap(retrieval, names, run_dir / "stitching_heatmap.png", held_out=held_out)
    relative_spaces_plot(
        test,
        labels[test_rows] if labels is not None else None,
        run_dir / "relative_spaces.png",
        label_names=id2label,
    )
    anchor_set.metrics["zero_shot_retrieval"] = retrieval[saved]
    anchor_set.metrics["zero_shot_classification"] = classification
    anchor_set.metrics["evaluated_on"] = {
        "dataset": run["dataset"]["id"],
        "rows": len(test_rows),
        "held_out": held_out,
    }
    anchor_set.save_pretrained(run_dir / "anchor_set")
    return report


def _write_head_metrics(
    folder: Path,
    run: dict[str, Any],
    source: str,
    classification: list[dict[str, Any]],
    method: str = "PARAM-WIP",
) -> None:
    """A saved head's (of ``method``) weighted F1 on every encoder's held-out rows, into its
    card."""
    write_head_metrics(
        folder,
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
        f"Zero-shot retrieval between relative spaces on {report['test_rows']} held-out rows "
        f"({report['num_anchors']} anchors, support {report['support_size']}; * = pair with an "
        "encoder held out of PARAM training). Recall@k and MRR in %.",
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
    return "\n".join(parts)
