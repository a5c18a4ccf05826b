"""What the database stores a migration rewrites share: Qdrant (local mode), Chroma (a persistent
client's folder), pgvector on PostgreSQL and sqlite-vec, one module and `StoreKind` entry each
(`relrep_hf.migration.stores.qdrant`, ``chroma``, ``pgvector``, ``sqlite_vec``).

A database store is named by a URI a user can type on the command line:

- ``qdrant:PATH#COLLECTION`` (a Qdrant local-mode folder; the collection or its alias),
- ``chroma:PATH#COLLECTION`` (a Chroma ``PersistentClient`` folder),
- ``sqlite-vec:PATH#TABLE`` (an SQLite file; a ``vec0`` table or a table with a BLOB column),
- ``postgresql://USER@HOST:PORT/DB?table=TABLE&column=COLUMN`` (pgvector; ``postgres://`` too,
  and ``host=/socket/folder`` for a Unix socket).

The ``--table`` and ``--column`` flags (``table=``, ``column=``) stand in for a missing
collection/table and vector column. The output names the same database and the collection or
table searches use: the new vectors are written aside, checked (count and ids), and swapped in
(a Qdrant alias switch, a PostgreSQL or SQLite transaction, a Chroma rename), the replaced one
kept under a backup name the result reports (`MigratedLocation.backup`). The client packages
are optional (``pip install 'relrep-hf[stores]'``), imported when a store of theirs is opened.
"""

from __future__ import annotations

import importlib
import itertools
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import numpy as np

from relrep_hf.migration.plan import StorePlan
from relrep_hf.migration.space import SPACE_KEY, StoreSpace
from relrep_hf.migration.stores.base import VectorStore, VectorStoreError
from relrep_hf.utils.locking import FolderLockedError, folder_lock, lock_path

__all__ = [
    "DatabaseLocation",
    "MigratedLocation",
    "StoreBusyError",
    "backup_name",
    "backups_of",
    "database_opener",
    "metadata_with_space",
    "parse_location",
    "require",
    "space_in_metadata",
    "stagings_of",
]

PATH_SCHEMES = {"qdrant": "a Qdrant local-mode folder", "chroma": "a Chroma persistent folder",
                "sqlite-vec": "an SQLite file"}  # fmt: skip
POSTGRES_SCHEMES = ("postgresql", "postgres")
DATABASE_KINDS = ("qdrant", "chroma", "pgvector", "sqlite-vec")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,62}")


class StoreBusyError(VectorStoreError):
    """Another migration (or writer) holds the store; this one wrote nothing."""


class MigratedLocation(str):
    """The output location of a database migration (a str, as a file store's is a path), with
    ``backup``: the name the replaced collection or table was kept under (None if none was)."""

    backup: str | None

    def __new__(cls, location: str, backup: str | None = None) -> MigratedLocation:
        made = super().__new__(cls, location)
        made.backup = backup
        return made


@dataclass(frozen=True)
class DatabaseLocation:
    """A parsed database URI: ``kind``, ``database`` (a folder or file path, or a PostgreSQL
    connection string without our own parameters), ``name`` (the collection or table, None if
    unnamed) and ``column`` (the vector column, if named)."""

    kind: str
    database: str
    name: str | None
    column: str | None = None

    def with_name(self, name: str) -> str:
        """This database's URI naming ``name`` (as ``--out`` would)."""
        if self.kind == "pgvector":
            scheme, netloc, path, query, _ = urlsplit(self.database)
            params = [*parse_qsl(query), ("table", name)]
            params += [("column", self.column)] if self.column else []
            return urlunsplit((scheme, netloc, path, urlencode(params, quote_via=quote), ""))
        return f"{self.kind}:{self.database}#{name}"

    def shown(self) -> str:
        """The URI as errors show it: a PostgreSQL password replaced by ``***``."""
        uri = self.with_name(self.name or "")
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", uri)


def _scheme(location: str) -> str | None:
    match = re.match(r"([a-z][a-z0-9+\-]*):", location)
    return match.group(1) if match else None


def recognises(kind: str) -> Callable[[str], bool]:
    schemes = POSTGRES_SCHEMES if kind == "pgvector" else (kind,)
    return lambda location: _scheme(str(location)) in schemes


def parse_location(
    location: str, *, table: str | None = None, column: str | None = None
) -> DatabaseLocation:
    """``location`` (a database URI, see the module) parsed; ``table`` and ``column`` fill in
    what the URI leaves out (the URI wins where both name one and they differ: an error)."""
    location = str(location)
    scheme = _scheme(location)
    if scheme in POSTGRES_SCHEMES:
        split = urlsplit(location)
        params = dict(parse_qsl(split.query))
        named, named_column = params.pop("table", None), params.pop("column", None)
        database = urlunsplit((*split[:3], urlencode(params, quote_via=quote), ""))
        kind = "pgvector"
    elif scheme in PATH_SCHEMES:
        rest = location[len(scheme) + 1 :]
        path, _, named = rest.partition("#")
        named_column = None
        if path.startswith("//"):  # qdrant:///abs/path, as a URL would write it
            path = path[2:]
        if not path:
            raise VectorStoreError(f"{location!r}: no path; write {scheme}:PATH#NAME.")
        database, kind = str(Path(path).expanduser().resolve()), scheme
    else:
        raise VectorStoreError(f"{location!r}: not a database URI relrep_hf reads.")
    name = _one(location, "table/collection", named or None, table)
    column = _one(location, "column", named_column, column)
    if name is not None and not NAME.fullmatch(name):
        raise VectorStoreError(
            f"{location!r}: {name!r} is not a collection/table name relrep_hf writes (letters, "
            "digits, '_' and '-', starting with a letter or '_', at most 63 characters)."
        )
    return DatabaseLocation(kind, database, name, column)


def _one(location: str, what: str, in_uri: str | None, given: str | None) -> str | None:
    if in_uri and given and in_uri != given:
        raise VectorStoreError(
            f"{location!r} names {what} {in_uri!r} and the flag names {given!r}: give one."
        )
    return in_uri or given


def output_name(
    store: DatabaseStore, out: str, overwrite: bool, exists: Callable[[str], bool]
) -> tuple[str, bool]:
    """The collection/table ``out`` names in ``store``'s database, refused if ``out`` is
    another kind or database, names nothing, or exists (``exists(name)``) and ``overwrite`` is
    not given; and whether it exists."""
    target = parse_location(out) if recognises(store.kind)(out) else None
    if target is None or target.kind != store.kind or target.database != store.location.database:
        raise VectorStoreError(
            f"{str(out)!r}: the output of {store.describe()} must name a collection/table of "
            f"the same database ({store.location.with_name('NAME')}). The new vectors are "
            "written there aside and swapped in; copy them to another database afterwards."
        )
    if target.name is None:
        raise VectorStoreError(f"{str(out)!r}: name the collection/table to write (#NAME).")
    found = exists(target.name)
    if found and not overwrite:
        raise VectorStoreError(
            f"{str(out)!r} exists already; nothing was written. Pass overwrite (--overwrite) to "
            "swap the new vectors in (the replaced ones are kept under a backup name), or "
            "give a new name."
        )
    if found and target.name != store.location.name:
        raise VectorStoreError(
            f"{str(out)!r}: the output exists and is not the input; give a new name, or the "
            "input's own to swap the new vectors in there."
        )
    return target.name, found


# The 4 hex digits after a backup's time (a PostgreSQL name holds 63 bytes): counted from a random
# start, so that one process never draws the same twice within a second (16 random bits each
# collided in 20 calls about once in 350 runs), and two processes rarely do.
_BACKUP_SUFFIXES = itertools.count(secrets.randbelow(1 << 16))


def backup_name(name: str) -> str:
    """The name a replaced collection/table is kept under: ``NAME_backup_YYYYmmddHHMMSS_<hex>``
    (unique even for two runs within one second)."""
    suffix = next(_BACKUP_SUFFIXES) % (1 << 16)
    return f"{name[:36]}_backup_{time.strftime('%Y%m%d%H%M%S')}_{suffix:04x}"


# what `backup_name` and `staging_name` make of a name (the name cut to 36 characters), and
# what a rollback calls the migrated vectors it puts aside on its way
BACKUP = r"_backup_\d{14}(?:_[0-9a-f]{4})?"
STAGING = r"_migrating_[0-9a-f]{8}"
ROLLED_BACK = r"_rolledback_[0-9a-f]{8}"


def backups_of(name: str, names: list[str]) -> list[str]:
    """The backups among ``names`` that migrations of ``name`` kept, oldest first."""
    pattern = re.compile(re.escape(name[:36]) + BACKUP)
    return sorted((n for n in names if pattern.fullmatch(n)), key=lambda n: n[len(name[:36]) + 8 :])


def stagings_of(name: str, names: list[str]) -> list[str]:
    """The staging collections/tables among ``names`` that killed migrations (and rollbacks)
    of ``name`` left."""
    pattern = re.compile(re.escape(name[:36]) + f"(?:{STAGING}|{ROLLED_BACK})")
    return sorted(n for n in names if pattern.fullmatch(n))


def rolled_back_name(name: str) -> str:
    """The name a rollback puts the migrated collection/table under before it removes it."""
    return f"{name[:36]}_rolledback_{secrets.token_hex(4)}"


def check_nothing_new(store: DatabaseStore, new_ids: list, backup: str, force: bool) -> None:
    """Refuse a rollback that would lose rows written since the migration (ids the served
    store holds and the backup does not), unless ``force``."""
    if new_ids and not force:
        shown = ", ".join(map(str, new_ids[:5])) + (", ..." if len(new_ids) > 5 else "")
        raise VectorStoreError(
            f"{store.describe()}: {len(new_ids)} row(s) were written since the migration (ids "
            f"{shown}) and are not in the backup {backup!r}: a rollback would lose them. Nothing "
            "was changed. Re-embed them after the rollback and pass force=True (--force)."
        )


def staging_name(name: str) -> str:
    """The name the new vectors are written under before they are swapped in (a killed run's
    leftover never collides with the next run's)."""
    return f"{name[:36]}_migrating_{secrets.token_hex(4)}"


def require(module: str, package: str) -> object:
    """Import ``module`` of the optional ``package``, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise VectorStoreError(
            f"This store needs the {package} package: pip install 'relrep-hf[stores]' (or pip "
            f"install {package})."
        ) from None


def check_copied(
    store: DatabaseStore, rows: int, ids_equal: bool, where: str, skipped: int = 0
) -> None:
    """Refuse the swap unless the new collection/table holds every row (but the ``skipped``
    ones a re-embed leaves out), with the same ids."""
    expected = store.rows - skipped
    if rows != expected or not ids_equal:
        but = f" (all but the {skipped} left out)" if skipped else ""
        raise VectorStoreError(
            f"{store.describe()}: the new {where} holds {rows} rows (ids "
            f"{'equal' if ids_equal else 'differ'}), expected {expected}{but} with the same "
            "ids; nothing was swapped in. Was the store written to during the migration?"
        )


def skipped_positions(skip: np.ndarray | None) -> np.ndarray:
    """``skip`` (a rewrite's positions of rows left out) as a sorted int64 array."""
    return np.unique(np.asarray([] if skip is None else skip, dtype=np.int64))


def metadata_with_space(metadata: dict | None, space: StoreSpace | None) -> dict | None:
    """A collection's ``metadata`` with its record of the space (``relrep_hf.space``: the
    record's JSON) replaced by ``space``'s, or dropped; None where nothing is left (Chroma
    refuses empty metadata)."""
    kept = {k: v for k, v in (metadata or {}).items() if k != SPACE_KEY}
    if space is not None:
        kept[SPACE_KEY] = space.to_json()
    return kept or None


def space_in_metadata(metadata: dict | None, where: str) -> StoreSpace | None:
    """The space a collection's ``metadata`` records (None: unrecorded)."""
    record = (metadata or {}).get(SPACE_KEY)
    return None if record is None else StoreSpace.from_json(record, where=where)


class DatabaseStore(VectorStore):
    """A store in a database: ``location`` (a `DatabaseLocation`) names it."""

    location: DatabaseLocation
    # the four databases hold float32 vectors (pgvector's vector, sqlite-vec's float[d],
    # Chroma's and Qdrant's points): another dtype is refused before anything is written
    output_dtypes = (np.dtype(np.float32),)

    def describe(self) -> str:
        return (
            f"{self.kind} store {self.location.shown()!r} ({self.rows} x {self.dim} {self.dtype})"
        )

    def in_place(self, out: str | object) -> bool:
        """``out`` names this store's own collection/table (a rewrite in place)."""
        try:
            target = parse_location(str(out))
        except VectorStoreError:
            return False
        here = self.location
        return (target.kind, target.database, target.name) == (here.kind, here.database, here.name)

    def plan(self, out: str | object, dim: int) -> StorePlan:
        return StorePlan(self.describe(), str(out), self.in_place(out), list(self.carries))

    # what every rewrite of the kind carries (the plan's first lines)
    carries: tuple[str, ...] = ("ids and every other field",)

    @contextmanager
    def run_lock(self) -> Iterator[None]:
        """Hold this collection/table for a whole re-embed (embedding and swap): a second run
        on it fails at once with `StoreBusyError`, naming the process that holds it. Here a
        lock file beside the database's folder or file (``.NAME.COLLECTION.run.lock``), which
        the kernel releases when its process dies; pgvector: an advisory lock of the server."""
        database = Path(self.location.database)
        target = database.with_name(f"{database.name}.{self.location.name}.run")
        with ExitStack() as held:
            try:
                held.enter_context(folder_lock(target))
            except FolderLockedError:
                try:
                    holder = lock_path(target).read_text().strip()
                except OSError:  # it ended meanwhile
                    holder = ""
                raise self.busy(holder or "a process that has ended since") from None
            yield

    def busy(self, holder: str) -> StoreBusyError:
        """The refusal of a second run while ``holder`` (a process, named) re-embeds the store."""
        return StoreBusyError(
            f"{self.describe()}: another re-embed of it is running ({holder}); nothing was "
            "embedded or written. Wait for it to finish (or stop it, then go on from its "
            "committed chunks with --resume); one run at a time writes a store."
        )

    def names(self) -> list[str]:
        """Every collection/table name of the database."""
        raise NotImplementedError

    def backups(self) -> list[str]:
        """The backups migrations of this store kept, oldest first."""
        return backups_of(self.location.name, self.names())

    def leftovers(self) -> list[str]:
        """The backups and staging collections/tables that migrations of this store left."""
        everything = self.names()
        name = self.location.name
        return backups_of(name, everything) + stagings_of(name, everything)

    def remove(self, name: str) -> None:
        """Drop the collection/table ``name`` (one of `leftovers`)."""
        raise NotImplementedError

    def restore(self, backup: str, *, force: bool = False) -> None:
        """Serve ``backup``'s vectors under the store's name again, in one step; the migrated
        ones are removed (see `relrep_hf.migration.rollback`)."""
        raise VectorStoreError(f"{self.describe()}: a {self.kind} store cannot be rolled back.")

    def missing(self, what: str, found: list[str]) -> VectorStoreError:
        shown = ", ".join(sorted(found)[:20]) or "none"
        return VectorStoreError(
            f"{self.location.shown()!r}: no {what} {self.location.name!r} in "
            f"{self.location.database if self.kind != 'pgvector' else 'the database'} "
            f"(it has: {shown}). Name one of them (#NAME, or --table)."
        )


def database_opener(
    store_class: Callable[[DatabaseLocation], VectorStore],
) -> Callable[..., VectorStore]:
    """A `StoreKind.open` of a database URI: the location parsed (``table=`` and ``column=``
    fill in what it leaves out), then ``store_class(location)``."""

    def open_database(location: str, *, column: str | None = None, table: str | None = None):
        return store_class(parse_location(location, table=table, column=column))

    return open_database
