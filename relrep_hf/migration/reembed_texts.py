"""The texts a re-embed reads (`relrep_hf.migration.reembed`): a store's text column or field
(parquet, datasets, LanceDB columns; a Chroma collection's documents; a Qdrant payload field; a
pgvector or sqlite-vec column), or a file of ``id, text`` joined on the store's ids, in the
order the store's rewrite reads its rows. Rows whose text is missing, empty or blank are named
by id (`MissingTextError`), never embedded as zeros.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relrep_hf.migration.stores.base import VectorStore, VectorStoreError

__all__ = [
    "MissingTextError",
    "Texts",
    "check_can_drop",
    "check_texts",
    "has_text",
    "missing_message",
    "missing_rows",
    "rechunked",
    "texts_by_id",
    "texts_of",
]

SHOWN_IDS = 10


class MissingTextError(VectorStoreError):
    """Rows with no text (null, empty or blank; or no text for their id): ``ids`` names them."""

    def __init__(self, message: str, ids: list[Any]):
        super().__init__(message)
        self.ids = ids


def texts_by_id(path: Path, id_column: str, text_column: str) -> dict[Any, Any]:
    """``{id: text}`` of a JSON Lines (``.jsonl``/``.json``) or parquet file of ids and texts."""
    import pyarrow as pa

    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        elif path.suffix in (".jsonl", ".json"):
            import pyarrow.json as pj

            table = pj.read_json(path)
        else:
            raise VectorStoreError(
                f"{str(path)!r}: texts by id are read from a .jsonl or .parquet file of "
                f"{id_column!r} and {text_column!r}; give one of those."
            )
    except (pa.ArrowException, OSError) as error:
        raise VectorStoreError(f"{str(path)!r}: not a readable file of texts ({error}).") from None
    missing = [c for c in (id_column, text_column) if c not in table.column_names]
    if missing:
        raise VectorStoreError(
            f"{str(path)!r} has no column {missing[0]!r}; its columns are {table.column_names}. "
            "Name the id and text columns (id_column=, text_column=; --id-column, --text-column)."
        )
    ids, texts = table.column(id_column).to_pylist(), table.column(text_column).to_pylist()
    found = dict(zip(ids, texts, strict=True))
    if len(found) != len(ids):
        seen: set = set()
        twice = [i for i in ids if i in seen or seen.add(i)][:SHOWN_IDS]
        raise VectorStoreError(
            f"{str(path)!r} gives several texts for ids {twice}: each id needs one text."
        )
    return found


@dataclass
class Texts:
    """Where the texts of a store's rows come from: its column ``text_column``, or ``by_id``
    (``{id: text}``) joined on its column ``id_column``."""

    store: VectorStore
    text_column: str
    id_column: str
    by_id: dict[Any, Any] | None

    def batches(self, chunk_rows: int) -> Iterator[list[Any]]:
        """Each row's text (``None`` where there is none), in the store's order."""
        if self.by_id is None:
            yield from self.store.values(self.text_column, chunk_rows)
            return
        for ids in self.store.values(self.id_column, chunk_rows):
            yield [self.by_id.get(i) for i in ids]

    def ids(self, chunk_rows: int) -> Iterator[list[Any]]:
        """The rows' ids (their numbers, where the store has no ``id_column``)."""
        if self.id_column in self.store.fields():
            yield from self.store.values(self.id_column, chunk_rows)
            return
        start = 0
        for texts in self.batches(chunk_rows):
            yield list(range(start, start + len(texts)))
            start += len(texts)


def texts_of(
    store: VectorStore, text_column: str, texts: str | os.PathLike | None, id_column: str
) -> Texts:
    """Where ``store``'s texts come from (its ``text_column``, or the file ``texts`` joined on
    its ``id_column``), refused with the fields it has where it holds no such text."""
    if not hasattr(store, "values"):
        raise VectorStoreError(
            f"{store.describe()} holds vectors only, no text to embed: re-embed a store with a "
            "text column (parquet, datasets, LanceDB, Chroma, Qdrant, pgvector, sqlite-vec), or "
            "write the vectors with their ids and texts into one."
        )
    if texts is None:
        if text_column not in store.fields():
            raise VectorStoreError(
                f"{store.describe()} has no text column {text_column!r}; its columns are "
                f"{store.fields()}. Name it (text_column=, --text-column), or give a file "
                "of ids and texts (texts=, --texts)."
            )
        return Texts(store, text_column, id_column, None)
    if id_column not in store.fields():
        raise VectorStoreError(
            f"{store.describe()} has no id column {id_column!r} to join the texts of "
            f"{str(texts)!r} on; its columns are {store.fields()} (id_column=, --id-column)."
        )
    return Texts(store, text_column, id_column, texts_by_id(Path(texts), id_column, text_column))


def missing_rows(source: Texts, chunk_rows: int) -> tuple[list[int], list[Any], str]:
    """The positions of the rows whose text is missing, empty or blank, their ids, and a hash
    of every row's id and text in order (what a database store's re-embed resumes on)."""
    positions: list[int] = []
    ids: list[Any] = []
    digest = hashlib.sha256()
    start = 0
    for texts, batch_ids in zip(source.batches(chunk_rows), source.ids(chunk_rows), strict=True):
        for offset, (text, row_id) in enumerate(zip(texts, batch_ids, strict=True)):
            digest.update(repr((row_id, text)).encode())
            if not has_text(text):
                positions.append(start + offset)
                ids.append(row_id)
        start += len(texts)
    return positions, ids, digest.hexdigest()


def missing_message(source: Texts, ids: list[Any]) -> str:
    where = (
        f"no text in {source.text_column!r}"
        if source.by_id is None
        else "no text in the file of texts"
    )
    shown = ", ".join(map(repr, ids[:SHOWN_IDS])) + (", ..." if len(ids) > SHOWN_IDS else "")
    return f"{len(ids)} row(s) have {where} (missing, empty or blank), ids {shown}"


def check_texts(source: Texts, ids: list[Any]) -> None:
    """Refuse, naming their ids, the rows whose text is missing, empty or blank."""
    if ids:
        raise MissingTextError(
            f"{source.store.describe()}: {missing_message(source, ids)}. Nothing was embedded "
            "or written: give those rows a text, drop them from the store first, or leave them "
            "out of the new store (skip_missing=True, --skip-missing); no vector is written as "
            "zeros.",
            ids[:SHOWN_IDS],
        )


def has_text(text: Any) -> bool:
    """``text`` is one to embed: a string that is not empty or blank."""
    return isinstance(text, str) and bool(text.strip())


def check_can_drop(store: VectorStore, in_place: bool) -> None:
    """Rows without text are left out of a new store only where the old one keeps them: a new
    output, a database's backup, a file's backup beside it (a parquet file rewritten in place);
    a folder store rewritten in place (``datasets``, LanceDB) keeps no backup: refused."""
    if in_place and Path(store.path).is_dir() and not hasattr(store, "location"):
        raise VectorStoreError(
            f"{store.describe()}: rows without text are left out of a new store only where "
            "the old one keeps them, and a folder store rewritten in place keeps no backup: "
            "those rows would be lost. Give a new output (out=, --out), or give those rows a "
            "text. Nothing was embedded or written."
        )


def rechunked(batches: Iterable[list[Any]], size: int) -> Iterator[list[Any]]:
    """The items of ``batches`` in lists of exactly ``size`` (the last may be shorter)."""
    pending: list[Any] = []
    for batch in batches:
        pending.extend(batch)
        while len(pending) >= size:
            yield pending[:size]
            pending = pending[size:]
    if pending:
        yield pending
