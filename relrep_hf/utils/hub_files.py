"""An artifact's files on the Hub, both ways: which files, where they are, what went wrong.

Like ``transformers.utils.hub``: `resolve_folder` turns a local folder or a Hub repo id into a
local folder and the commit it was resolved to (the one download path of every artifact);
`commit_folder` uploads a saved folder as one commit (the one upload path); `artifact_kind` tells
what a folder holds, read from the artifact types the artifacts declare and register
(`ArtifactType`, `register_artifact_type`: this layer names none of them); `hub_errors` turns huggingface_hub's failures into a `HubError` that names
the repo and what to do. The Hub-id and commit rules (`is_hub_id`, `is_commit_hash`,
`snapshot_record`) are defined here once, on huggingface_hub's own repo-id validation. What a
folder gets before it is pushed (portable provenance, the card, remote code) is the publishing
layer's (`relrep_hf.publishing.hub.prepare_upload`), passed in as ``prepare``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    constants,
    snapshot_download,
)
from huggingface_hub.errors import (
    HfHubHTTPError,
    HFValidationError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id

from relrep_hf.utils.deprecated_import import deprecated_attributes
from relrep_hf.utils.local_paths import check_local_path
from relrep_hf.utils.registry import Registry

try:  # the HTTP client of huggingface_hub 2.x, then 1.x
    from httpx2 import ConnectError, TimeoutException, TransportError
except ImportError:  # pragma: no cover - depends on the installed huggingface_hub
    from httpx import ConnectError, TimeoutException, TransportError

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ARTIFACT_FILES",
    "ARTIFACT_TYPES",
    "LOCAL_PREFIX",
    "ArtifactKind",
    "ArtifactType",
    "HubDownload",
    "HubError",
    "artifact_kind",
    "artifact_types",
    "commit_folder",
    "defer_artifact_types",
    "describe_kind",
    "detect_artifact_kind",
    "hub_errors",
    "is_commit_hash",
    "is_hub_id",
    "loaded_provenance",
    "register_artifact_type",
    "resolve_folder",
    "snapshot_record",
    "unregister_artifact_type",
]

ArtifactKind = str
"""A registered artifact type's name (`ARTIFACT_TYPES`: ``"projector"``...), or ``"run"``."""

LOCAL_PREFIX = "local:"
"""Prefix of a provenance record that names a local folder (``"local:<folder name>"``)."""


@dataclass(frozen=True)
class ArtifactType:
    """What one kind of artifact saves, declared in the artifacts' layer (the package's own in
    `relrep_hf.models.artifact_types`, each named by its class or config as ``artifact_type``)
    and registered with `register_artifact_type`.

    Attributes:
        name: the kind (``"projector"``), as the artifact class's ``artifact_kind``.
        article: how messages name one (``"a projector"``).
        loader: what loads it (``"RelativeProjector.from_pretrained"``), for messages.
        required: the files a saved folder must hold.
        optional: the other files of its own that are pushed (card, manifest, remote code);
            anything else in a folder (checkpoints) stays local.
        model_type: ``config.json``'s ``model_type`` for a transformers model (how a folder is
            told to hold one).
        markers: otherwise, files whose presence says that a folder holds this kind.
    """

    name: str
    article: str
    loader: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    model_type: str | None = None
    markers: tuple[str, ...] = ()


ARTIFACT_TYPES: Registry[ArtifactType] = Registry("artifact type")
_PENDING: list[Callable[[], Any]] = []


def register_artifact_type(artifact_type: ArtifactType) -> ArtifactType:
    """Add a kind of artifact: its files are then saved, checked, detected and pushed. A
    ValueError if its name (or its ``model_type``) is taken."""
    return artifact_types().register(artifact_type, model_type=artifact_type.model_type)


def unregister_artifact_type(name: str) -> ArtifactType:
    """Take the kind ``name`` out (a ValueError if it is not registered)."""
    return artifact_types().unregister(name)


def defer_artifact_types(register: Callable[[], Any]) -> None:
    """Run ``register()`` (which registers the package's artifact types) before the types are
    first read: the artifacts sit above this layer, and importing them loads torch."""
    _PENDING.append(register)


def artifact_types() -> Registry[ArtifactType]:
    """The registered artifact types (the deferred registrations run first)."""
    while _PENDING:
        _PENDING.pop(0)()
    return ARTIFACT_TYPES


def describe_kind(kind: str) -> str:
    """How messages name a kind of folder: ``"a projector"``, ``"a run folder"``."""
    return "a run folder" if kind == "run" else artifact_types().lookup(kind).article


class _ArtifactFiles(Mapping):
    """Kind -> ``(required, optional)`` files, read from the registered artifact types."""

    def __getitem__(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        types = artifact_types()
        if kind not in types:  # a KeyError, as a Mapping's (`in` reads it)
            raise KeyError(
                f"Unknown artifact type {kind!r}. Registered: {', '.join(map(repr, types))}."
            )
        return types[kind].required, types[kind].optional

    def __iter__(self) -> Iterator[str]:
        return iter(list(artifact_types()))

    def __len__(self) -> int:
        return len(artifact_types())


ARTIFACT_FILES: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = _ArtifactFiles()
"""The files of each artifact that are pushed (required, then optional), by kind."""
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# a folder or file in the Hub cache: .../models--org--name/snapshots/<commit>[/...]
_SNAPSHOT = re.compile(r"models--(?P<repo>[^/]+)/snapshots/(?P<commit>[0-9a-f]{40})(/|$)")


class HubError(OSError):
    """A Hub operation failed; the message names the repo and what to do."""


# ---------------------------------------------------------------------------------------------
# Ids and commits
# ---------------------------------------------------------------------------------------------


def is_hub_id(value: str) -> bool:
    """Whether ``value`` is a Hub repo id (``name`` or ``namespace/name``, huggingface_hub's
    rules), not a ``local:`` record or an existing local path."""
    if not value or value.startswith(LOCAL_PREFIX) or os.path.exists(value):
        return False
    try:
        validate_repo_id(value)
    except HFValidationError:
        return False
    return True


def check_repo_id(repo_id: Any) -> None:
    """Refuse a repo id the Hub would refuse (``name`` or ``namespace/name``: letters, digits,
    ``-``, ``_``, ``.``), before any request is made."""
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise ValueError(
            f"Invalid Hub repo id {repo_id!r}: {error} Use 'namespace/name' (e.g. "
            "'my-user/my-anchors') with letters, digits, '-', '_' and '.' only."
        ) from None


def is_commit_hash(revision: str | None) -> bool:
    """Whether ``revision`` is a full 40-character commit hash (rather than a branch or tag)."""
    return bool(_COMMIT.match(revision or ""))


def snapshot_record(path: str | os.PathLike) -> tuple[str, str] | None:
    """``(repo id, commit)`` of a folder or file in the Hub cache, ``None`` for any other path."""
    snapshot = _SNAPSHOT.search(Path(path).as_posix())
    if snapshot is None:
        return None
    return snapshot["repo"].replace("--", "/"), snapshot["commit"]


def loaded_provenance(name_or_path: str, commit_hash: str | None = None) -> tuple[str, str]:
    """The Hub id and commit of a model loaded from ``name_or_path`` (``config.name_or_path``),
    ``""`` when unknown; ``commit_hash`` is transformers' ``config._commit_hash``.

    A Hub cache snapshot path gives its id and commit; a local folder (or anything that is not a
    Hub id) gives ``("", "")``, so local paths are never recorded as base-model ids.
    """
    name = str(name_or_path or "")
    if not name:
        return "", ""
    record = snapshot_record(name)
    if record is not None:
        return record
    if not is_hub_id(name):
        return "", ""
    return name, commit_hash if is_commit_hash(commit_hash) else ""


# ---------------------------------------------------------------------------------------------
# Folders
# ---------------------------------------------------------------------------------------------


class HubDownload(TypedDict, total=False):
    """How a Hub repo is downloaded: `huggingface_hub.snapshot_download`'s keywords, which
    every ``from_pretrained`` of relrep_hf's artifacts takes."""

    revision: str | None
    token: str | bool | None
    cache_dir: str | os.PathLike | None
    local_files_only: bool
    force_download: bool


def resolve_folder(
    path_or_repo_id: str | os.PathLike, **download: Unpack[HubDownload]
) -> tuple[Path, str | None]:
    """A local folder holding the artifact, and the commit it was resolved to (None if local).

    Raises:
        TypeError: a keyword of ``download`` that `HubDownload` does not name.
        FileNotFoundError: ``path_or_repo_id`` names a local path that does not exist (or is
            a file) and cannot be a Hub repo id.
        HubError: the Hub refused or could not be reached (and the cache cannot serve it).
    """
    unknown = sorted(set(download) - set(HubDownload.__annotations__))
    if unknown:
        raise TypeError(
            f"Unknown keyword arguments {unknown}: the Hub download takes "
            f"{', '.join(HubDownload.__annotations__)}."
        )
    local = Path(path_or_repo_id)
    if local.is_dir():
        return local, None
    check_local_path(path_or_repo_id)
    repo_id = str(path_or_repo_id)
    revision = download.get("revision")
    try:
        with hub_errors(repo_id, action="download", revision=revision):
            folder = snapshot_download(repo_id, **download)
    except LocalEntryNotFoundError as error:
        at = "" if revision is None else f" at revision {revision!r}"
        raise HubError(
            f"{repo_id!r} is neither a local folder nor in the Hugging Face cache{at}, and the "
            "Hub could not be reached (or HF_HUB_OFFLINE is set). Check the path, or connect "
            "and try again."
        ) from error
    return Path(folder), Path(folder).name  # snapshot folders are named by commit


def commit_folder(
    save: Callable[[Path], None],
    repo_id: str,
    *,
    prepare: Callable[..., None] | None = None,
    private: bool | None = None,
    token: str | bool | None = None,
    revision: str | None = None,
    commit_message: str = "Upload with relrep_hf",
    create_pr: bool = False,
) -> str:
    """Write an artifact with ``save(folder)`` into a temporary folder and push it as one commit.

    ``prepare(folder, repo_id=..., token=...)`` then readies the folder for the Hub (the
    publishing layer's portable provenance, card, remote code and manifest). The commit is made
    with ``HfApi.create_commit`` on top of the branch head read here (a push that another one
    overtook fails instead of mixing), deleting the artifact files the new version lacks.
    ``revision`` is a branch, created from ``main`` if missing. Returns the commit sha. Nothing
    local is touched: the folder is temporary.

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
        if prepare is not None:
            prepare(folder, repo_id=repo_id, token=token)
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


def artifact_kind(folder: str | os.PathLike) -> ArtifactKind:
    """What ``folder`` holds: ``"anchor_set"``, ``"projector"``, ``"head"``,
    ``"migration_map"`` or ``"run"``.

    Raises:
        FileNotFoundError: it is none of those, or lacks required files (named in the message).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{str(folder)!r} is not a folder.")
    kind = detect_artifact_kind(folder)
    if kind is None:
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
        expected = ", ".join(
            f"{entry.article} ({', '.join(entry.required)}"
            + (f" with model_type {entry.model_type!r}" if entry.model_type else "")
            + ")"
            for entry in artifact_types().values()
        )
        raise FileNotFoundError(
            f"{str(folder)!r} holds no relrep_hf artifact. Expected {expected}, or a run folder "
            f"(anchor_set/, projectors/<name>/, heads/<name>/); found {entries or 'nothing'}."
        )
    if kind != "run":
        required, _ = ARTIFACT_FILES[kind]
        missing = [name for name in required if not (folder / name).is_file()]
        if missing:
            raise FileNotFoundError(
                f"{str(folder)!r} looks like {describe_kind(kind)} but lacks "
                f"{', '.join(missing)}. Save it again (save_pretrained) before pushing."
            )
    return kind


def detect_artifact_kind(folder: Path) -> ArtifactKind | None:
    """`artifact_kind` without the checks: ``None`` when ``folder`` holds no artifact. A
    registered type's marker files come first, then ``config.json``'s ``model_type``."""
    types = artifact_types().values()
    for entry in types:
        if any((folder / name).is_file() for name in entry.markers):
            return entry.name
    if (folder / "config.json").is_file():
        try:
            model_type = read_config(folder).get("model_type")
        except (OSError, ValueError, AttributeError):
            return None
        kinds = {entry.model_type: entry.name for entry in types if entry.model_type}
        return kinds.get(model_type) if isinstance(model_type, str) else None
    if any((folder / name).is_dir() for name in ("anchor_set", "projectors", "heads")):
        return "run"
    return None


def read_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` as a dict."""
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def first_line(error: BaseException) -> str:
    """The first line of an error's message (its type when it has none)."""
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
        raise HubError(
            _http_message(status, error, repo_id, where, action, committing)
            + unchanged * (action != "download")
        ) from error
    except (ConnectError, TimeoutException) as error:
        raise HubError(
            f"Could not reach the Hub at {endpoint} to {action} {where} "
            f"({type(error).__name__}: {first_line(error)}). Check the network connection and "
            "HF_ENDPOINT, then try again."
            + ("" if action == "download" else " Nothing was pushed." + unchanged)
        ) from error
    except TransportError as error:
        if committing:
            raise HubError(
                f"The upload to {where} was interrupted: the connection to {endpoint} dropped "
                f"({type(error).__name__}: {first_line(error)}) before the Hub confirmed the "
                "commit. Check the repo's history (HfApi().list_repo_commits) and push again."
                + unchanged
            ) from error
        raise HubError(
            f"The connection to the Hub at {endpoint} failed while trying to {action} {where} "
            f"({type(error).__name__}: {first_line(error)}). Try again."
        ) from error


def _http_message(
    status: int | None,
    error: HfHubHTTPError,
    repo_id: str,
    where: str,
    action: str,
    committing: bool,
) -> str:
    endpoint = constants.ENDPOINT
    if status == 401:
        return (
            f"The Hub at {endpoint} rejected the credentials (401 Unauthorized) trying to "
            f"{action} {where}. Log in with `hf auth login` or pass a valid token=..."
            f"{' with write access' if action != 'download' else ''}."
        )
    if status == 403:
        namespace = repo_id.split("/")[0] if "/" in repo_id else "your namespace"
        return (
            f"Not allowed to {action} {where} (403 Forbidden): the token cannot write to "
            f"{namespace!r}. Push to your own namespace or an organization you belong to, "
            "or use a token with write access to it."
        )
    if committing and status == 412:
        return (
            f"Another push changed {where} while this one was being prepared (412: the "
            "branch moved since it was read), so this commit was refused rather than mixed "
            "with or silently replacing that push. Check the repo's history "
            "(HfApi().list_repo_commits) and push again if this version should win."
        )
    if committing:
        return (
            f"The upload to {where} was interrupted: the Hub at {endpoint} answered {status}, "
            "so the commit was not recorded and the repo still points to its previous "
            "commit. Push again."
        )
    return (
        f"The Hub at {endpoint} failed to {action} {where} ({status}: "
        f"{first_line(error)}). Try again later."
    )


__getattr__ = deprecated_attributes(__name__)  # renamed names (`push_folder`), with a warning
