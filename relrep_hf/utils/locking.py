"""One writer at a time: a lock beside an artifact folder while a save replaces it.

Two processes saving to the same folder at once would each swap in their own complete version
(never a mix), but the first would report success for a save that the second replaced without
its knowledge. So a save holds an exclusive ``flock`` on ``.<name>.lock`` beside the folder,
and a second save of the same folder fails at once with `FolderLockedError`, saying which
process holds it. The kernel releases the lock when its process dies (even by SIGKILL), so a
crashed save never blocks the next one; the lock file is removed when the save ends.
Readers never take the lock: they always see one complete version.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: saves are not locked there
    fcntl = None


class FolderLockedError(OSError):
    """Another process is saving to the same folder right now."""


def lock_path(target: str | os.PathLike) -> Path:
    """The lock file of a folder: ``.<name>.lock`` beside it."""
    target = Path(target)
    return target.parent / f".{target.name}.lock"


@contextmanager
def folder_lock(target: str | os.PathLike) -> Iterator[None]:
    """Hold the exclusive save lock of ``target`` (a folder path) for the ``with`` block.

    Raises:
        FolderLockedError: another process holds it.
    """
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path = lock_path(target)
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as error:
            if error.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise PermissionError(
                error.errno,
                f"Cannot save {str(target)!r}: its parent folder {str(path.parent)!r} is not "
                "writable. A save writes the new version beside the folder (and a lock file "
                "there) and swaps it in, so it needs to write in the parent: make the parent "
                "writable, or save to a folder whose parent is writable.",
            ) from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(descriptor)
            os.close(descriptor)
            raise FolderLockedError(
                f"Another save is writing {str(target)!r} right now: two saves at once would "
                f"replace each other. It is {holder}; wait for it to finish and save again, or "
                "save to another folder."
            ) from None
        # The previous holder may have removed the file between our open and our lock: then
        # the lock we hold is on a file nobody else can find, so start again.
        try:
            same = os.fstat(descriptor).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(descriptor)
    try:
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"process {os.getpid()} on {socket.gethostname()}\n".encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):  # removed by hand
            os.unlink(path)  # while still locked, so no other process holds a lock on it
        os.close(descriptor)


def _read_holder(descriptor: int) -> str:
    try:
        text = os.pread(descriptor, 200, 0).decode(errors="replace").strip()
    except OSError:  # pragma: no cover
        text = ""
    return text or "an unknown process"
