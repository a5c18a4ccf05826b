"""A local path that does not exist gets "the folder does not exist", not a Hub id error.

Loaders accept a local folder or a Hub repo id. When the folder is missing, huggingface_hub
would answer "Repo id must be in the form 'repo_name' or 'namespace/repo_name'" for a path
such as ``runs/2026/anchors``: `check_local_path` says what is really wrong first.
"""

from __future__ import annotations

import os
from pathlib import Path

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id


def check_local_path(path_or_repo_id: object) -> None:
    """Raise a clear error when ``path_or_repo_id`` can only mean a local folder and there is no
    folder there; do nothing for an existing folder, a valid Hub repo id or a loaded object.

    Raises:
        NotADirectoryError: it names a file.
        FileNotFoundError: it names no folder and cannot be a Hub repo id.
    """
    if not isinstance(path_or_repo_id, (str, os.PathLike)):
        return
    text = os.fspath(path_or_repo_id)
    local = Path(text)
    if local.is_dir():
        return
    if local.exists():
        raise NotADirectoryError(
            f"{text!r} is a file, not a folder: pass the folder that holds the artifact "
            "(config.json and model.safetensors, or anchor_set.json)."
        )
    try:
        validate_repo_id(text)
        is_repo_id = not isinstance(path_or_repo_id, os.PathLike) and not text.startswith(".")
    except HFValidationError:
        is_repo_id = False
    if not is_repo_id:
        raise FileNotFoundError(
            f"The folder {text!r} does not exist (and it is not a Hub repo id of the form "
            "'name' or 'namespace/name'). Check the path: it is resolved from the current "
            f"directory {os.getcwd()!r}."
        )
