"""A manifest of sha256 digests: silent corruption of a saved artifact becomes a clear error.

Flipping bytes inside a tensor's data (header intact) loads without any error and gives finite,
wrong features. So every save writes ``manifest.json``: the size and sha256 digest of each file
of the artifact. Loading checks it, for local folders and Hub snapshots alike, and names the
first file that differs. Hashing runs at disk speed (a 300 x 768 projector: a few ms).

Artifacts saved before manifests existed load without verification, with a warning. Skip the
check with ``verify=False`` in ``from_pretrained`` or ``RELREP_HF_VERIFY=0`` in the environment
(for instance to inspect a damaged artifact).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "relrep_hf manifest 1"
VERIFY_ENV = "RELREP_HF_VERIFY"
_MAX_MANIFEST_BYTES = 1 << 20  # a manifest lists a handful of files: a larger one is not ours
_CHUNK = 1 << 20


class CorruptedArtifactError(OSError):
    """A file of a saved artifact does not match the digest its manifest recorded."""


class FolderChangingError(OSError):
    """A folder was replaced by other saves during every attempt to read it."""


FAST_READS = 3  # reads of the folder itself before reading from a private copy of it
COPY_ATTEMPTS = 20


def folder_identity(folder: str | os.PathLike) -> tuple[int, int, int] | None:
    """What changes when a save swaps a new version in at ``folder`` (device, inode, ctime)."""
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_ctime_ns


def read_consistently(folder: str | os.PathLike, load: Callable[[Path], T], *, source: str) -> T:
    """``load(folder)``, which reads and checks the files of ``folder``, on one version of it.

    A save replaces the whole folder in one atomic swap, but a reader that opens the manifest
    of one version and a file of the next would see sizes and digests that disagree: a false
    "corrupted" error, or a mix of two versions. So the folder's identity is taken before and
    after each read, and a read during which it changed counts for nothing (its result or error
    says nothing about either version). After `FAST_READS` such reads, one version is copied
    through a handle on its folder (which a swap does not move) and ``load`` reads the copy.
    Errors of a read that no save disturbed are real.

    Raises:
        FolderChangingError: no complete version could be copied in `COPY_ATTEMPTS` tries.
    """
    folder = Path(folder)
    for _ in range(FAST_READS):
        before = folder_identity(folder)
        try:
            result = load(folder)
        except Exception:
            if folder_identity(folder) == before:
                raise
        else:
            if folder_identity(folder) == before:
                return result
    for attempt in range(COPY_ATTEMPTS):
        with tempfile.TemporaryDirectory(prefix="relrep-hf-read-") as copy:
            if _copy_one_version(folder, Path(copy)):
                return load(Path(copy))
        time.sleep(0.001 * min(2**attempt, 50))
    raise FolderChangingError(
        f"{source!r} was replaced by other saves during each of {COPY_ATTEMPTS} attempts to "
        "read it: other processes are saving to it without pause. Load it when they are done, "
        "or have them save to another folder."
    )


def _copy_one_version(folder: Path, copy: Path) -> bool:
    """Copy every file of the version now at ``folder`` into ``copy``; whether it is complete
    (the manifest and every file it lists, or a folder that stayed in place meanwhile)."""
    try:
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        names = {
            os.path.normpath(os.path.join(root, name))
            for root, _, files, _ in os.fwalk(".", dir_fd=handle)
            for name in files
        }
        copied = set()
        for name in sorted(names):
            try:
                file = os.open(name, os.O_RDONLY, dir_fd=handle)
            except FileNotFoundError:  # the old version is being removed
                continue
            with os.fdopen(file, "rb") as source:
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                (copy / name).write_bytes(source.read())
            copied.add(name)
        in_place = (
            folder_identity(folder) is not None
            and os.stat(folder).st_ino == os.fstat(handle).st_ino
        )
    finally:
        os.close(handle)
    if in_place:
        return True
    try:
        listed = json.loads((copy / MANIFEST_NAME).read_bytes())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return isinstance(listed, dict) and set(listed) <= copied


def file_digest(path: str | os.PathLike) -> str:
    """The sha256 hex digest of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def manifest_bytes(folder: str | os.PathLike) -> bytes:
    """The manifest of every file under ``folder`` (its size and sha256), as JSON bytes."""
    folder = Path(folder)
    files = {
        path.relative_to(folder).as_posix(): {
            "sha256": file_digest(path),
            "size": path.stat().st_size,
        }
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink() and path.name != MANIFEST_NAME
    }
    manifest = {"format": MANIFEST_FORMAT, "algorithm": "sha256", "files": files}
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def write_manifest(folder: str | os.PathLike) -> Path:
    """Write ``manifest.json`` listing every file under ``folder`` (its size and sha256)."""
    path = Path(folder) / MANIFEST_NAME
    path.write_bytes(manifest_bytes(folder))
    return path


def verification_enabled(verify: bool | None = None) -> bool:
    """``verify`` if given, else whether ``RELREP_HF_VERIFY`` leaves verification on."""
    if verify is not None:
        return bool(verify)
    return os.environ.get(VERIFY_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def verify_folder(
    folder: str | os.PathLike,
    *,
    required: Iterable[str] = (),
    what: str = "artifact",
    source: str | None = None,
    verify: bool | None = None,
    stacklevel: int = 3,
) -> bool:
    """Check every file that ``folder``'s manifest lists against its size and digest.

    ``required`` names the files the loader reads: each must be listed. Returns whether the
    folder was verified (``False``: verification is off, or the artifact predates manifests,
    with a warning).

    Raises:
        CorruptedArtifactError: a file is missing, or differs from the digest recorded at save
            time, or the manifest itself is unreadable; the message names the file.
    """
    if not verification_enabled(verify):
        return False
    folder = Path(folder)
    source = str(folder) if source is None else source
    path = folder / MANIFEST_NAME
    if not path.is_file():
        warnings.warn(
            f"The {what} at {source!r} has no {MANIFEST_NAME} (saved by an older relrep_hf): its "
            "files are not checked for corruption. Save it again to add one.",
            UserWarning,
            stacklevel=stacklevel,
        )
        return False
    listed = _read_manifest(path, what=what, source=source)
    advice = (
        f"Download it again (force_download=True) or save it again; {VERIFY_ENV}=0 (or "
        "verify=False) skips this check."
    )
    for name in required:
        if name not in listed:
            raise CorruptedArtifactError(
                f"{MANIFEST_NAME} of the {what} at {source!r} does not list {name}, which loading "
                f"reads: the manifest is damaged or from another save. {advice}"
            )
    for name, entry in sorted(listed.items()):
        file = folder / name
        if not file.is_file():
            raise CorruptedArtifactError(
                f"{name} of the {what} at {source!r} is missing although its {MANIFEST_NAME} "
                f"lists it: the artifact is incomplete. {advice}"
            )
        size = file.stat().st_size
        if size != entry["size"]:
            raise CorruptedArtifactError(
                f"{name} of the {what} at {source!r} has {size} bytes but {entry['size']} were "
                f"saved: it is truncated or corrupted. {advice}"
            )
        if file_digest(file) != entry["sha256"]:
            raise CorruptedArtifactError(
                f"{name} of the {what} at {source!r} does not match the sha256 digest recorded "
                f"at save time: it is corrupted. {advice}"
            )
    return True


def _read_manifest(path: Path, *, what: str, source: str) -> dict[str, dict[str, Any]]:
    """The ``files`` of a manifest, checked for shape; an error naming it otherwise."""
    problem = None
    if path.stat().st_size > _MAX_MANIFEST_BYTES:
        problem = f"it is larger than {_MAX_MANIFEST_BYTES} bytes"
    else:
        try:
            manifest = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError) as error:
            problem = f"it is not valid JSON ({error})"
        else:
            files = manifest.get("files") if isinstance(manifest, dict) else None
            if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
                problem = f"it is not a {MANIFEST_FORMAT!r} manifest"
            elif not isinstance(files, dict) or not all(
                _valid_entry(n, e) for n, e in files.items()
            ):
                problem = "its file list is malformed"
            else:
                return files
    raise CorruptedArtifactError(
        f"{MANIFEST_NAME} of the {what} at {source!r} is corrupted: {problem}. Download the "
        f"artifact again (force_download=True) or save it again; {VERIFY_ENV}=0 (or "
        "verify=False) skips this check."
    )


def _valid_entry(name: Any, entry: Any) -> bool:
    if not isinstance(name, str) or name.startswith("/") or ".." in name.split("/"):
        return False
    if not isinstance(entry, dict):
        return False
    digest, size = entry.get("sha256"), entry.get("size")
    return (
        isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest)
        and type(size) is int
        and size >= 0
    )
