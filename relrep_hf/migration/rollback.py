"""The way back from a migration, and what migrations leave: ``rollback_store`` serves a
store's original vectors again from the backup its migration kept (a database's backup
collection/table; a file store migrated in place keeps ``.NAME.backup-<time>-<hex>`` beside it,
a hard link, until cleanup), and
``cleanup_store`` lists (and removes) the backups, staging collections/tables and partial files
that migrations of one store left, never anything else.

A database kind restores in its own way, in one step (`DatabaseStore.restore`): pgvector and
sqlite-vec in one transaction (indexes, constraints, triggers and serial sequences given back to
the restored table), Chroma by two renames under the folder's lock, Qdrant by one alias switch.
A rollback that would lose rows written since the migration is refused unless forced.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
from pathlib import Path

from relrep_hf.migration.stores.base import (
    VectorStore,
    VectorStoreError,
    file_backup_prefix,
    open_store,
)
from relrep_hf.migration.stores.database import DATABASE_KINDS, DatabaseStore, recognises
from relrep_hf.migration.stores.npy import keep_current_space_record, space_sidecar
from relrep_hf.utils.io import _process_exists, fsync_directory
from relrep_hf.utils.locking import folder_lock

__all__ = ["cleanup_store", "rollback_store"]


def rollback_store(
    location: str | os.PathLike,
    *,
    backup: str | None = None,
    force: bool = False,
    column: str | None = None,
) -> str:
    """Serve the vectors a migration replaced at ``location`` (a database URI naming the
    migrated collection/table, a Qdrant alias, or a file store migrated in place) again;
    returns the backup restored.

    ``backup``: which one (default: the newest backup of that name; a Qdrant alias's first
    migration kept the original collection under its own name, so name it). The migrated
    vectors are removed (Qdrant: left unserved, for `cleanup_store`). Rows written since the
    migration (ids the backup lacks) refuse the rollback unless ``force``.
    """
    store = open_store(location, column=column)
    if not isinstance(store, DatabaseStore):
        return _restore_file(store, backup)
    if backup is None:
        backups = store.backups()
        if not backups:
            raise VectorStoreError(
                f"{store.describe()}: no backup of {store.location.name!r} found (backups are "
                f"named {store.location.name[:36]}_backup_TIME_HEX). Name one (backup=, --backup)."
            )
        backup = backups[-1]
    store.restore(backup, force=force)
    return backup


def cleanup_store(location: str | os.PathLike, *, remove: bool = False) -> list[str]:
    """The leftovers of migrations of the store at ``location``: a database's backups and
    staging (or rolled-back) collections/tables of that name, a file store's partial files and
    staging folders of runs that died. ``remove``: remove them too. Returns their names."""
    database = _is_database(location)
    if database:
        store = open_store(location)
        found = store.leftovers()
        for name in found if remove else ():
            store.remove(name)
        return found
    path = Path(os.path.abspath(location))
    found = _partial_files(path) + _file_backups(path)
    for path in found if remove else ():
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    return [str(path) for path in found]


def _file_backups(path: Path) -> list[Path]:
    """The backups in-place migrations of the file ``path`` kept beside it, oldest first."""
    return sorted(path.parent.glob(glob.escape(file_backup_prefix(path)) + "*"))


def _restore_file(store: VectorStore, backup: str | None) -> str:
    """A file store's newest (or named) backup renamed over it, in one step."""
    path = Path(os.path.abspath(store.path))
    backups = _file_backups(path) if path.is_file() else []
    chosen = next((b for b in backups if b.name == backup), None) if backup else None
    chosen = chosen or (backups[-1] if backups and backup is None else None)
    if chosen is None:
        raise VectorStoreError(
            f"{store.describe()}: no backup {backup or 'of it'} to roll back to: a file store "
            f"migrated in place keeps one ({file_backup_prefix(path)}TIME-HEX beside it) until "
            "cleanup, a folder store and one migrated into a new path keep none (the input is "
            "still there). Migrate the input again, or restore your own copy."
        )
    with folder_lock(path):
        os.replace(chosen, path)
        fsync_directory(path.parent)
        if space_sidecar(path).exists():  # the space recorded is the restored version's again
            keep_current_space_record(path)
    return chosen.name


def _is_database(location: str | os.PathLike) -> bool:
    return any(recognises(kind)(str(location)) for kind in DATABASE_KINDS)


def _partial_files(path: Path) -> list[Path]:
    """Partial files (``.NAME.partial-HOST-PID-...``) and staging folders (``.NAME.tmp-HOST-
    PID-...``) beside ``path`` whose run (a process of this machine) is gone."""
    found = []
    for kind in ("partial", "tmp"):
        prefix = f".{path.name}.{kind}-{socket.gethostname()}-"
        for candidate in path.parent.glob(glob.escape(prefix) + "*"):
            pid = candidate.name[len(prefix) :].split("-", 1)[0]
            if pid.isdigit() and not _process_exists(int(pid)):
                found.append(candidate)
    return sorted(found)
