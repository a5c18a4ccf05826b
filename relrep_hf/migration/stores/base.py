"""What every store kind shares: stored vectors read and rewritten in chunks, the I/O of an
embedding migration at scale.

A kind of store is one `StoreKind` entry of `STORE_KINDS`: its name, whether a location (a
path, or a URI for a database) is one, and how to open it. Each of the package's kinds is one
module of this package declaring its ``KIND`` (`relrep_hf.migration.stores.npy`, ``parquet``,
...), registered in one place, `relrep_hf.migration.stores.register_builtin_store_kinds`; a
user's kind is one `register_store_kind` call (`unregister_store_kind` takes it out).
`rewrite_store` streams a store through ``transform`` (``[n, d_in] -> [n, d_out]``, one chunk at
a time) into a new store of the same kind, carrying every other column (ids, texts) and
tensor over. The new store is written beside its final name and renamed into place only when
complete, so a killed run leaves no half-written store and an existing one untouched; an
existing output is refused unless ``overwrite``, and even then only a store of the input's kind
is replaced. One output is written by one run at a time (a lock beside it), and the partial
files of killed runs are removed by the next run. Every chunk is checked for NaN and infinite
values twice: as read, and as written (after the cast to the output's dtype, so a float16 store
whose mapped values exceed float16 is refused, not filled with inf; ``dtype`` asks for a wider
output). `open_store` opens the store at a location, whatever its kind.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from relrep_hf.migration.plan import StorePlan
from relrep_hf.migration.space import StoreSpace
from relrep_hf.utils.io import _process_exists, atomic_directory, fsync_directory, fsync_file
from relrep_hf.utils.locking import folder_lock
from relrep_hf.utils.registry import Registry

__all__ = [
    "STORE_KINDS",
    "StoreKind",
    "VectorStore",
    "VectorStoreError",
    "check_rows_finite",
    "check_written_rows_finite",
    "kept_rows",
    "open_store",
    "records_space",
    "register_store_kind",
    "rewrite_store",
    "store_kind",
    "unregister_store_kind",
]

# ``transform(chunk [n, d_in]) -> [n, d_out]``; a store may pass ``out`` ([n, d_out] of its
# dtype, e.g. a slice of a memory-mapped output file) to be written in place and returned
Transform = Callable[..., np.ndarray]
DEFAULT_CHUNK_ROWS = 32768
FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


class VectorStoreError(ValueError):
    """A store cannot be read or written as asked; the message names it and says what to do."""


@dataclass(frozen=True)
class StoreKind:
    """One kind of store: ``recognises(location)`` says whether a location (a path, or a URI)
    names a store of this kind; ``open(location, column=, table=)`` opens it as a
    `VectorStore`; ``help`` is the phrase errors and ``--help`` list it by."""

    name: str
    recognises: Callable[[str], bool]
    open: Callable[..., VectorStore]
    help: str


# name -> kind, in the order errors list them; the package's own kinds are registered by
# `relrep_hf.migration.stores.register_builtin_store_kinds`, when the package is first imported
STORE_KINDS: Registry[StoreKind] = Registry("store kind")


def register_store_kind(kind: StoreKind) -> StoreKind:
    """Add ``kind``: `open_store`, `migrate_store` and ``relrep-hf migrate`` then take it (a
    ValueError if its name is taken)."""
    if not isinstance(kind, StoreKind):
        raise ValueError(
            f"register_store_kind takes a StoreKind, got {type(kind).__name__}: pass "
            "StoreKind(name, recognises, open, help)."
        )
    return STORE_KINDS.register(kind)


def unregister_store_kind(name: str) -> StoreKind:
    """Take the kind ``name`` out of `STORE_KINDS` (a ValueError listing the registered kinds if
    there is none of that name) and return it."""
    return STORE_KINDS.unregister(name)


def has_suffix(*suffixes: str) -> Callable[[str], bool]:
    """A `StoreKind.recognises` for files of these suffixes (``".npy"``)."""
    return lambda location: Path(location).suffix in suffixes


def folder_with(test: Callable[[Path], bool]) -> Callable[[str], bool]:
    """A `StoreKind.recognises` for existing folders that pass ``test``."""
    return lambda location: Path(location).is_dir() and test(Path(location))


def existing_path(opener: Callable[..., VectorStore]) -> Callable[..., VectorStore]:
    """A `StoreKind.open` of a path: ``opener(Path, column=, table=)``, with the "no such file"
    error before anything is read."""

    def open_path(location: str | os.PathLike, **kw) -> VectorStore:
        if not Path(location).exists():
            raise VectorStoreError(f"{str(location)!r}: no such file or folder.")
        return opener(Path(location), **kw)

    return open_path


class VectorStore:
    """One readable store of ``rows`` vectors of ``dim`` dimensions (``dtype``)."""

    kind: str = ""
    path: Path
    rows: int
    dim: int
    dtype: np.dtype
    # the dtypes this kind can write (``dtype=`` of `rewrite_store`); FAISS: float32 only
    output_dtypes: tuple[np.dtype, ...] = FLOAT_DTYPES
    # whether the kind records the space of its vectors (`read_space`; its ``write`` and
    # ``rewrite_into`` then take ``space=``, a `relrep_hf.migration.space.StoreSpace`); set by
    # the class that defines ``write`` (`records_space`: a subclass writing otherwise does not)
    records_space: bool = False
    # a kind that holds text besides its vectors (``fields()`` and ``values(name, chunk_rows)``,
    # in the order its rewrite reads its rows) is re-embedded from the field ``text_field`` and
    # names its rows by ``id_field`` unless told otherwise (`relrep_hf.migration.reembed`)
    text_field: str = "text"
    id_field: str = "id"

    def read_space(self) -> StoreSpace | None:
        """The space the store records its vectors are in; ``None``: unrecorded (a kind that
        keeps no record, or a store written before records were kept)."""
        return None

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        """The vectors, ``[<= chunk_rows, dim]`` at a time, in order."""
        raise NotImplementedError

    def write(
        self,
        staging: Path,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        dtype: np.dtype | None = None,
    ) -> None:
        """Write the transformed store (``dim``-d vectors of ``dtype``, default the store's own;
        everything else as it was) at ``staging`` (a new file path, or an empty folder for
        folder stores)."""
        raise NotImplementedError

    def rewrite_into(
        self,
        out: str | os.PathLike,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        overwrite: bool = False,
        dtype: np.dtype | None = None,
        space: StoreSpace | None = None,
        skip: np.ndarray | None = None,
    ) -> Path | str:
        """Write the transformed store aside and swap it in at ``out`` in one step, so a reader
        never sees half of it and a killed run leaves ``out`` as it was. Files and folders are
        written beside ``out`` and renamed (`write`); a database store overrides this with its
        own way (a new collection or table, then an alias switch or a renaming transaction).
        ``dtype``: the new vectors' dtype (passed only when it differs from the store's).
        ``space``: the new vectors' space (given only to kinds that `records_space`).
        ``skip``: the sorted positions (in the read order) of rows the new store leaves out,
        given only to kinds that hold text (a re-embed's rows without text, ``skip_missing``):
        ``transform`` then sees only the rows kept."""
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        return rewrite_file_or_folder(
            self, Path(out), transform, dim, chunk_rows, overwrite, dtype, space, skip
        )

    def record_beside(self, out: Path, space: StoreSpace | None) -> None:
        """Record ``space`` for the file just swapped in at ``out``, where the format has no
        metadata slot of its own (a .npy file: a sidecar)."""

    def plan(self, out: str | os.PathLike, dim: int) -> StorePlan:
        """What rewriting this store into ``out`` with ``dim``-d vectors carries, and what it
        cannot (a database kind lists its own: row-level security, triggers, ...)."""
        in_place = Path(out).exists() and os.path.samefile(out, self.path)
        return StorePlan(self.describe(), str(out), in_place, ["every other column and tensor"])

    def read_all(self) -> np.ndarray:
        """Every vector, ``[rows, dim]`` (small stores: evaluation, tests)."""
        parts = list(self.chunks())
        return np.concatenate(parts) if parts else np.empty((0, self.dim), self.dtype)

    def describe(self) -> str:
        return f"{self.kind} store {str(self.path)!r} ({self.rows} x {self.dim} {self.dtype})"


def kept_rows(skip: np.ndarray, start: int, count: int) -> np.ndarray | None:
    """Which of the rows ``start .. start + count`` (in a rewrite's read order) it writes:
    ``skip`` holds the sorted positions of the rows it leaves out (a re-embed's rows without
    text); None where it writes all of them."""
    low, high = np.searchsorted(skip, [start, start + count])
    if low == high:
        return None
    keep = np.ones(count, dtype=bool)
    keep[skip[low:high] - start] = False
    return keep


def records_space(store: VectorStore) -> bool:
    """Whether ``store``'s writer records the new vectors' space: the class that defines its
    ``write`` (or ``rewrite_into``) says so itself, so a registered kind that subclasses one of
    the package's and writes its own way is not handed a ``space`` it does not take."""
    for klass in type(store).__mro__:
        if "write" in vars(klass) or "rewrite_into" in vars(klass):
            return bool(vars(klass).get("records_space", False))
    return False


def store_kind(location: str | os.PathLike) -> str:
    """The name of the registered kind of store at (or meant for) ``location``."""
    for kind in STORE_KINDS.values():
        if kind.recognises(str(location)):
            return kind.name
    kinds = ", ".join(kind.help for kind in STORE_KINDS.values())
    raise VectorStoreError(
        f"{str(location)!r}: not a vector store relrep_hf reads. Give one of: {kinds}."
    )


def open_store(
    location: str | os.PathLike, *, column: str | None = None, table: str | None = None
) -> VectorStore:
    """The store at ``location`` (a path, or the URI of a database of a registered kind).
    ``column``: the vector column of a parquet file, datasets folder or LanceDB table (default:
    ``embedding``, ``embeddings`` or ``vector``, whichever exists); for a safetensors file, the
    tensor's name. ``table``: the LanceDB table (default: the only one)."""
    try:
        name = store_kind(location)
    except VectorStoreError:
        if not Path(location).exists():
            raise VectorStoreError(f"{str(location)!r}: no such file or folder.") from None
        raise
    return STORE_KINDS[name].open(location, column=column, table=table)


def check_rows_finite(chunk: np.ndarray, start: int, store: VectorStore) -> None:
    """Raise naming the store and the first rows of ``chunk`` (rows from ``start``) that hold
    NaN or infinite values."""
    bad = _bad_rows(chunk)
    if bad is None:
        return
    raise VectorStoreError(
        f"{store.describe()}: {len(bad)} row(s) of the chunk from row {start} hold NaN or "
        f"infinite values (rows {_row_list(bad, start)}). Re-embed or drop those rows first; "
        "nothing was written."
    )


def check_written_rows_finite(chunk: np.ndarray, start: int, store: VectorStore) -> None:
    """Raise naming the rows (from ``start``) whose migrated values, as written (``chunk``, in
    the output's dtype), are NaN or infinite although the vectors read were finite."""
    bad = _bad_rows(chunk)
    if bad is None:
        return
    wider = [t for t in store.output_dtypes if t.itemsize > chunk.dtype.itemsize]
    advice = (
        f"Write a wider store: dtype={str(wider[0])!r} (--dtype {wider[0]}), or check the "
        "map's weights."
        if wider
        else "Check the map's weights: they are too large for these vectors."
    )
    raise VectorStoreError(
        f"{store.describe()}: the migrated values of {len(bad)} row(s) of the chunk from row "
        f"{start} overflow {chunk.dtype} (rows {_row_list(bad, start)}), although the vectors "
        f"read are finite. {advice} Nothing was written."
    )


def _bad_rows(chunk: np.ndarray) -> np.ndarray | None:
    finite = np.isfinite(chunk)
    return None if finite.all() else np.flatnonzero(~finite.all(axis=1))


def _row_list(bad: np.ndarray, start: int) -> str:
    return ", ".join(str(start + int(i)) for i in bad[:5]) + (", ..." if len(bad) > 5 else "")


def _checked_transform(
    store: VectorStore,
    transform: Transform,
    dim: int,
    dtype: np.dtype,
    progress: Callable[[int], None] | None,
) -> Transform:
    """``transform`` with its input and its output (cast to ``dtype``, the output's) checked."""
    position = 0

    def apply(chunk: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        nonlocal position
        check_rows_finite(chunk, position, store)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
            out = transform(chunk) if out is None else transform(chunk, out)
            if out.shape != (len(chunk), dim):
                raise RuntimeError(f"The transform gave {out.shape}, expected {(len(chunk), dim)}.")
            out = out.astype(dtype, copy=False)
        check_written_rows_finite(out, position, store)
        position += len(chunk)
        if progress is not None:
            progress(len(chunk))
        return out

    return apply


def _check_dtype(store: VectorStore, dtype: object) -> np.dtype:
    try:
        wanted = np.dtype(dtype)
    except TypeError:
        wanted = None
    if wanted not in store.output_dtypes:
        kinds = ", ".join(str(t) for t in store.output_dtypes)
        raise VectorStoreError(
            f"{store.describe()}: cannot write vectors of dtype {dtype!r}; a {store.kind} store "
            f"holds {kinds}. Give one of those (--dtype)."
        )
    return wanted


def rewrite_store(
    store: VectorStore,
    out: str | os.PathLike,
    transform: Transform,
    dim: int,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    overwrite: bool = False,
    show_progress: bool | None = None,
    dtype: object = None,
    force: bool = False,
    space: StoreSpace | None = None,
) -> Path | str:
    """Stream ``store`` through ``transform`` into a new store of the same kind at ``out``.

    Written aside first and swapped in only once complete and durable
    (`VectorStore.rewrite_into`); on any error the partial output is removed and ``out``
    (which may be the input itself, with ``overwrite``) is left as it was. Every chunk is
    checked for NaN and infinite values as read and as written. ``dtype``: the new vectors'
    dtype (default: the store's; one of ``store.output_dtypes``). ``show_progress``: a tqdm
    bar over rows (None: only on a terminal). What the rewrite cannot carry (`store.plan
    <VectorStore.plan>`) is refused first, unless ``force``. ``space``: the space of the new
    vectors, recorded in the new store where its kind `records_space` (any old record is
    dropped either way).
    """
    from tqdm.auto import tqdm

    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int, got {chunk_rows!r}.")
    wanted = store.dtype if dtype is None else _check_dtype(store, dtype)
    store.plan(out, dim).check(force=force)
    extra = {} if wanted == store.dtype else {"dtype": wanted}  # kinds without dtype= still work
    if records_space(store):
        extra["space"] = space
    disable = None if show_progress is None else not show_progress
    with tqdm(
        total=store.rows, unit="rows", desc=f"migrating {store.path.name}", disable=disable
    ) as bar:
        apply = _checked_transform(store, transform, dim, wanted, bar.update)
        return store.rewrite_into(out, apply, dim, chunk_rows, overwrite=overwrite, **extra)


def _check_output(store: VectorStore, out: Path, overwrite: bool) -> None:
    """``out`` may be written: new (with the kind's suffix), or, with ``overwrite``, a store of
    the input's kind (never another file or folder)."""
    same = out.exists() and store.path.exists() and os.path.samefile(out, store.path)
    if not out.exists():
        try:
            kind = store_kind(out)
        except VectorStoreError:  # no kind's name: a new folder is one, a new file is not
            kind = None if store.path.is_dir() else f"a file named {out.name!r}"
        if kind not in (None, store.kind):
            raise VectorStoreError(
                f"{str(out)!r}: the output must be a store of the input's kind ({store.kind}, "
                f"{str(store.path)!r}), not {kind}. Give a path with the input's suffix."
            )
        return
    if not overwrite:
        raise VectorStoreError(
            f"{str(out)!r} exists already; nothing was written. Give a new path, or pass "
            "overwrite (--overwrite) to replace it once the new store is complete."
        )
    column = getattr(store, "column", None) or getattr(store, "name", None)
    if not same and not _is_store_of(out, store.kind, column, getattr(store, "table_name", None)):
        raise VectorStoreError(
            f"{str(out)!r} exists and is not a store of the input's kind ({store.kind}): "
            "overwrite (--overwrite) replaces only such a store, never another file or folder. "
            "Nothing was written; give a new path, or remove it yourself if it may go."
        )


def _is_store_of(path: Path, kind: str, column: str | None, table: str | None) -> bool:
    """``path`` is a readable store of ``kind`` (opened as the input was: its column, table)."""
    try:
        if store_kind(path) != kind:
            return False
        STORE_KINDS[kind].open(path, column=column, table=table)
    except (VectorStoreError, OSError):
        return False
    return True


def rewrite_file_or_folder(
    store: VectorStore,
    out: Path,
    apply: Transform,
    dim: int,
    chunk_rows: int,
    overwrite: bool,
    dtype: np.dtype,
    space: StoreSpace | None = None,
    skip: np.ndarray | None = None,
) -> Path:
    """A file or folder store's `VectorStore.rewrite_into`: written beside ``out`` (a file, or
    a staging folder) and renamed into place, one run at a time (the lock beside ``out``);
    ``space`` recorded in it (`records_space`); the rows at ``skip`` left out (`write` takes
    ``skip=`` then)."""
    given, out = out, Path(os.path.abspath(out))
    _check_output(store, out, overwrite)
    extra = {} if dtype == store.dtype else {"dtype": dtype}
    if records_space(store):
        extra["space"] = space
    if skip is not None and len(skip):
        extra["skip"] = skip

    def write(path: Path) -> None:
        store.write(path, apply, dim, chunk_rows, **extra)

    if store.path.is_dir():
        with atomic_directory(out) as staging:  # holds the lock; removes dead runs' staging
            _check_output(store, out, overwrite)  # again: another run may have finished
            write(staging)
        return given
    out.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(out):  # a second run on the same out fails at once (FolderLockedError)
        _remove_stale_partials(out)
        _check_output(store, out, overwrite)
        in_place = out.exists() and os.path.samefile(out, store.path)
        _write_file_aside(out, write, overwrite, keep=in_place)
        if records_space(store):
            store.record_beside(out, space)
    return given


def _partial_prefix(out: Path) -> str:
    """``.<name>.partial-<host>-``: this machine's partial files of ``out``."""
    return f".{out.name}.partial-{socket.gethostname()}-"


def _remove_stale_partials(out: Path) -> None:
    """Remove the partial files that killed runs of this machine left beside ``out`` (their
    pid is dead); a live run's are left alone (and cannot exist: the caller holds the lock)."""
    prefix = _partial_prefix(out)
    for candidate in out.parent.glob(glob.escape(prefix) + "*"):
        pid = candidate.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not _process_exists(int(pid)):
            candidate.unlink(missing_ok=True)


def file_backup_prefix(out: Path) -> str:
    """``.<name>.backup-``: the backups of ``out`` that in-place migrations kept beside it."""
    return f".{out.name}.backup-"


def _write_file_aside(
    out: Path, write: Callable[[Path], None], overwrite: bool, *, keep: bool = False
) -> None:
    """``write(path)`` a file beside ``out``, then give it the name ``out`` (over an existing
    one only with ``overwrite``: `_link_new`); a failed write leaves nothing behind. ``keep``:
    the replaced file stays beside it as ``.<name>.backup-<time>-<hex>`` (a hard link: no
    copy) until ``relrep-hf cleanup`` removes it or ``relrep-hf rollback`` restores it."""
    staging = out.with_name(
        f"{_partial_prefix(out)}{os.getpid()}-{secrets.token_hex(4)}{out.suffix}"
    )
    try:
        write(staging)
        fsync_file(staging)
        if overwrite:
            if keep:
                _keep_backup(out)
            os.replace(staging, out)
        else:  # never over a file that appeared meanwhile (a link fails where a name exists)
            _link_new(staging, out)
    except BaseException:
        if staging.is_dir():
            shutil.rmtree(staging, ignore_errors=True)
        staging.unlink(missing_ok=True)
        raise
    fsync_directory(out.parent)


def _keep_backup(out: Path) -> None:
    stamp = f"{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(2)}"
    backup = out.with_name(f"{file_backup_prefix(out)}{stamp}{out.suffix}")
    try:
        os.link(out, backup)
    except OSError:  # a file system without hard links: a copy
        shutil.copy2(out, backup)


def _link_new(staging: Path, out: Path) -> None:
    """Give ``staging`` the name ``out`` only if no file has it (``os.link`` fails where a name
    exists, unlike a rename); where links are not supported, a rename under the lock."""
    try:
        os.link(staging, out)
    except FileExistsError:
        raise VectorStoreError(
            f"{str(out)!r} appeared while the store was written; nothing was written. Give a "
            "new path, or pass overwrite (--overwrite)."
        ) from None
    except OSError:  # a file system without hard links
        if out.exists():
            raise VectorStoreError(f"{str(out)!r} appeared while the store was written.") from None
        os.replace(staging, out)
        return
    staging.unlink()
