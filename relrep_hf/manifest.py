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
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "relrep_hf manifest 1"
VERIFY_ENV = "RELREP_HF_VERIFY"
_MAX_MANIFEST_BYTES = 1 << 20  # a manifest lists a handful of files: a larger one is not ours
_CHUNK = 1 << 20


class CorruptedArtifactError(OSError):
    """A file of a saved artifact does not match the digest its manifest recorded."""


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
