"""The evaluate step: zero-shot retrieval and classification of a fitted run folder.

The run's saved projectors are evaluated beside Random-Cos and the method its anchor set's
method is compared with (`relrep_hf.anchors`): the shared linear closed form
beside PARAM, PARAM beside the others. That method is fitted on the same training encoders and
rows, and kept out of the run folder (the run's anchor set is the one it publishes).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from relrep_hf.anchors import ANCHOR_METHODS, AnchorMethod, FitData
from relrep_hf.anchors.arguments import FitArguments
from relrep_hf.anchors.param.arguments import ParamTrainingArguments
from relrep_hf.evaluation.language_pairs import language_pair_rows
from relrep_hf.evaluation.stitching_steps import build_projectors, retrieval_matrix
from relrep_hf.evaluation.zero_shot import EncoderData, Method, ZeroShotStitching
from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.pipeline.run_folder import read_run, run_embeddings, run_labels
from relrep_hf.pipeline.run_report import write_heads_metrics, write_report
from relrep_hf.pipeline.swappable_head import publish_swappable_head
from relrep_hf.utils.defaults import DEFAULT_HEAD_EPOCHS


def method_projectors(
    method: AnchorMethod,
    args: FitArguments,
    spaces: dict[str, Tensor],
    training: Sequence[str],
    train_rows: Tensor,
) -> dict[str, RelativeProjector]:
    """Every encoder's projector from ``method`` fitted on the training encoders' training
    rows (in a temporary folder: the run's own anchor set is the one it publishes)."""
    with tempfile.TemporaryDirectory() as folder:
        args = replace(args, output_dir=str(Path(folder) / "anchor_set"))
        data = FitData(
            {n: spaces[n][train_rows] for n in training},
            [{"index": int(i)} for i in train_rows],
        )
        anchor_set, support = method.fit(args, data)
    return build_projectors(
        anchor_set, spaces, support_rows=train_rows[support], statistics_rows=train_rows
    )


def evaluate(
    run_dir: str | os.PathLike,
    *,
    head_epochs: int = DEFAULT_HEAD_EPOCHS,
    param_args: ParamTrainingArguments | None = None,
    show_progress: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Zero-shot retrieval (every ordered pair) and classification (a head per source encoder
    evaluated on every encoder), the saved projectors against Random-Cos (and, for PARAM, the
    shared linear closed form); report, tables and figures.

    Beside a PARAM anchor set it puts the shared linear closed form; beside any other, PARAM-WIP
    trained with ``param_args`` (the paper's method, as ``fit(method="param")`` would train it)
    when they are given, so the main job shows the winner, the paper's method and Random-Cos.
    ``show_progress``: the classifiers' progress bar (False: none; None: once it has taken a few
    seconds); ``progress``: called with a line before each of the step's longer parts."""
    say = progress or (lambda line: None)
    run_dir = Path(run_dir)
    run = read_run(run_dir, fitted=True)
    names = [e["name"] for e in run["encoders"]]
    held_out = run.get("held_out", [])
    train_rows, test_rows = torch.tensor(run["train_rows"]), torch.tensor(run["test_rows"])
    spaces = run_embeddings(run_dir, run)
    anchor_set = AnchorSet.from_pretrained(run_dir / "anchor_set")
    training = [n for n in names if n not in held_out]
    saved, methods = compared_methods(
        run_dir, run, anchor_set, spaces, training, train_rows, param_args
    )
    labels, id2label = run_labels(run)
    stitching = run_stitching(run, spaces, labels, id2label, head_epochs)
    test = {
        m.name: {n: stitching.features(m, n, source=n, target=n)[1] for n in names} for m in methods
    }
    retrieval = {method: retrieval_matrix(relatives) for method, relatives in test.items()}
    classification = []
    if labels is not None:
        classification = stitching.classification(methods, show_progress=show_progress)
        save_heads(run_dir, run, stitching, saved, anchor_set)
        write_heads_metrics(run_dir, run, classification, saved.name)  # where they were evaluated
    swappable = []
    if labels is not None and len(training) >= 2:  # the run's published head
        say("The swappable head: the directions it reads, chosen by leave-one-encoder-out")
        swappable = publish_swappable_head(run_dir, run, stitching, saved, training, anchor_set)
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
        "swappable_head": swappable,
    }
    pairs = language_pair_rows(
        report,
        spaces,
        train_rows,
        test_rows,
        labels,
        stitching.absolute_head if labels is not None else None,
    )
    if pairs:  # encoders on different languages of a parallel dataset
        report["language_pairs"] = pairs
    say("The report and its figures")
    write_report(run_dir, report, test, None if labels is None else labels[test_rows], id2label)
    anchor_set.metrics["zero_shot_retrieval"] = retrieval[saved.name]
    anchor_set.metrics["zero_shot_classification"] = classification
    anchor_set.metrics["evaluated_on"] = {
        "dataset": run["dataset"]["id"],
        "rows": len(test_rows),
        "held_out": held_out,
    }
    anchor_set.save_pretrained(run_dir / "anchor_set")
    return report


def compared_methods(
    run_dir: Path,
    run: dict[str, Any],
    anchor_set: AnchorSet,
    spaces: dict[str, Tensor],
    training: Sequence[str],
    train_rows: Tensor,
    param_args: ParamTrainingArguments | None,
) -> tuple[Method, list[Method]]:
    """The run's saved projectors, and every method evaluated beside them: Random-Cos first,
    then the paper's method and the others in `ANCHOR_METHODS` order."""
    random_set = AnchorSet.random(
        anchor_set.support, anchor_set.num_anchors, seed=run.get("fit", {}).get("seed", 0)
    )
    own = ANCHOR_METHODS.get(anchor_set.strategy)
    saved = Method(
        own.label if own else anchor_set.strategy,
        {
            e["name"]: RelativeProjector.from_pretrained(run_dir / "projectors" / e["name"])
            for e in run["encoders"]
        },
    )
    methods = [saved]
    other = ANCHOR_METHODS[own.compared_with] if own else None
    if other is not None and other.name == "param":  # PARAM trains for minutes: when asked
        # in a temporary folder: no checkpoints (one per epoch: 95 writes, 16 s of the profiled
        # main job), the same anchors (they come from the weights in memory)
        other_args = None if param_args is None else replace(param_args, save_strategy="no")
    elif other is not None:  # as the quality benchmark fits it, with this set's m and eps
        other_args = other.arguments(
            "unused", num_anchors=anchor_set.num_anchors, eps=anchor_set.eps
        )
    if other is not None and other_args is not None:
        projectors = method_projectors(other, other_args, spaces, training, train_rows)
        methods.append(Method(other.label, projectors))
    order = [m.label for m in ANCHOR_METHODS.values()]  # the paper's method first
    methods.sort(key=lambda m: order.index(m.name) if m.name in order else len(order))
    methods.insert(0, Method("Random-Cos", random_set, "cosine"))
    return saved, methods


def run_stitching(
    run: dict[str, Any],
    spaces: dict[str, Tensor],
    labels: Tensor | None,
    id2label: dict[int, str] | None,
    head_epochs: int,
) -> ZeroShotStitching:
    """The zero-shot protocol over the run's split: heads fit on the training rows, every score
    on the test rows, the support rows indexing the whole run."""
    train_rows, test_rows = torch.tensor(run["train_rows"]), torch.tensor(run["test_rows"])
    data = {
        name: EncoderData(
            space[train_rows],
            None if labels is None else labels[train_rows],
            space[test_rows],
            None if labels is None else labels[test_rows],
            parallel=space,  # the support rows index the whole run
        )
        for name, space in spaces.items()
    }
    return ZeroShotStitching(
        data,
        support=torch.tensor(run["support_rows"]),
        head_epochs=head_epochs,
        num_labels=len(id2label) if id2label else None,
        head_config={"id2label": id2label} if id2label else None,
    )


def save_heads(
    run_dir: Path,
    run: dict[str, Any],
    stitching: ZeroShotStitching,
    saved: Method,
    anchor_set: AnchorSet,
) -> None:
    """Each encoder's head on the saved projectors' features, under ``heads/<encoder>``."""
    for encoder in run["encoders"]:
        head = stitching.head(saved, encoder["name"], encoder["name"])
        head.config.anchor_set_id = anchor_set.repo_id
        head.config.source_encoder_id = encoder["encoder_id"]
        head.save_pretrained(run_dir / "heads" / encoder["name"])
