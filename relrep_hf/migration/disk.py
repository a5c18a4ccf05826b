"""A full disk during a store's rewrite: a clear error, nothing left behind, the input intact.

The file stores write their new vectors through a memory map (`relrep_hf.migration.stores.npy`, `relrep_hf.migration.stores.safetensors`). A
map over a sparse file meets a full disk as SIGBUS, which kills the process (exit 135) and leaves
its partial file and lock behind. `reserve_space` allocates the file's blocks first
(``posix_fallocate``), after checking the free space, so a full disk is an `OSError` before any
byte is written, and the rewrite's usual cleanup runs. `sqlite_rolled_back` does the same for
an SQLite transaction: SQLite rolls a transaction back itself on SQLITE_FULL and some I/O errors,
and the ``ROLLBACK`` that follows then fails with "cannot rollback - no transaction is active",
which hid the real error.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["DiskFullError", "check_free_space", "reserve_space", "sqlite_rolled_back"]

# the errors of a write that found no room: the disk, a quota, the process's file size limit
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# SQLite's primary result codes for a full disk and for an I/O error (sqlite3.h)
SQLITE_FULL, SQLITE_IOERR = 13, 10


class DiskFullError(OSError):
    """A store's rewrite found no room on the disk; nothing was written, the input is intact.
    Its ``errno`` is ENOSPC; its text is the message alone."""

    def __init__(self, message: str):
        super().__init__(message)
        self.errno = errno.ENOSPC


def _size(count: int) -> str:
    """``123456789`` -> ``'123,456,789 bytes (117.7 MiB)'``."""
    return f"{count:,} bytes ({count / 2**20:.1f} MiB)"


def _no_room(what: str, folder: Path, needed: int, cause: str) -> DiskFullError:
    free = shutil.disk_usage(folder).free
    return DiskFullError(
        f"{what}: not enough room to write the new store: it needs {_size(needed)} more in "
        f"{str(folder)!r}, which has {_size(free)} free ({cause}). Nothing was written and the "
        "input is as it was: free space there, or write the new store to another disk.",
    )


def check_free_space(folder: str | os.PathLike, needed: int, what: str) -> None:
    """Refuse (`DiskFullError`) a write of ``needed`` bytes into ``folder`` when its disk has
    fewer free bytes; ``what``: the store, for the message."""
    folder = Path(folder)
    if needed > shutil.disk_usage(folder).free:
        raise _no_room(what, folder, needed, "checked before writing")


def reserve_space(file: BinaryIO, size: int, what: str) -> None:
    """Make the open ``file`` ``size`` bytes long with its blocks allocated (where it was
    shorter), so that writes through a memory map cannot meet a full disk (SIGBUS): the free
    space checked first, then ``os.posix_fallocate``. A full disk, a quota or the process's file
    size limit (``ulimit -f``) raise `DiskFullError` naming the bytes needed and free."""
    folder = Path(os.path.abspath(file.name)).parent
    descriptor = file.fileno()
    allocated = os.fstat(descriptor).st_blocks * 512
    check_free_space(folder, size - allocated, what)
    if size <= 0 or not hasattr(os, "posix_fallocate"):  # pragma: no cover - not on Linux
        file.truncate(max(size, 0))
        return
    try:
        os.posix_fallocate(descriptor, 0, size)
    except OSError as error:
        if error.errno not in _NO_ROOM:
            raise
        cause = (
            "the file size limit of this process, ulimit -f"
            if error.errno == errno.EFBIG
            else os.strerror(error.errno)
        )
        raise _no_room(what, folder, size - allocated, cause) from None


def _sqlite_code(error: BaseException) -> int | None:
    """The primary SQLite result code of a ``sqlite3`` (or ``sqlean``) error, if it has one."""
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def sqlite_rolled_back(connection: Any, error: BaseException, what: str, path: Path) -> None:
    """After ``error`` inside a transaction of ``connection``: roll it back if SQLite has not
    already (a failing ``ROLLBACK`` never replaces ``error``), and raise `DiskFullError` in place
    of SQLITE_FULL or an I/O error (naming the database's folder and its free space). Other
    errors are the caller's to raise again."""
    try:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
    except Exception:
        pass
    code = _sqlite_code(error)
    if code not in (SQLITE_FULL, SQLITE_IOERR):
        return
    size = path.stat().st_size if path.exists() else 0
    raise DiskFullError(
        f"{what}: SQLite could not write the database ({error}; "
        f"{'SQLITE_FULL' if code == SQLITE_FULL else 'SQLITE_IOERR'}), so the transaction was "
        f"rolled back and the table is as it was. The migration needs room for a copy of the "
        f"table beside it (the file is {_size(size)}); {str(path.parent)!r} has "
        f"{_size(shutil.disk_usage(path.parent).free)} free: free space there (or raise the "
        "process's file size limit, ulimit -f) and run it again.",
    ) from error
