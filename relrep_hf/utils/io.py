"""Atomic, durable saves: an artifact folder is never left half-written, nor a mix of two saves.

A folder save writes everything into a staging folder beside the target, makes every file
durable (``fsync`` of each file, then of the staging folder), and swaps the staging folder with
the target in one step; then the parent folder is synced, so that the swap itself survives a
power loss, and the old folder is removed. The target then holds exactly the files of the new
save: nothing of the old folder is carried over (except what a caller names in ``keep``, such as
a trainer's ``checkpoint-*`` folders). Saved files get the mode that the user's umask gives an
ordinary new file. Saves of the same folder by two processes at once are refused by a lock (see
`relrep_hf.utils.locking`).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from relrep_hf.utils.locking import folder_lock

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@contextmanager
def atomic_directory(path: str | os.PathLike, *, keep: Sequence[str] = ()) -> Iterator[Path]:
    """Yield a fresh staging folder beside ``path``; on success it becomes ``path``.

    Everything is written into the staging folder first (on the same file system). On success
    its files and folders are made durable, and it is swapped with ``path`` in one atomic
    ``renameat2(RENAME_EXCHANGE)`` (or renamed into place when ``path`` does not exist yet);
    the parent folder is synced and the old folder removed. A process killed at any moment,
    and any reader, sees the complete old folder or the complete new one, never a mix.
    Entries of the old folder matching a glob pattern of ``keep`` are moved into the new one
    after the swap (a crash in between loses only them). Staging folders that killed
    processes of this machine left behind are removed by the next save of the same ``path``.

    Where the swap is not available (systems other than Linux, some network file systems),
    the old folder is moved aside and the new one renamed into place: a process killed between
    the two renames leaves no folder at ``path`` for a moment, and the next save of ``path``
    moves the old folder back first.

    Raises:
        FolderLockedError: another process is saving to ``path`` right now.
    """
    target = Path(path)
    if target.is_symlink():
        target = target.resolve()  # swap the folder the link points to, not the link
    target.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(target):
        _recover(target)
        staging = target.parent / f"{_staging_prefix(target)}{os.getpid()}-{secrets.token_hex(4)}"
        staging.mkdir()  # not mkdtemp: the folder becomes the artifact, so it keeps the umask
        try:
            yield staging
            make_durable(staging)
            _commit(staging, target, keep)
        finally:
            # After a swap this is the old folder; after an error, the unfinished new one.
            shutil.rmtree(staging, ignore_errors=True)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, ``fsync`` and ``os.replace``.

    The file gets the mode of an ordinary new file under the user's umask (a temporary file
    starts at 0600), and the parent folder is synced after the rename.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fchmod(file.fileno(), new_file_mode())
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    fsync_directory(target.parent)


def new_file_mode() -> int:
    """The mode an ordinary new file gets under this process's umask (0644 under 022)."""
    return 0o666 & ~_umask()


def make_durable(folder: Path) -> None:
    """Give every file under ``folder`` the umask's mode and ``fsync`` it; then each folder,
    deepest first, and ``folder`` itself last."""
    file_mode, folder_mode = new_file_mode(), 0o777 & ~_umask()
    folders = []
    for root, dirs, files in os.walk(folder):
        folders.append(root)
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            os.chmod(path, file_mode)
            fsync_file(path)
        for name in dirs:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), folder_mode)
    for root in reversed(folders):
        fsync_directory(root)


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a written file's data and metadata to the disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def fsync_directory(path: str | os.PathLike) -> None:
    """Flush a folder's entries (new names, renames) to the disk; a no-op where folders cannot
    be opened (Windows)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (PermissionError, IsADirectoryError):  # pragma: no cover - Windows
        return
    try:
        os.fsync(descriptor)
    except OSError:  # pragma: no cover - some file systems refuse fsync on folders
        pass
    finally:
        os.close(descriptor)


def _commit(staging: Path, target: Path, keep: Sequence[str]) -> None:
    """Make the complete ``staging`` folder the content of ``target`` in one atomic step."""
    parent = target.parent
    if not os.path.lexists(target):
        try:
            os.rename(staging, target)
        except OSError:  # created meanwhile by someone else: swap with it below
            pass
        else:
            fsync_directory(parent)
            return
    if not target.is_dir():
        raise NotADirectoryError(
            f"Cannot save into {str(target)!r}: it exists and is not a folder."
        )
    os.chmod(staging, stat.S_IMODE(target.stat().st_mode))
    if _exchange(staging, target):
        fsync_directory(parent)
        old = staging  # the name of the staging folder now holds the old folder
    else:
        old = parent / f"{_aside_prefix(target)}{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(target, old)
        fsync_directory(parent)
        os.rename(staging, target)
        fsync_directory(parent)
    if keep:
        _carry_over(old, target, keep)
    shutil.rmtree(old, ignore_errors=True)


def _carry_over(old: Path, new: Path, keep: Sequence[str]) -> None:
    """Move the entries of ``old`` that match a pattern of ``keep`` (and ``new`` lacks) into
    ``new``."""
    moved = False
    for entry in sorted(old.iterdir()):
        if any(entry.match(pattern) for pattern in keep) and not os.path.lexists(new / entry.name):
            os.rename(entry, new / entry.name)
            moved = True
    if moved:
        fsync_directory(new)


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


def _umask() -> int:
    """This process's umask, read without changing it where Linux shows it."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        status = ""
    found = re.search(r"^Umask:\s+([0-7]+)$", status, flags=re.MULTILINE)
    if found:
        return int(found.group(1), 8)
    mask = os.umask(0o022)  # elsewhere: read by setting it, and set it back at once
    os.umask(mask)
    return mask


def _staging_prefix(target: Path) -> str:
    """``.<name>.tmp-<host>-``: what this machine's staging folders for ``target`` start with."""
    return f".{target.name}.tmp-{socket.gethostname()}-"


def _aside_prefix(target: Path) -> str:
    """``.<name>.old-<host>-``: an old folder moved aside by the fallback commit."""
    return f".{target.name}.old-{socket.gethostname()}-"


def _recover(target: Path) -> None:
    """Clean up after killed saves of ``target`` on this machine: remove their staging
    folders, and move an old folder that the fallback commit left aside back into place."""
    if os.name != "posix":  # os.kill(pid, 0) only probes on POSIX
        return
    for prefix, is_aside in ((_aside_prefix(target), True), (_staging_prefix(target), False)):
        for candidate in sorted(target.parent.glob(glob.escape(prefix) + "*")):
            pid = candidate.name[len(prefix) :].split("-", 1)[0]
            if not pid.isdigit() or _process_exists(int(pid)):
                continue
            if is_aside and not os.path.lexists(target):
                os.rename(candidate, target)
                fsync_directory(target.parent)
            else:
                shutil.rmtree(candidate, ignore_errors=True)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True
