"""Artifacts on the Hub: resolve a repo id or local path to files, push folders, keep provenance.

Shared by every artifact (anchor sets, projectors, heads) and by the command line. Every push
goes through `push_folder`, which makes it one commit that carries the artifact's files, its
model card (``README.md``, see `relrep_hf.cards`), for projectors the code that loads them with
transformers alone (see `relrep_hf.remote_code`), and portable provenance:

* **Portable provenance.** Configs name the encoder and the anchor set they belong to by Hub id
  and commit, never by a local path. At push time `portable_provenance` rewrites every recorded
  id: a Hub id gets the commit it resolves to (``HfApi().model_info(id).sha``, skipped without
  failing when the Hub cannot be reached); a Hub cache snapshot path becomes its repo id and
  commit; any other local path becomes ``"local:<folder name>"`` with an empty revision, with a
  `UserWarning` saying to push it to the Hub. The ``local:`` prefix cannot occur in a Hub id, so
  readers can tell such a record from an id (`is_local_record`).
* **Run folders.** `push_artifact` pushes a folder written by training: one artifact, or a run
  folder with ``anchor_set/``, ``projectors/<name>/`` and ``heads/<name>/``. A run goes to one
  repo per artifact: the anchor set to ``<repo_id>``, projector ``<name>`` to
  ``<repo_id>-projector-<name>``, head ``<name>`` to ``<repo_id>-head-<name>``; projectors and
  heads that record no anchor set (or a local one) are rewired to the pushed anchor set's id and
  commit. Everything is validated before the first push, and the local folder is never modified
  (files are copied to a temporary folder first).
* **Errors.** Failures of huggingface_hub (unreachable endpoint, 401/403, missing repo or
  revision, an interrupted upload) become `HubError` (an `OSError`) naming the repo and what to
  do, with the original error chained.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    constants,
    snapshot_download,
)
from huggingface_hub.errors import (
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from relrep_hf.local_paths import check_local_path

try:  # the HTTP client of huggingface_hub 2.x, then 1.x
    from httpx2 import ConnectError, TimeoutException, TransportError
except ImportError:  # pragma: no cover - depends on the installed huggingface_hub
    from httpx import ConnectError, TimeoutException, TransportError

__all__ = [
    "LOCAL_PREFIX",
    "HfHubHTTPError",
    "HubError",
    "artifact_kind",
    "check_local_path",
    "is_local_record",
    "portable_provenance",
    "push_artifact",
    "push_folder",
    "push_run",
    "resolve_folder",
]

ArtifactKind = Literal["anchor_set", "projector", "head", "run"]

LOCAL_PREFIX = "local:"
"""Prefix of a provenance record that names a local folder (``"local:<folder name>"``)."""

# The files of each artifact that are pushed (anything else in a training folder, such as
# checkpoints, stays local). The first group is required.
ARTIFACT_FILES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "anchor_set": (
        ("anchor_set.json", "anchor_set.safetensors", "support.jsonl"),
        ("README.md", "stitching_heatmap.png", "manifest.json"),
    ),
    "projector": (
        ("config.json", "model.safetensors"),
        (
            "README.md",
            "configuration_relative_projector.py",
            "modeling_relative_projector.py",
            "manifest.json",
        ),
    ),
    "head": (("config.json", "model.safetensors"), ("README.md", "metrics.json", "manifest.json")),
}
_ARTICLE = {"anchor_set": "an anchor set", "projector": "a projector", "head": "a head"}
_MODEL_TYPES = {"relative_projector": "projector", "relative_head": "head"}
# (id field, revision field, what it names) recorded in each kind of config
_PROVENANCE_FIELDS = {
    "projector": [
        ("encoder_id", "encoder_revision", "encoder"),
        ("anchor_set_id", "anchor_set_revision", "anchor set"),
    ],
    "head": [
        ("source_encoder_id", "source_encoder_revision", "source encoder"),
        ("anchor_set_id", "anchor_set_revision", "anchor set"),
    ],
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SNAPSHOT = re.compile(r"models--(?P<repo>[^/]+)/snapshots/(?P<commit>[0-9a-f]{40})(/|$)")


class HubError(OSError):
    """A Hub operation failed; the message names the repo and what to do."""


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def resolve_folder(
    path_or_repo_id: str | os.PathLike,
    *,
    revision: str | None = None,
    token: str | bool | None = None,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool = False,
    force_download: bool = False,
) -> tuple[Path, str | None]:
    """A local folder holding the artifact, and the commit it was resolved to (None if local).

    Raises:
        FileNotFoundError: ``path_or_repo_id`` names a local path that does not exist (or is
            a file) and cannot be a Hub repo id.
    """
    local = Path(path_or_repo_id)
    if local.is_dir():
        return local, None
    check_local_path(path_or_repo_id)
    repo_id = str(path_or_repo_id)
    try:
        with hub_errors(repo_id, action="download", revision=revision):
            folder = snapshot_download(
                repo_id,
                revision=revision,
                token=token,
                cache_dir=cache_dir,
                local_files_only=local_files_only,
                force_download=force_download,
            )
    except LocalEntryNotFoundError as error:
        at = "" if revision is None else f" at revision {revision!r}"
        raise HubError(
            f"{repo_id!r} is neither a local folder nor in the Hugging Face cache{at}, and the "
            "Hub could not be reached (or HF_HUB_OFFLINE is set). Check the path, or connect "
            "and try again."
        ) from error
    return Path(folder), Path(folder).name  # snapshot folders are named by commit


# ---------------------------------------------------------------------------------------------
# Pushing
# ---------------------------------------------------------------------------------------------


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

    Portable provenance in its config, the remote code of a projector, and the model card.
    A folder that holds no relrep_hf artifact is left as it is.
    """
    from relrep_hf.cards import write_folder_card
    from relrep_hf.manifest import write_manifest
    from relrep_hf.remote_code import write_remote_code

    kind = _detect_kind(folder)
    if kind is None or kind == "run":
        return
    if kind == "anchor_set":
        path = folder / "anchor_set.json"
        description = json.loads(path.read_text(encoding="utf-8"))
        for encoder in description.get("encoders", []):
            if isinstance(encoder, dict) and encoder.get("id"):
                encoder["id"], encoder["revision"] = portable_provenance(
                    encoder["id"], encoder.get("revision") or "", what="encoder", token=token
                )
        path.write_text(json.dumps(description, indent=2, sort_keys=True) + "\n")
    else:
        config = _read_config(folder)
        records = {
            id_field: portable_provenance(
                config.get(id_field) or "", config.get(revision_field) or "", what=what, token=token
            )
            for id_field, revision_field, what in _PROVENANCE_FIELDS[kind]
        }
        _rewrite_config(folder, records, kind)
        if kind == "projector":
            write_remote_code(folder)
    write_manifest(folder)  # the card is made from the files just rewritten, checked by digest
    write_folder_card(folder, repo_id=repo_id)
    write_manifest(folder)


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
    _validate_artifact(folder, kind)
    return push_folder(
        lambda tmp: _copy_artifact(folder, tmp, kind),
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


# ---------------------------------------------------------------------------------------------
# Provenance
# ---------------------------------------------------------------------------------------------


def is_local_record(value: str) -> bool:
    """Whether a recorded id names a local folder (``"local:<name>"``) rather than a Hub repo."""
    return value.startswith(LOCAL_PREFIX)


def portable_provenance(
    id_or_path: str | os.PathLike,
    revision: str = "",
    *,
    what: str = "encoder",
    token: str | bool | None = None,
    resolve_revision: bool = True,
) -> tuple[str, str]:
    """The ``(id, revision)`` to record for an encoder or anchor set, never a local path.

    * ``""`` stays ``("", revision)`` (unknown).
    * A Hub cache snapshot path (``.../models--org--name/snapshots/<sha>``) gives
      ``("org/name", sha)``.
    * Another local path (an existing folder, or anything that is not a Hub id) gives
      ``("local:<folder name>", "")`` and a `UserWarning`; a ``local:`` record is kept, with the
      warning again.
    * A Hub id keeps its commit if ``revision`` is one; otherwise, with ``resolve_revision``,
      ``revision`` (a branch or tag, or ``""`` for the default branch) is resolved to its commit
      with ``HfApi().model_info``. If that fails (offline, not found), the revision is kept as
      given and a `UserWarning` says why.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     portable_provenance("/data/models/my-bert", "main")
        ('local:my-bert', '')
    """
    value = os.fspath(id_or_path).strip()
    revision = revision or ""
    if not value:
        return "", revision
    snapshot = _SNAPSHOT.search(Path(value).as_posix())
    if snapshot and not is_local_record(value):
        return snapshot["repo"].replace("--", "/"), snapshot["commit"]
    if is_local_record(value) or os.path.exists(value) or not _HUB_ID.match(value):
        name = value[len(LOCAL_PREFIX) :] if is_local_record(value) else _folder_name(value)
        record = f"{LOCAL_PREFIX}{name}"
        warnings.warn(
            f"The {what} {value!r} is a local path; recorded as {record!r} — push the {what} to "
            f"the Hub and record its id.",
            UserWarning,
            stacklevel=2,
        )
        return record, ""
    if _COMMIT.match(revision) or not resolve_revision:
        return value, revision
    try:
        if constants.HF_HUB_OFFLINE:
            raise OfflineModeIsEnabled("HF_HUB_OFFLINE is set")
        sha = HfApi(token=token).model_info(value, revision=revision or None).sha
    except (HfHubHTTPError, OfflineModeIsEnabled, TransportError, OSError) as error:
        warnings.warn(
            f"Could not resolve the commit of the {what} {value!r}"
            f"{f' at {revision!r}' if revision else ''} on the Hub ({type(error).__name__}: "
            f"{_first_line(error)}); recorded revision {revision or '(none)'!r}. Check the id.",
            UserWarning,
            stacklevel=2,
        )
        return value, revision
    return value, sha or revision


# ---------------------------------------------------------------------------------------------
# Folders
# ---------------------------------------------------------------------------------------------


def artifact_kind(folder: str | os.PathLike) -> ArtifactKind:
    """What ``folder`` holds: ``"anchor_set"``, ``"projector"``, ``"head"`` or ``"run"``.

    Raises:
        FileNotFoundError: it is none of those, or lacks required files (named in the message).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{str(folder)!r} is not a folder.")
    kind = _detect_kind(folder)
    if kind is None:
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
        raise FileNotFoundError(
            f"{str(folder)!r} holds no relrep_hf artifact. Expected an anchor set "
            "(anchor_set.json, anchor_set.safetensors, support.jsonl), a projector or head "
            "(config.json with model_type 'relative_projector' or 'relative_head', "
            "model.safetensors), or a run folder (anchor_set/, projectors/<name>/, "
            f"heads/<name>/); found {entries or 'nothing'}."
        )
    if kind != "run":
        required, _ = ARTIFACT_FILES[kind]
        missing = [name for name in required if not (folder / name).is_file()]
        if missing:
            raise FileNotFoundError(
                f"{str(folder)!r} looks like {_ARTICLE[kind]} but lacks "
                f"{', '.join(missing)}. Save it again (save_pretrained) before pushing."
            )
    return kind


def _detect_kind(folder: Path) -> ArtifactKind | None:
    if (folder / "anchor_set.json").is_file() or (folder / "anchor_set.safetensors").is_file():
        return "anchor_set"
    if (folder / "config.json").is_file():
        try:
            model_type = _read_config(folder).get("model_type")
        except (OSError, ValueError):
            return None
        return _MODEL_TYPES.get(model_type)  # type: ignore[return-value]
    if any((folder / name).is_dir() for name in ("anchor_set", "projectors", "heads")):
        return "run"
    return None


def _validate_artifact(folder: Path, kind: str) -> Any:
    """Load the artifact in ``folder`` (a full check of its files); errors name the folder."""
    from relrep_hf.anchor_set import AnchorSet
    from relrep_hf.modeling_relative_head import RelativeHeadForClassification
    from relrep_hf.modeling_relative_projector import RelativeProjector

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
                f"{str(path)!r} should hold {_ARTICLE[kind]} but holds {_ARTICLE.get(found, found)}."
            )
        loaded.append(_validate_artifact(path, kind))
    num_anchors = loaded[0].num_anchors
    for (kind, path, _), artifact in zip(parts[1:], loaded[1:], strict=True):
        if artifact.config.num_anchors != num_anchors:
            raise ValueError(
                f"The {kind} in {str(path)!r} has {artifact.config.num_anchors} anchors but the "
                f"run's anchor set has {num_anchors}: it belongs to another anchor set. Remove it "
                "from the run folder or push it on its own."
            )
    return parts


def _copy_artifact(source: Path, target: Path, kind: str) -> None:
    """Copy the artifact's own files (required and optional ones that exist)."""
    required, optional = ARTIFACT_FILES[kind]
    for name in (*required, *optional):
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)


def _copier(source: Path, kind: str, anchor_set: tuple[str, str] | None) -> Callable[[Path], None]:
    """A ``save`` for `push_folder`: copy the artifact, and record the run's anchor set."""

    def save(folder: Path) -> None:
        _copy_artifact(source, folder, kind)
        if anchor_set is not None:
            _record_anchor_set(folder, kind, *anchor_set)

    return save


def _record_anchor_set(folder: Path, kind: str, repo_id: str, sha: str) -> None:
    """Record the run's pushed anchor set in a projector or head config, unless it names a
    Hub anchor set already."""
    config = _read_config(folder)
    recorded = config.get("anchor_set_id") or ""
    if recorded and not is_local_record(recorded) and not os.path.exists(recorded):
        if recorded != repo_id:
            warnings.warn(
                f"The {kind} in this run records anchor set {recorded!r}, not the run's "
                f"{repo_id!r}; its record is kept.",
                UserWarning,
                stacklevel=3,
            )
        return
    _rewrite_config(folder, {"anchor_set_id": (repo_id, sha)}, kind)


def _rewrite_config(folder: Path, records: dict[str, tuple[str, str]], kind: str) -> None:
    """Set ``id_field -> (id, revision)`` pairs in ``config.json`` (transformers' format)."""
    revision_fields = {id_field: rev for id_field, rev, _ in _PROVENANCE_FIELDS[kind]}
    config = _read_config(folder)
    for id_field, (value, revision) in records.items():
        config[id_field] = value
        config[revision_fields[id_field]] = revision
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _read_config(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def _canonical(repo_id: str, token: str | bool | None) -> str:
    """``user/name`` for a bare ``name`` (the namespace create_repo used)."""
    if "/" in repo_id:
        return repo_id
    with hub_errors(repo_id, action="push to"):
        return f"{HfApi(token=token).whoami()['name']}/{repo_id}"


def _folder_name(path: str) -> str:
    name = Path(path.rstrip("/\\")).name or "folder"
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def hub_errors(
    repo_id: str, *, action: str, revision: str | None = None, committing: bool = False
) -> Iterator[None]:
    """Turn huggingface_hub's failures into `HubError` naming ``repo_id`` and what to do.

    ``action`` reads in a sentence ("push to", "download"); ``committing`` marks the upload
    itself, whose failure means the commit was not (confirmed to be) recorded.
    """
    endpoint = constants.ENDPOINT
    where = f"{repo_id!r}{'' if revision is None else f' (revision {revision!r})'}"
    unchanged = " The local artifact is unchanged."
    try:
        yield
    except LocalEntryNotFoundError:
        raise  # the caller knows whether a cache was involved
    except OfflineModeIsEnabled as error:
        raise HubError(
            f"Cannot {action} {where}: HF_HUB_OFFLINE is set. Unset it to reach the Hub."
            + unchanged * (action != "download")
        ) from error
    except RevisionNotFoundError as error:
        raise HubError(
            f"{repo_id!r} has no revision {revision!r} on {endpoint} (a branch, tag or commit). "
            f"List them with HfApi().list_repo_refs({repo_id!r}), or omit revision for main."
        ) from error
    except RepositoryNotFoundError as error:
        raise HubError(
            f"The repo {repo_id!r} was not found on {endpoint}, or it is private and the token "
            "cannot see it. Check the repo id; for a private repo pass token=... or log in with "
            "`hf auth login`."
        ) from error
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status == 401:
            message = (
                f"The Hub at {endpoint} rejected the credentials (401 Unauthorized) trying to "
                f"{action} {where}. Log in with `hf auth login` or pass a valid token=..."
                f"{' with write access' if action != 'download' else ''}."
            )
        elif status == 403:
            namespace = repo_id.split("/")[0] if "/" in repo_id else "your namespace"
            message = (
                f"Not allowed to {action} {where} (403 Forbidden): the token cannot write to "
                f"{namespace!r}. Push to your own namespace or an organization you belong to, "
                "or use a token with write access to it."
            )
        elif committing and status == 412:
            message = (
                f"Another push changed {where} while this one was being prepared (412: the "
                "branch moved since it was read), so this commit was refused rather than mixed "
                "with or silently replacing that push. Check the repo's history "
                "(HfApi().list_repo_commits) and push again if this version should win."
            )
        elif committing:
            message = (
                f"The upload to {where} was interrupted: the Hub at {endpoint} answered {status}, "
                "so the commit was not recorded and the repo still points to its previous "
                "commit. Push again."
            )
        else:
            message = (
                f"The Hub at {endpoint} failed to {action} {where} ({status}: "
                f"{_first_line(error)}). Try again later."
            )
        raise HubError(message + unchanged * (action != "download")) from error
    except (ConnectError, TimeoutException) as error:
        raise HubError(
            f"Could not reach the Hub at {endpoint} to {action} {where} "
            f"({type(error).__name__}: {_first_line(error)}). Check the network connection and "
            "HF_ENDPOINT, then try again."
            + ("" if action == "download" else " Nothing was pushed." + unchanged)
        ) from error
    except TransportError as error:
        if committing:
            raise HubError(
                f"The upload to {where} was interrupted: the connection to {endpoint} dropped "
                f"({type(error).__name__}: {_first_line(error)}) before the Hub confirmed the "
                "commit. Check the repo's history (HfApi().list_repo_commits) and push again."
                + unchanged
            ) from error
        raise HubError(
            f"The connection to the Hub at {endpoint} failed while trying to {action} {where} "
            f"({type(error).__name__}: {_first_line(error)}). Try again."
        ) from error
