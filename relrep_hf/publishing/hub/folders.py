"""Pushing saved folders: one artifact to its repo, or a run folder to one repo per artifact.

A run folder (written by training: ``anchor_set/``, ``projectors/<name>/``, ``heads/<name>/``)
goes to one repo per artifact: the anchor set to ``<repo_id>``, projector ``<name>`` to
``<repo_id>-projector-<name>``, head ``<name>`` to ``<repo_id>-head-<name>``; projectors and heads
that record no anchor set (or a local one) are rewired to the pushed anchor set's id and commit.
Everything is validated before the first push, and the local folder is never modified (files
are copied to a temporary folder first).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from huggingface_hub import HfApi

from relrep_hf.publishing.hub.push import copy_artifact, push_folder, validate_artifact
from relrep_hf.publishing.provenance import record_anchor_set
from relrep_hf.utils.hub_files import (
    HubError,
    artifact_kind,
    check_repo_id,
    describe_kind,
    hub_errors,
)

__all__ = ["push_artifact", "push_run"]


def push_artifact(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | bool | None = None,
    revision: str | None = None,
) -> str:
    """Push a folder written by training; returns the commit sha of ``repo_id``.

    ``folder`` is an anchor set, a projector or a head folder (pushed to ``repo_id``), or a run
    folder with ``anchor_set/``, ``projectors/<name>/`` and ``heads/<name>/`` (the anchor set
    goes to ``repo_id``, the others to their own repos: see `push_run`, which returns them all).
    Only the artifact's own files are pushed (not checkpoints or logs), from a temporary copy:
    the local folder is never modified.

    Raises:
        FileNotFoundError: ``folder`` is not an artifact or run folder, or lacks files (named).
        ValueError: an artifact in it is corrupted, or the run's parts do not belong together.
        HubError: the Hub refused or could not be reached.
    """
    folder = Path(folder)
    kind = artifact_kind(folder)
    if kind == "run":
        return push_run(folder, repo_id, private=private, token=token, revision=revision)[0][1]
    validate_artifact(folder, kind)
    return push_folder(
        lambda tmp: copy_artifact(folder, tmp, kind),
        repo_id,
        private=private,
        token=token,
        revision=revision,
        commit_message=f"Upload {kind.replace('_', ' ')} with relrep_hf",
    )


def push_run(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | bool | None = None,
    revision: str | None = None,
) -> list[tuple[str, str]]:
    """Push a run folder, one repo per artifact; returns ``[(repo_id, commit sha), ...]``.

    The anchor set (``anchor_set/``, required) goes first, to ``repo_id``; then each
    ``projectors/<name>/`` to ``<repo_id>-projector-<name>`` and each ``heads/<name>/`` to
    ``<repo_id>-head-<name>``. Projectors and heads that record no anchor set, or a local one,
    are recorded with the pushed anchor set's repo id and commit. All parts are validated first.
    """
    check_repo_id(repo_id)
    folder = Path(folder)
    if artifact_kind(folder) != "run":
        raise FileNotFoundError(f"{str(folder)!r} is not a run folder (see push_artifact).")
    parts = _run_parts(folder, repo_id)  # validated before anything goes to the Hub
    canonical = _canonical(repo_id, token)
    parts = [(kind, path, canonical + target[len(repo_id) :]) for kind, path, target in parts]
    pushed: list[tuple[str, str]] = []
    anchor_set: tuple[str, str] | None = None  # (repo id, commit) once pushed
    for kind, source, target in parts:
        try:
            sha = push_folder(
                _copier(source, kind, anchor_set),
                target,
                private=private,
                token=token,
                revision=revision,
                commit_message=f"Upload {kind.replace('_', ' ')} with relrep_hf",
            )
        except HubError as error:
            done = ", ".join(repo for repo, _ in pushed) or "none"
            raise HubError(f"{error} (Repos already pushed from this run: {done}.)") from error
        pushed.append((target, sha))
        if kind == "anchor_set":
            anchor_set = (target, sha)
    return pushed


def _run_parts(folder: Path, repo_id: str) -> list[tuple[str, Path, str]]:
    """``(kind, folder, target repo)`` for each artifact of a run, validated and consistent."""
    if not (folder / "anchor_set").is_dir():
        raise FileNotFoundError(
            f"The run folder {str(folder)!r} has no anchor_set/: push its projectors and heads "
            "one by one (push_artifact on each folder) or add the anchor set."
        )
    parts = [("anchor_set", folder / "anchor_set", repo_id)]
    for kind, sub in (("projector", "projectors"), ("head", "heads")):
        if (folder / sub).is_dir():
            for child in sorted(p for p in (folder / sub).iterdir() if p.is_dir()):
                parts.append((kind, child, f"{repo_id}-{kind}-{child.name}"))
    loaded = []
    for kind, path, _ in parts:
        found = artifact_kind(path)
        if found != kind:
            raise FileNotFoundError(
                f"{str(path)!r} should hold {describe_kind(kind)} but holds {describe_kind(found)}."
            )
        loaded.append(validate_artifact(path, kind))
    num_anchors, fingerprint = loaded[0].num_anchors, loaded[0].fingerprint
    for (kind, path, _), artifact in zip(parts[1:], loaded[1:], strict=True):
        recorded = getattr(artifact.config, "anchor_set_fingerprint", "")
        if artifact.config.num_anchors != num_anchors or recorded not in ("", fingerprint):
            found = (
                f"anchor set {recorded[:12]}..., the run's is {fingerprint[:12]}..."
                if artifact.config.num_anchors == num_anchors
                else f"{artifact.config.num_anchors} anchors, the run's anchor set {num_anchors}"
            )
            raise ValueError(
                f"The {kind} in {str(path)!r} was built on another anchor set ({found}): "
                "pushed beside this one it would be stale. Fit the run again with --overwrite, "
                "remove it from the run folder, or push it on its own."
            )
    return parts


def _copier(source: Path, kind: str, anchor_set: tuple[str, str] | None) -> Callable[[Path], None]:
    """A ``save`` for `push_folder`: copy the artifact, and record the run's anchor set."""

    def save(folder: Path) -> None:
        copy_artifact(source, folder, kind)
        if anchor_set is not None:
            record_anchor_set(folder, kind, *anchor_set)

    return save


def _canonical(repo_id: str, token: str | bool | None) -> str:
    """``user/name`` for a bare ``name`` (the namespace create_repo used)."""
    if "/" in repo_id:
        return repo_id
    with hub_errors(repo_id, action="push to"):
        return f"{HfApi(token=token).whoami()['name']}/{repo_id}"
