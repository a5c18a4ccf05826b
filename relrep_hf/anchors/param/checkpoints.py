"""Checkpoints of `ParamTrainer`: written atomically beside the anchor set, resumed only with the
arguments that made them.

A checkpoint is accelerate's state (`Accelerator.save_state`: the mixture logits, the optimizer,
the RNGs) plus ``trainer_state.json`` (step, arguments, log history), in
``<output_dir>-checkpoints/checkpoint-<step>``: staged in a hidden folder, made durable, then
renamed into place, so a run killed mid-save leaves no half checkpoint to resume from.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from accelerate.utils import ProjectConfiguration

from relrep_hf.anchors.param.arguments import ParamTrainingArguments
from relrep_hf.utils.io import fsync_directory, make_durable

__all__ = [
    "STATE_NAME",
    "complete_checkpoints",
    "load_checkpoint",
    "project_configuration",
    "save_checkpoint",
]

logger = logging.getLogger(__name__)

STATE_NAME = "trainer_state.json"
# Arguments that do not change the result: a resumed run may change them.
RESUMABLE_CHANGES = {
    "output_dir",
    "num_train_epochs",
    "logging_steps",
    "save_strategy",
    "save_steps",
    "save_total_limit",
    "disable_tqdm",
    "report_to",
    "statistics_batch_size",
}


def project_configuration(args: ParamTrainingArguments) -> ProjectConfiguration:
    """accelerate's project folder of a run: the checkpoint folder beside the anchor set, where
    trackers (``report_to``) log too, so nothing of the run lands inside the artifact."""
    return ProjectConfiguration(project_dir=str(args.checkpoint_dir))


def save_checkpoint(
    accelerator: Accelerator,
    args: ParamTrainingArguments,
    step: int,
    log_history: list[dict[str, float]],
) -> None:
    """accelerate state + trainer state, renamed into place only when complete; then the
    oldest checkpoints beyond ``save_total_limit`` are removed."""
    output = args.checkpoint_dir
    staging = output / f".checkpoint-{step}.tmp"
    final = output / f"checkpoint-{step}"
    if accelerator.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(staging))
    if accelerator.is_main_process:
        state = {"global_step": step, "args": args.to_dict(), "log_history": log_history}
        (staging / STATE_NAME).write_text(json.dumps(state, indent=2))
        make_durable(staging)  # every file, then the folder, before it is renamed
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
        fsync_directory(output)
        if args.save_total_limit is not None:
            for old in complete_checkpoints(output)[: -args.save_total_limit]:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def load_checkpoint(
    accelerator: Accelerator, args: ParamTrainingArguments, resume_from_checkpoint: bool | str
) -> tuple[int, list[dict[str, float]]]:
    """Load a checkpoint (``True``: the latest complete one) into ``accelerator``; returns its
    step and log history. Refuses one written with arguments that change the result."""
    if resume_from_checkpoint is True:
        found = complete_checkpoints(args.checkpoint_dir)
        if not found:
            raise ValueError(
                f"resume_from_checkpoint=True but {str(args.checkpoint_dir)!r} holds no "
                "complete checkpoint-* folder. Start without resuming."
            )
        checkpoint = found[-1]
    else:
        checkpoint = Path(resume_from_checkpoint)
    state_file = checkpoint / STATE_NAME
    if not state_file.is_file():
        raise ValueError(f"{str(checkpoint)!r} is not a complete checkpoint (no {STATE_NAME}).")
    state = json.loads(state_file.read_text())
    _check_same_arguments(args, state["args"], checkpoint)
    accelerator.load_state(str(checkpoint))
    logger.info("Resumed from %s at step %d", checkpoint, state["global_step"])
    return int(state["global_step"]), state["log_history"]


def _check_same_arguments(
    args: ParamTrainingArguments, saved_args: dict[str, Any], checkpoint: Path
) -> None:
    current = args.to_dict()
    defaults = {  # fields added since the checkpoint was written keep their default
        f.name: f.default for f in dataclasses.fields(args) if f.default is not dataclasses.MISSING
    }
    saved = {**{k: v for k, v in defaults.items() if k in current}, **saved_args}
    changed = sorted(
        key
        for key in set(saved) | set(current)
        if key not in RESUMABLE_CHANGES and saved.get(key) != current.get(key)
    )
    if changed:
        details = ", ".join(f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in changed)
        raise ValueError(
            f"Cannot resume from {str(checkpoint)!r}: arguments that change the result differ "
            f"({details}). Resume with the original arguments, or start a new run."
        )


def complete_checkpoints(folder: Path) -> list[Path]:
    """Complete checkpoints under ``folder``, oldest first."""
    found = [
        p
        for p in folder.glob("checkpoint-*")
        if re.fullmatch(r"checkpoint-\d+", p.name) and (p / STATE_NAME).is_file()
    ]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))
