"""Pushing one artifact to the Hub: one commit with its files, card, remote code and provenance.

Every push goes through `push_folder`: the artifact is saved into a temporary folder, made
portable (`relrep_hf.publishing.provenance`), given its model card (`relrep_hf.publishing.cards`) and, for a projector,
the code that loads it with transformers alone (`relrep_hf.models.remote_code`), and committed with
``HfApi.create_commit`` on top of the branch head it read (a push that another one overtook
fails instead of mixing), deleting the artifact files the new version lacks (saved folders:
`relrep_hf.publishing.hub.folders`). Failures of
huggingface_hub become `HubError` naming the repo and what to do (`relrep_hf.utils.hub_files`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.models.remote_code import write_remote_code
from relrep_hf.publishing.cards import write_folder_card
from relrep_hf.publishing.provenance import make_portable
from relrep_hf.utils.hub_files import (
    ARTIFACT_FILES,
    check_repo_id,
    detect_artifact_kind,
    hub_errors,
)
from relrep_hf.utils.manifest import write_manifest

__all__ = ["copy_artifact", "prepare_upload", "push_folder", "validate_artifact"]


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

    Before the upload, the folder gets portable provenance, the model card (``README.md``,
    unless ``save`` wrote one without relrep_hf's marker) and, for a projector, its remote
    code (see the module docstring). ``revision`` is a branch, created from ``main`` if
    missing. Returns the commit sha. Nothing local is touched: the folder is temporary.

    Raises:
        HubError: the Hub refused or could not be reached; nothing was committed (for a
            dropped connection: the commit was not confirmed, and the message says so).
    """
    check_repo_id(repo_id)
    api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="relrep-hf-push-") as tmp:
        folder = Path(tmp)
        save(folder)
        with hub_errors(repo_id, action="push to", revision=revision):
            repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
            if revision is not None and not revision.startswith("refs/pr/"):
                api.create_branch(repo_id, branch=revision, exist_ok=True)
            parent, stale = _branch_state(api, repo_id, revision, folder)
        prepare_upload(folder, repo_id=repo_id, token=token)  # its manifest too
        operations: list[CommitOperationAdd | CommitOperationDelete] = [
            CommitOperationAdd(
                path_in_repo=path.relative_to(folder).as_posix(), path_or_fileobj=path
            )
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        ]
        pushed = {operation.path_in_repo for operation in operations}
        operations += [
            CommitOperationDelete(path_in_repo=name) for name in stale if name not in pushed
        ]
        with hub_errors(repo_id, action="push to", revision=revision, committing=True):
            commit = api.create_commit(
                repo_id,
                operations,
                commit_message=commit_message,
                revision=revision,
                create_pr=create_pr,
                parent_commit=None if create_pr else parent,
            )
    return commit.oid


def _branch_state(
    api: HfApi, repo_id: str, revision: str | None, folder: Path
) -> tuple[str | None, list[str]]:
    """The commit the push will build on, and the artifact files there that the new save lacks.

    The commit becomes the push's ``parent_commit``: a push that another process overtook fails
    instead of silently mixing or replacing (see docs/bad_inputs.md). Deleting the stale
    artifact files (a previous head's ``metrics.json``) makes the repo hold exactly the files
    of the artifact pushed; files that no relrep_hf artifact writes are left alone.
    """
    owned = {name for groups in ARTIFACT_FILES.values() for group in groups for name in group}
    try:
        info = api.model_info(repo_id, revision=revision or "main", files_metadata=False)
    except (RevisionNotFoundError, RepositoryNotFoundError):
        return None, []
    files = [sibling.rfilename for sibling in info.siblings or []]
    stale = [name for name in files if name in owned and not (folder / name).is_file()]
    return info.sha, stale


def prepare_upload(folder: Path, *, repo_id: str, token: str | bool | None = None) -> None:
    """Make a saved artifact ``folder`` (a temporary copy) ready for the Hub, in place.

    Portable provenance in its config, the remote code of a projector, the model card and the
    manifest. A folder that holds no relrep_hf artifact is left as it is.
    """
    kind = detect_artifact_kind(folder)
    if kind is None or kind == "run":
        return
    make_portable(folder, token=token)
    if kind == "projector":
        write_remote_code(folder)
    write_folder_card(folder, repo_id=repo_id)
    write_manifest(folder)


def validate_artifact(folder: Path, kind: str) -> Any:
    """Load the artifact in ``folder`` (a full check of its files); errors name the folder."""
    loader = {
        "anchor_set": AnchorSet.from_pretrained,
        "projector": RelativeProjector.from_pretrained,
        "head": RelativeHeadForClassification.from_pretrained,
    }[kind]
    try:
        return loader(str(folder))
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise ValueError(
            f"The {kind.replace('_', ' ')} in {str(folder)!r} cannot be loaded ({error}); "
            "nothing was pushed. Save it again."
        ) from error


def copy_artifact(source: Path, target: Path, kind: str) -> None:
    """Copy the artifact's own files (required and optional ones that exist)."""
    required, optional = ARTIFACT_FILES[kind]
    for name in (*required, *optional):
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
