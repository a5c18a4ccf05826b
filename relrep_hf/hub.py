"""Folders on the Hub: resolve a repo id or local path to files, and push a folder.

Shared by every artifact that is not a plain `PreTrainedModel` (the anchor set) and by
the command line; the projector and heads use transformers' own Hub machinery.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError


def resolve_folder(
    path_or_repo_id: str | os.PathLike,
    *,
    revision: str | None = None,
    token: str | bool | None = None,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool = False,
) -> tuple[Path, str | None]:
    """A local folder holding the artifact, and the commit it was resolved to (None if local)."""
    local = Path(path_or_repo_id)
    if local.is_dir():
        return local, None
    try:
        folder = snapshot_download(
            str(path_or_repo_id),
            revision=revision,
            token=token,
            cache_dir=cache_dir,
            local_files_only=local_files_only,
        )
    except LocalEntryNotFoundError as error:
        raise OSError(
            f"{str(path_or_repo_id)!r} is neither a local folder nor in the Hugging Face cache, and "
            "the Hub could not be reached (or HF_HUB_OFFLINE is set). Check the path, or connect "
            "and try again."
        ) from error
    return Path(folder), Path(folder).name  # snapshot folders are named by commit


def push_folder(
    save: Callable[[Path], None],
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | bool | None = None,
    revision: str | None = None,
    commit_message: str = "Upload with relrep_hf",
    create_pr: bool = False,
) -> str:
    """Write an artifact with ``save(folder)`` into a temporary folder and push it as one commit.

    Returns the commit sha. Nothing local is touched: the folder is temporary.
    """
    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    if revision is not None:
        api.create_branch(repo_id, branch=revision, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="relrep-hf-push-") as folder:
        save(Path(folder))
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            revision=revision,
            commit_message=commit_message,
            create_pr=create_pr,
        )
    return commit.oid


__all__ = ["HfHubHTTPError", "push_folder", "resolve_folder"]
