"""The file that makes a folder a run, checked before anything heavy is imported: a mistyped
folder is refused at once, not after the pipeline's imports (datasets, torch, transformers:
seconds)."""

from __future__ import annotations

import os
from pathlib import Path

RUN_FILE = "run.json"


class RunError(ValueError):
    """A run folder is missing a step or holds something inconsistent."""


def check_run_folder(run_dir: str | os.PathLike) -> Path:
    """``run_dir / run.json``; a RunError if there is none."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise RunError(
            f"{run_dir} is not a run folder (no {RUN_FILE}): run 'relrep-hf embed' first."
        )
    return path
