"""One save / load / push base for every artifact: projector, head, anchor set, migration map.

Like huggingface_hub's ``ModelHubMixin`` (whose ``_save_pretrained`` / ``_from_pretrained`` are
all a subclass writes) and sentence-transformers' ``Module``: an artifact says which files it
writes (`ArtifactMixin._save_files`) and how it reads them back (`ArtifactMixin._load_files`);
everything else is here, once:

* **save**: the folder is checked first (`check_save_folder`: a folder holding anything but an
  artifact of the same kind is refused, nothing touched, so a save never deletes a user's
  files), then written atomically and durably (`relrep_hf.utils.io.atomic_directory`) with the
  model card (through `relrep_hf.utils.publishing_hooks`) and the sha256 manifest;
* **load**: a local folder or a Hub repo id (`relrep_hf.utils.hub_files.resolve_folder`), the
  artifact's files present, verified against the manifest while they are read, one version of
  the folder though other processes save to it meanwhile (`read_verified`);
* **push**: the artifact saved into a temporary folder and pushed as one commit
  (`relrep_hf.utils.hub_files.commit_folder`), its card regenerated for the repo
  (`relrep_hf.utils.publishing_hooks`).

The `transformers.PreTrainedModel` artifacts (projector, head) take the same base
(`relrep_hf.models.modeling_utils.RelrepPreTrainedModel`); their ``from_pretrained`` keeps
transformers' signature and reads through `resolve_artifact_folder` and `read_verified`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from relrep_hf.utils.file_checks import ArtifactFileError
from relrep_hf.utils.hub_files import (
    ARTIFACT_FILES,
    artifact_types,
    commit_folder,
    describe_kind,
    detect_artifact_kind,
    resolve_folder,
)
from relrep_hf.utils.io import atomic_directory
from relrep_hf.utils.manifest import read_consistently, verify_folder, write_manifest
from relrep_hf.utils.publishing_hooks import publisher

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from relrep_hf.utils.hub_files import HubDownload

__all__ = [
    "ALWAYS_KEPT",
    "ArtifactMixin",
    "NotAnArtifactFolderError",
    "check_save_folder",
    "read_verified",
    "resolve_artifact_folder",
    "save_artifact",
    "write_artifact",
]

T = TypeVar("T")
A = TypeVar("A", bound="ArtifactMixin")

ALWAYS_KEPT = ("checkpoint-*",)
"""Entries of a saved folder that a new save carries over: a trainer's checkpoints."""

HUB_KWARGS = ("repo_id", "token", "private", "commit_message", "revision", "create_pr")


class NotAnArtifactFolderError(FileExistsError, ValueError):
    """A save was asked to replace a folder that holds something else than an artifact of the
    same kind (a user's files, another artifact): nothing was written or deleted."""


def check_save_folder(
    folder: str | os.PathLike, kind: str, *, what: str, keep: Sequence[str] = ()
) -> list[str]:
    """Whether ``folder`` may be replaced by a save of an artifact of ``kind``; returns the
    entries of an artifact folder of that kind that are not the artifact's own (a user's notes),
    which the save carries over.

    A missing or empty folder may be written; a folder holding an artifact of ``kind`` (or only
    files named as its files are, such as a damaged save) is replaced (its own files; others
    are carried over). Entries matching ``keep`` (a trainer's ``checkpoint-*``) do not count.

    Raises:
        NotAnArtifactFolderError: ``folder`` holds files but no artifact of ``kind`` (or it is
            a file).
    """
    target = Path(folder)
    if not os.path.lexists(target):
        return []
    if not target.is_dir():
        raise NotAnArtifactFolderError(
            f"Cannot save the {what} into {str(target)!r}: it is a file, not a folder. Nothing "
            "was written. Save into a new or empty folder."
        )
    patterns = (*ALWAYS_KEPT, *keep)
    entries = sorted(
        entry.name
        for entry in target.iterdir()
        if not any(entry.match(pattern) for pattern in patterns)
    )
    if not entries:
        return []
    found = detect_artifact_kind(target)
    own = {name for group in ARTIFACT_FILES[kind] for name in group}
    if found == kind or set(entries) <= own:  # the latter: a damaged save, to be saved again
        return [name for name in entries if name not in own]
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    holds = f"it holds {describe_kind(found)}" if found else f"it holds {shown}"
    raise NotAnArtifactFolderError(
        f"Cannot save the {what} into {str(target)!r}: {holds}, not a saved {what}, and a save "
        "replaces the whole folder. Nothing was written or deleted. Save into a new or empty "
        f"folder (e.g. {str(target / kind)!r}), or empty this one yourself."
    )


def write_artifact(folder: Path, write: Callable[[Path], None]) -> None:
    """``write(folder)`` (the artifact's own files), then its model card (the publishing layer's,
    through the hook) and the sha256 manifest of every file."""
    write(folder)
    publisher().write_card(folder)
    write_manifest(folder)


def save_artifact(
    directory: str | os.PathLike,
    write: Callable[[Path], None],
    *,
    kind: str,
    what: str,
    keep: Sequence[str] = (),
) -> None:
    """Save an artifact into ``directory``: checked (`check_save_folder`), then written by
    `write_artifact` into a staging folder that replaces ``directory`` atomically and durably.

    The user's files beside a previous save are copied into the staging folder after the
    manifest (they are not the artifact's, so they are not verified), before the swap: a crash
    at any point leaves them in the old folder or the new one. Entries matching ``keep`` and a
    trainer's ``checkpoint-*`` are moved over after the swap (`atomic_directory`'s ``keep``).
    """
    target = Path(directory)
    foreign = check_save_folder(target, kind, what=what, keep=keep)
    with atomic_directory(target, keep=(*ALWAYS_KEPT, *keep)) as staging:
        write_artifact(staging, write)
        for name in foreign:
            if (target / name).is_dir() and not (target / name).is_symlink():
                shutil.copytree(target / name, staging / name, symlinks=True)
            else:
                shutil.copy2(target / name, staging / name, follow_symlinks=False)


def resolve_artifact_folder(
    path_or_repo_id: str | os.PathLike,
    *,
    kind: str,
    what: str,
    loader: str,
    subfolder: str = "",
    **download: Unpack[HubDownload],
) -> tuple[Path, str | None, str]:
    """``(folder, commit, source)``: the local folder of an artifact given by folder or Hub id
    (``download``: how `resolve_folder` fetches it), the commit it was resolved to (None for a
    local folder), and how to name it in messages.

    Raises:
        FileNotFoundError: a local path that does not exist (see `relrep_hf.utils.local_paths`).
        ArtifactFileError: the folder lacks the artifact's files (the message names them, and the
            kind of artifact it holds instead, with its loader).
        HubError: the Hub refused or could not be reached.
    """
    folder, commit = resolve_folder(path_or_repo_id, **download)
    source = str(path_or_repo_id)
    if subfolder:  # e.g. a sentence-transformers module's folder
        folder, source = folder / subfolder, f"{source} (subfolder {subfolder!r})"
    required, _ = ARTIFACT_FILES[kind]
    missing = [name for name in required if not (folder / name).is_file()]
    found = detect_artifact_kind(folder) if folder.is_dir() else None
    if found not in (None, kind):
        raise ArtifactFileError(
            f"{source!r} holds {describe_kind(found)}, not {describe_kind(kind)}: load it with "
            f"{_loader(found)}." + _ANCHOR_SET_HINT.get((found, kind), "")
        )
    if missing:
        pickled = any(name.endswith(".safetensors") for name in missing)
        raise ArtifactFileError(
            f"{source!r} is not {describe_kind(kind)}: it lacks {', '.join(missing)}"
            + (" (weights load from safetensors only, never from a pickle)" if pickled else "")
            + f". It is written by {loader}.save_pretrained."
        )
    return folder, commit, source


def _loader(kind: str) -> str:
    """What loads a kind of folder, for messages."""
    if kind == "run":
        return "the folders inside it (anchor_set/, projectors/<name>/, heads/<name>/)"
    return artifact_types()[kind].loader


_ANCHOR_SET_HINT = {
    ("anchor_set", "projector"): " Build projectors from it with "
    "RelativeProjector.from_anchor_set.",
}


VERIFY_FIRST_BYTES = 1 << 20  # folders up to this size are verified before they are loaded


def _folder_bytes(folder: Path) -> float:
    """The size of the files in ``folder``; infinite if it holds a folder or cannot be listed
    (a file removed by a concurrent save: the overlapped check decides then, as always)."""
    try:
        with os.scandir(folder) as entries:
            sizes = [e.stat().st_size if e.is_file() else float("inf") for e in entries]
    except OSError:
        return float("inf")
    return sum(sizes)


def read_verified(
    folder: Path,
    load: Callable[[Path], T],
    *,
    required: Sequence[str],
    what: str,
    source: str,
    verify: bool | None = None,
    stacklevel: int = 6,
) -> T:
    """``load(read)`` on one version of ``folder``, its files checked against the manifest.

    The digests of a folder over `VERIFY_FIRST_BYTES` are computed on a second thread (hashlib
    releases the GIL) while ``load`` reads; a smaller folder is checked first (hashing it takes
    less than starting a thread, and a corrupted one is refused without building anything).
    Either way nothing is returned, and no other error raised, before the check has passed (a
    corrupted file explains a failure better). ``read`` is the folder, or a private copy of one
    version of it when other processes keep saving to it
    (`relrep_hf.utils.manifest.read_consistently`).
    """

    def checked(read: Path) -> T:
        if _folder_bytes(read) <= VERIFY_FIRST_BYTES:
            verify_folder(
                read, required=required, what=what, source=source, verify=verify,
                stacklevel=stacklevel,
            )  # fmt: skip
            return load(read)
        with ThreadPoolExecutor(max_workers=1) as pool:
            digests = pool.submit(
                verify_folder, read, required=required, what=what, source=source,
                verify=verify, stacklevel=stacklevel,
            )  # fmt: skip
            try:
                loaded = load(read)
            except BaseException:
                digests.result()
                raise
            digests.result()
        return loaded

    return read_consistently(folder, checked, source=source)


class ArtifactMixin:
    """Save, load (folder or Hub id, verified) and push for an artifact that writes its files.

    A subclass sets `artifact_kind` (the name of the `relrep_hf.utils.hub_files.ArtifactType`
    it declares as ``artifact_type``, or its config does, registered by
    `relrep_hf.models.register_artifact_types`) and `artifact_name` (for messages), and writes
    `_save_files` and `_load_files`.
    """

    artifact_kind: ClassVar[str] = ""
    artifact_name: ClassVar[str] = "artifact"

    def _save_files(self, folder: Path, **kwargs: Any) -> None:
        """Write the artifact's own files into ``folder`` (card and manifest come after)."""
        raise NotImplementedError

    @classmethod
    def _load_files(cls: type[A], folder: Path, *, source: str, commit: str | None) -> A:
        """Build the artifact from the files of ``folder`` (checked before anything is built)."""
        raise NotImplementedError

    def save_pretrained(
        self,
        save_directory: str | os.PathLike,
        *,
        keep: Sequence[str] = (),
        push_to_hub: bool = False,
        **kwargs: Any,
    ) -> None:
        """Save the artifact's files, its model card and their manifest (sha256 of each file)
        into ``save_directory``, atomically and durably (see `save_artifact`).

        A folder that holds anything but an artifact of the same kind is refused, and nothing in
        it touched; files of the user's beside a previous save are kept, as are entries matching
        ``keep`` and a trainer's ``checkpoint-*``. With ``push_to_hub=True`` the artifact is
        then pushed (``repo_id``, default the folder's name; ``token``, ``private``, ...).
        """
        hub_kwargs = {key: kwargs.pop(key) for key in HUB_KWARGS if key in kwargs}
        save_artifact(
            save_directory,
            lambda folder: self._save_files(folder, **kwargs),
            kind=self.artifact_kind,
            what=self.artifact_name,
            keep=keep,
        )
        if push_to_hub:
            repo_id = hub_kwargs.pop("repo_id", Path(save_directory).name)
            self.push_to_hub(repo_id, **hub_kwargs)

    def push_to_hub(
        self,
        repo_id: str,
        *,
        private: bool | None = None,
        token: str | bool | None = None,
        revision: str | None = None,
        commit_message: str | None = None,
        create_pr: bool = False,
    ) -> str:
        """Push the artifact to the Hub as one commit (`relrep_hf.utils.hub_files.commit_folder`),
        with its card regenerated for the repo and portable provenance (the publishing layer's
        ``prepare_upload``, through the hook); returns its sha. The artifact in memory is not
        changed."""
        return commit_folder(
            lambda folder: write_artifact(folder, self._save_files),
            repo_id,
            prepare=publisher().prepare_upload,
            private=private,
            token=token,
            revision=revision,
            commit_message=commit_message or f"Upload {self.artifact_name} with relrep_hf",
            create_pr=create_pr,
        )

    @classmethod
    def from_pretrained(
        cls: type[A],
        path_or_repo_id: str | os.PathLike,
        *,
        verify: bool | None = None,
        **download: Unpack[HubDownload],
    ) -> A:
        """Load from a local folder or a Hub repo (``download``: revision, token, cache_dir,
        local_files_only, force_download, as `huggingface_hub.snapshot_download` takes them).

        The files are checked against the manifest written at save time (``verify=False`` or
        ``RELREP_HF_VERIFY=0`` skips that; artifacts saved before manifests load with a
        warning) and structurally before anything is built from them.
        """
        folder, commit, source = resolve_artifact_folder(
            path_or_repo_id,
            kind=cls.artifact_kind,
            what=cls.artifact_name,
            loader=cls.__name__,
            **download,
        )
        required, _ = ARTIFACT_FILES[cls.artifact_kind]
        return read_verified(
            folder,
            lambda read: cls._load_files(read, source=source, commit=commit),
            required=required,
            what=cls.artifact_name,
            source=source,
            verify=verify,
        )
