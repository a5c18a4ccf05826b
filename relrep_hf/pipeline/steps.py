"""The run folder pipeline behind ``relrep-hf``: embed -> fit -> onboard -> evaluate.

Each step reads what the previous one wrote into one run folder (`relrep_hf.pipeline.run_folder`)::

    run.json                  encoders, dataset, train/test rows, held-out encoders
    embeddings/               Arrow embeddings, one cache folder per encoder (never recomputed)
    anchor_set/               the AnchorSet (fitted without the held-out encoders)
    projectors/<encoder>/     one RelativeProjector per encoder (held-out ones onboarded)
    heads/<encoder>/          a classifier on that encoder's relative features
    report.json, report.md    zero-shot retrieval and classification (`relrep_hf.pipeline.run_report`)
    stitching_heatmap.png, relative_spaces.png

The evaluation is Algorithm 1 of `relrep_hf.evaluation.zero_shot` on the run's saved projectors.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from relrep_hf.anchors import FitData, anchor_method as get_anchor_method
from relrep_hf.anchors.arguments import FitArguments
from relrep_hf.encoding.encoder_kinds import (
    Embedded,
    EmbedRequest,
    embed_encoders,
    parse_encoder,
)
from relrep_hf.encoding.extraction import embeddings_tensor
from relrep_hf.encoding.parallel_corpus import PARALLEL_VERSES_ID
from relrep_hf.evaluation.stitching_steps import build_projectors
from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.pipeline.run_evaluation import evaluate
from relrep_hf.pipeline.run_folder import (
    BUNDLED_DATASET,
    FULL_DEMO,
    RunError,
    check_refit,
    demo_sizes,
    encoder_entry,
    load_dataset_for_run,
    prepare_embed,
    read_run,
    remove_outputs,
    run_dataset,
    run_embeddings,
    user_embedding_cache,
    write_run,
)
from relrep_hf.pipeline.run_report import render_report
from relrep_hf.utils.defaults import (
    DEFAULT_EMBED_BATCH_SIZE,
    DEFAULT_ENCODERS,
    DEFAULT_METHOD,
    DEFAULT_TEST_SIZE,
)

__all__ = [
    "BUNDLED_DATASET",
    "FULL_DEMO",
    "RunError",
    "demo_sizes",
    "embed",
    "evaluate",
    "fit",
    "load_dataset_for_run",
    "onboard",
    "render_report",
    "user_embedding_cache",
]


def embed(
    run_dir: str | os.PathLike,
    encoders: Sequence[str] = DEFAULT_ENCODERS,
    *,
    dataset: str = BUNDLED_DATASET,
    split: str = "train",
    column: str = "text",
    label_column: str | None = "label",
    limit: int | None = None,
    test_size: int = DEFAULT_TEST_SIZE,
    seed: int = 0,
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
    show_progress: bool | None = None,
    embeddings: Sequence[str] = (),
    cache_dir: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Embed the dataset with every encoder into ``run_dir/embeddings`` and write run.json.

    ``encoders`` are specs of any kind (`relrep_hf.encoding.encoder_kinds.parse_encoder`; ``SPEC#COLUMN``
    reads another column, e.g. one language of a parallel corpus); ``embeddings`` are
    precomputed ones, ``NAME=PATH``. Specs of the same model (several layers / poolings) share
    one load and one forward pass. ``cache_dir``: embed into this cache (e.g. a user-level one
    shared by runs) and copy into the run folder; default the run folder itself. A folder
    holding a fitted run is refused unless ``overwrite`` (which deletes that fit).
    """
    run_dir = Path(run_dir)
    prepare_embed(run_dir, overwrite=overwrite, test_size=test_size, batch_size=batch_size)
    if dataset == PARALLEL_VERSES_ID and column == "text":
        column = "en"  # the parallel verses have one column per language
    parsed = _parse_specs(encoders, embeddings)
    columns = [spec_column or column for _, spec_column in parsed]
    data = load_dataset_for_run(
        dataset, split=split, column=column, limit=limit, columns=[column, *columns]
    )
    if test_size >= len(data):
        raise RunError(f"test_size={test_size} leaves no training rows out of {len(data)}.")
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
    cache = Path(cache_dir) if cache_dir is not None else run_dir / "embeddings"
    request = EmbedRequest(data, cache, batch_size, show_progress)
    embedded = embed_encoders([spec for spec, _ in parsed], columns, request)
    entries = [
        _entry(_in_run_folder(one, run_dir), run_dir, spec_column)
        for one, (_, spec_column) in zip(embedded, parsed, strict=True)
    ]
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
    if dataset == PARALLEL_VERSES_ID:  # the languages decide which verses every one has
        run["dataset"]["columns"] = list(dict.fromkeys([column, *columns]))
    if label_column not in data.column_names:
        run["dataset"]["label_column"] = None
    run_dir.mkdir(parents=True, exist_ok=True)
    write_run(run_dir, run)
    return run


def _parse_specs(encoders: Sequence[str], embeddings: Sequence[str]) -> list[tuple[Any, Any]]:
    """Every spec parsed (`parse_encoder`), ``--embeddings`` ones checked to be precomputed."""
    parsed = [parse_encoder(spec) for spec in [*encoders, *embeddings]]
    for spec, _ in parsed[len(encoders) :]:
        if spec.kind != "precomputed":
            raise RunError(f"--embeddings takes NAME=PATH, got {str(spec)!r}.")
    return parsed


def _entry(embedded: Embedded, run_dir: Path, column: str | None) -> dict[str, Any]:
    """run.json's record of one embedded encoder (``column``: the one its spec names)."""
    entry = encoder_entry(
        embedded.spec, embedded.provenance, embedded.dataset, run_dir, column=column
    )
    return {**entry, **embedded.extra}


def _in_run_folder(one: Embedded, run_dir: Path) -> Embedded:
    """``one`` read from the run folder's ``embeddings/``: its cache folder is copied there
    (hard links where possible) when it was written to a cache elsewhere."""
    import datasets

    embedded = one.dataset

    arrow = Path(
        next(
            f["filename"]
            for f in embedded.cache_files
            if f["filename"].endswith("embeddings.arrow")
        )
    )
    target = run_dir / "embeddings" / arrow.parent.name
    if arrow.parent.resolve() == target.resolve():
        return one
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(arrow.parent, target, copy_function=_link_or_copy)
    copy = datasets.Dataset.from_file(str(target / arrow.name))
    # the copy first: run.json records the first embeddings file, which must be the run's own
    local = datasets.concatenate_datasets([copy, embedded.remove_columns("embedding")], axis=1)
    return replace(one, dataset=local)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


PROVENANCE_KEYS = ("encoder_id", "encoder_revision", "pooling", "layer")
# what else a projector records of its encoder: the GGUF file, and what kind of encoder it was
EXTRA_PROVENANCE_KEYS = (
    "encoder_gguf_file",
    "encoder_quantization",
    "encoder_kind",
    "encoder_source",
)


def _projector_provenance(entry: dict[str, Any]) -> dict[str, Any]:
    """What a projector records of the encoder of a run.json record."""
    return {k: entry[k] for k in (*PROVENANCE_KEYS, *EXTRA_PROVENANCE_KEYS) if k in entry}


def fit(
    run_dir: str | os.PathLike,
    *,
    held_out: Sequence[str] | None = None,
    method: str = DEFAULT_METHOD,
    args: FitArguments | None = None,
    overwrite: bool = False,
) -> AnchorSet:
    """Fit an anchor set on the training rows of every encoder but the held-out ones, by one
    of the registered methods (`relrep_hf.anchors`: the shared linear closed
    form, the paper's PARAM, full support, the baselines), then build every encoder's projector
    (held-out ones onboarded, no training).

    ``args`` are the method's arguments (default: its own class's defaults, e.g. the shrinkage
    chosen from the training rows for the shared linear map, the paper's 0.15 for PARAM). A run
    fitted already is refused unless ``overwrite``: then the old fit's outputs (heads and report
    included) are deleted once the new anchor set is fitted (`run_folder.check_refit`)."""
    try:
        anchor_method = get_anchor_method(method)
    except ValueError as error:
        raise RunError(str(error)) from None
    run_dir = Path(run_dir)
    run = read_run(run_dir)
    names = [e["name"] for e in run["encoders"]]
    held_out = list(held_out) if held_out is not None else [names[-1]]
    unknown = [h for h in held_out if h not in names]
    if unknown:
        raise RunError(f"Unknown held-out encoder(s) {unknown}; the run's encoders are {names}.")
    training_names = [n for n in names if n not in held_out]
    if not training_names:
        raise RunError(
            "Every encoder is held out: an anchor set needs one encoder to be fitted on."
        )
    stale = check_refit(run_dir, run, overwrite=overwrite)
    args = replace(
        args or anchor_method.arguments("unused"), output_dir=str(run_dir / "anchor_set")
    )
    train_rows = torch.tensor(run["train_rows"])
    spaces = run_embeddings(run_dir, run)
    entries = {e["name"]: e for e in run["encoders"]}
    data = run_dataset(run)
    column = run["dataset"]["column"]
    texts = data[column] if isinstance(data[0][column], str) else None
    fit_data = FitData(
        training={name: spaces[name][train_rows] for name in training_names},
        inputs=[texts[i] for i in run["train_rows"]]
        if texts
        else [{"index": i} for i in run["train_rows"]],
        support_reference=None
        if texts
        else {
            "dataset_id": run["dataset"]["id"],
            "split": run["dataset"]["split"],
            "column": column,
        },
        encoders={name: {k: entries[name][k] for k in PROVENANCE_KEYS} for name in training_names},
    )
    anchor_set, support_indices = anchor_method.fit(args, fit_data)
    remove_outputs(run_dir, stale)  # nothing of the old fit outlives it
    anchor_set.save_pretrained(run_dir / "anchor_set")
    support_rows = train_rows[support_indices]
    provenance = {name: _projector_provenance(entry) for name, entry in entries.items()}
    projectors = build_projectors(
        anchor_set,
        spaces,
        support_rows=support_rows,
        statistics_rows=train_rows,
        similarity=None,  # the anchor set's own
        provenance=provenance,
    )
    for name, projector in projectors.items():
        projector.save_pretrained(run_dir / "projectors" / name)
    run.update(
        held_out=held_out,
        support_rows=support_rows.tolist(),
        fit={**args.to_dict(), "method": method},
    )
    write_run(run_dir, run)
    return anchor_set


def onboard(
    run_dir: str | os.PathLike,
    encoder: str,
    *,
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
    show_progress: bool | None = None,
) -> RelativeProjector:
    """A projector for a new encoder: embed the run's rows with it, estimate its statistics on
    the training rows, take its anchors from the anchor set's support rows. No gradient step."""
    run_dir = Path(run_dir)
    run = read_run(run_dir, fitted=True)
    data = run_dataset(run)
    spec, spec_column = parse_encoder(encoder)
    read = spec_column or run["dataset"]["column"]
    if read not in data.column_names:
        raise RunError(
            f"The run's dataset has no column {read!r}; its columns are {data.column_names}."
        )
    request = EmbedRequest(data, run_dir / "embeddings", batch_size, show_progress)
    (embedded,) = embed_encoders([spec], [read], request)
    entry = _entry(embedded, run_dir, spec_column)
    name = entry["name"]
    if name in {e["name"] for e in run["encoders"]}:
        raise RunError(f"The run already has an encoder named {name!r}.")
    (projector,) = build_projectors(
        AnchorSet.from_pretrained(run_dir / "anchor_set"),
        {name: embeddings_tensor(embedded.dataset)},
        support_rows=run["support_rows"],
        statistics_rows=run["train_rows"],
        similarity=None,
        provenance={name: _projector_provenance(entry)},
    ).values()
    projector.save_pretrained(run_dir / "projectors" / name)
    run["encoders"].append({**entry, "onboarded": True})
    run["held_out"] = [*run.get("held_out", []), name]
    write_run(run_dir, run)
    return projector
