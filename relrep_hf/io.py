"""Atomic saves: an artifact folder is never left half-written, nor a mix of two saves."""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import secrets
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``path``; on success it takes the place of ``path``.

    Everything is written into the temporary folder first (on the same file system). Then the
    files of ``path`` that the new save does not write are hard-linked into it (copied where
    links are not supported), so they are kept, and the two folders are swapped in one atomic
    ``renameat2(RENAME_EXCHANGE)`` (or the folder is renamed into place when ``path`` does not
    exist yet). A process killed at any moment, and any reader, sees the complete old folder or
    the complete new one, never a mix. Temporary folders that killed processes of this machine
    left behind are removed by the next save of the same ``path``.

    Where the swap is not available (systems other than Linux, some network file systems),
    files are moved over their old versions one by one with ``os.replace``: each file is
    replaced atomically, but a process killed between two of them leaves a mix.
    """
    target = Path(path)
    if target.is_symlink():
        target = target.resolve()  # swap the folder the link points to, not the link
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(target)
    staging = target.parent / f"{_staging_prefix(target)}{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()  # not mkdtemp: the folder becomes the artifact, so it keeps the umask's mode
    try:
        yield staging
        _commit(staging, target)
    finally:
        # After a swap this is the old folder; after an error, the unfinished new one.
        shutil.rmtree(staging, ignore_errors=True)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _commit(staging: Path, target: Path) -> None:
    """Make the complete ``staging`` folder the content of ``target`` in one atomic step."""
    if not os.path.lexists(target):
        try:
            os.rename(staging, target)
            return
        except OSError:  # created meanwhile by someone else: swap with it below
            pass
    if not target.is_dir():
        raise NotADirectoryError(
            f"Cannot save into {str(target)!r}: it exists and is not a folder."
        )
    os.chmod(staging, stat.S_IMODE(target.stat().st_mode))
    _link_missing(target, staging)
    if not _exchange(staging, target):
        _replace_files(staging, target)


def _link_missing(old: Path, new: Path) -> None:
    """Hard-link (or copy) into ``new`` every entry of ``old`` that ``new`` does not have."""
    for entry in os.scandir(old):
        destination = new / entry.name
        if entry.is_dir(follow_symlinks=False):
            if not os.path.lexists(destination):
                destination.mkdir()
                os.chmod(destination, stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode))
            if destination.is_dir() and not destination.is_symlink():
                _link_missing(Path(entry.path), destination)
        elif os.path.lexists(destination):
            continue  # written by the new save
        elif entry.is_symlink():
            os.symlink(os.readlink(entry.path), destination)
        else:
            try:
                os.link(entry.path, destination)
            except OSError:
                shutil.copy2(entry.path, destination)


def _replace_files(staging: Path, target: Path) -> None:
    """Fallback commit: move each file of ``staging`` over its version in ``target``."""
    target.mkdir(exist_ok=True)
    for source in sorted(staging.rglob("*")):
        if source.is_dir() and not source.is_symlink():
            continue
        destination = target / source.relative_to(staging)
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, destination)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths atomically; ``False`` where the system cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    return (
        renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
        == 0
    )


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    """glibc's ``renameat2`` (Linux 3.15+, glibc 2.28+), or ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function


def _staging_prefix(target: Path) -> str:
    """``.<name>.tmp-<host>-``: what this machine's temporary folders for ``target`` start with."""
    return f".{target.name}.tmp-{socket.gethostname()}-"


def _remove_stale_staging(target: Path) -> None:
    """Remove temporary folders for ``target`` whose process (on this machine) is gone."""
    if os.name != "posix":  # os.kill(pid, 0) only probes on POSIX
        return
    prefix = _staging_prefix(target)
    for candidate in target.parent.glob(glob.escape(prefix) + "*"):
        pid = candidate.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not _process_exists(int(pid)):
            shutil.rmtree(candidate, ignore_errors=True)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True
