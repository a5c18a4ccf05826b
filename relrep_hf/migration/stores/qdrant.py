"""Qdrant stores in local mode (``qdrant:PATH#NAME``: a ``QdrantClient(path=PATH)`` folder; NAME a
collection or a collection alias), read and written with ``qdrant-client``.

The new vectors go into a new collection (``NAME_<time>_<hex>``, the old one's vector parameters with
the new size, its HNSW settings and payload indexes), ids and payloads copied over, its count
and ids checked; then one ``update_collection_aliases`` call (delete + create, applied
together) points the alias NAME at it, so searches through the alias see the old collection or
the new one. The old collection is kept, unchanged, under its own name (the backup). A
collection searched by its own name cannot be swapped (Qdrant renames no collection): such an
``--out`` is refused with how to put it behind an alias; an ``--out`` NAME that does not exist
yet becomes an alias of the new collection, ready for the next migration. A local folder is
held by one client at a time, so a second run fails while the first holds it; a killed run
leaves the alias on the old collection (and a partial new collection, never searched, to
delete).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from relrep_hf.migration.space import StoreSpace
from relrep_hf.migration.stores import database as db
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    StoreKind,
    Transform,
    VectorStoreError,
    kept_rows,
)

__all__ = ["KIND", "QdrantStore"]


class QdrantStore(db.DatabaseStore):
    """A collection (or the alias searches use); its space is recorded in the collection's
    metadata (``relrep_hf.space``, Qdrant 1.16's collection metadata, kept by local mode)."""

    kind = "qdrant"
    records_space = True
    carries = ("ids and payloads", "vector parameters, HNSW settings and payload indexes",
               "the other named and sparse vectors", "the collection's metadata")  # fmt: skip

    def __init__(self, location: db.DatabaseLocation):
        db.require("qdrant_client", "qdrant-client")
        self.location, self.path = location, Path(location.database)
        if not self.path.is_dir():
            raise VectorStoreError(f"{location.shown()!r}: no such Qdrant local folder.")
        with self._opened():
            self._read_collection(location)

    @contextmanager
    def _opened(self) -> Iterator[None]:
        """``self.client`` open for the block: a local folder is held by one client at a time,
        so the store holds it only while it reads or writes."""
        qdrant_client = db.require("qdrant_client", "qdrant-client")
        try:
            self.client = qdrant_client.QdrantClient(path=str(self.path))
        except RuntimeError as error:  # the folder is held by another client
            raise db.StoreBusyError(
                f"{self.location.shown()!r}: {error} Nothing was written; run one migration at "
                "a time, with no other client open on the folder."
            ) from None
        try:
            yield
        finally:
            self.client.close()

    def _read_collection(self, location: db.DatabaseLocation) -> None:
        self.aliases = {a.alias_name: a.collection_name for a in self.client.get_aliases().aliases}
        name = location.name
        self.collection = self.aliases.get(name, name)
        if name is None or not self.client.collection_exists(self.collection):
            found = [c.name for c in self.client.get_collections().collections]
            raise self.missing("collection or alias", found + list(self.aliases))
        self.info = self.client.get_collection(self.collection)
        vectors = self.info.config.params.vectors
        self.vector = None
        if isinstance(vectors, dict):
            self.vector = location.column or (next(iter(vectors)) if len(vectors) == 1 else None)
            if self.vector not in vectors:
                raise VectorStoreError(
                    f"{location.shown()!r}: the collection's named vectors are {sorted(vectors)};"
                    " name the one to migrate (--column)."
                )
            vectors = vectors[self.vector]
        self.params, self.dim, self.dtype = vectors, vectors.size, np.dtype(np.float32)
        self.rows = self.client.count(self.collection, exact=True).count

    def _points(self, collection: str, chunk_rows: int, **with_) -> Iterator[list]:
        offset = None
        while True:
            points, offset = self.client.scroll(
                collection, limit=chunk_rows, offset=offset, **with_
            )
            if points:
                yield points
            if offset is None:
                return

    def _matrix(self, points: list) -> np.ndarray:
        rows = [p.vector if self.vector is None else p.vector[self.vector] for p in points]
        return np.asarray(rows, np.float32).reshape(len(points), self.dim)

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        using = True if self.vector is None else [self.vector]
        with self._opened():
            for points in self._points(self.collection, chunk_rows, with_vectors=using):
                yield self._matrix(points)

    def fields(self) -> list[str]:
        """``id`` and the payload keys of the first points (`values` reads them)."""
        with self._opened():
            points, _ = self.client.scroll(self.collection, limit=100, with_payload=True)
        return ["id", *sorted({k for p in points for k in (p.payload or {})} - {"id"})]

    def values(self, name: str, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[list]:
        """The points' ids or payload field ``name``, in the rewrite's order (read whole, under
        one client: a local folder is held by one client at a time)."""
        with self._opened():
            batches = [
                [p.id if name == "id" else (p.payload or {}).get(name) for p in points]
                for points in self._points(
                    self.collection, chunk_rows, with_payload=name != "id", with_vectors=False
                )
            ]
        yield from batches

    def read_space(self) -> StoreSpace | None:
        return db.space_in_metadata(self.info.config.metadata, self.location.shown())

    def rewrite_into(
        self,
        out: str,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        overwrite: bool = False,
        space: StoreSpace | None = None,
        skip=None,
    ) -> db.MigratedLocation:
        """A new collection (its metadata recording ``space``; the points at the positions
        ``skip`` left out), then the alias switched to it (see the module)."""
        skip = db.skipped_positions(skip)
        with self._opened():
            opened = (self.collection, self.rows, self.dim)
            self._read_collection(self.location)  # as of now that the folder is held
            if (self.collection, self.rows, self.dim) != opened:
                raise db.StoreBusyError(
                    f"{self.describe()}: the collection changed since it was opened (another "
                    "migration?). Nothing was written; open it again."
                )
            return self._migrate(out, transform, dim, chunk_rows, overwrite, space, skip)

    def _migrate(
        self, out, transform, dim, chunk_rows, overwrite, space, skip
    ) -> db.MigratedLocation:
        exists = lambda name: name in self.aliases or self.client.collection_exists(name)  # noqa: E731
        name, found = db.output_name(self, out, overwrite, exists)
        if found and name not in self.aliases:
            raise VectorStoreError(
                f"{str(out)!r}: {name!r} is a collection searched by its own name, and Qdrant "
                "cannot swap a collection in place. Put it behind an alias (client."
                "update_collection_aliases([CreateAliasOperation(create_alias=CreateAlias("
                f"collection_name={name!r}, alias_name='ALIAS'))])), search through the alias, "
                "and migrate into qdrant:PATH#ALIAS; or give a new name (it becomes an alias)."
            )
        # a killed run's partial collection never collides with this one
        new = f"{name[:36]}_{time.strftime('%Y%m%d%H%M%S')}_{secrets.token_hex(2)}"
        self._create(new, dim, space)
        self._copy(new, transform, chunk_rows, skip)
        self._check(new, chunk_rows, skip)
        models = db.require("qdrant_client.models", "qdrant-client")
        operations = [models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name))]
        operations = operations if found else []
        operations.append(models.CreateAliasOperation(
            create_alias=models.CreateAlias(collection_name=new, alias_name=name)))  # fmt: skip
        self.client.update_collection_aliases(change_aliases_operations=operations)
        return db.MigratedLocation(
            self.location.with_name(name), self.collection if found else None
        )

    def _create(self, new: str, dim: int, space: StoreSpace | None) -> None:
        params = self.params.model_copy(update={"size": dim})
        vectors = self.info.config.params.vectors
        if self.vector is not None:
            vectors = {**vectors, self.vector: params}
        self.client.create_collection(
            new,
            vectors_config=params if self.vector is None else vectors,
            sparse_vectors_config=self.info.config.params.sparse_vectors,
            hnsw_config=self.info.config.hnsw_config,
            metadata=db.metadata_with_space(self.info.config.metadata, space),
        )
        for field, schema in (self.info.payload_schema or {}).items():
            self.client.create_payload_index(new, field, field_schema=schema.data_type)

    def _copy(self, new: str, transform: Transform, chunk_rows: int, skip: np.ndarray) -> None:
        models = db.require("qdrant_client.models", "qdrant-client")
        position = 0
        for points in self._points(
            self.collection, chunk_rows, with_vectors=True, with_payload=True
        ):
            keep = kept_rows(skip, position, len(points))
            position += len(points)
            if keep is not None:
                points = [p for p, k in zip(points, keep, strict=True) if k]
            if not points:
                continue
            migrated = transform(self._matrix(points))
            batch = []
            for point, vector in zip(points, migrated.tolist(), strict=True):
                vectors = vector if self.vector is None else {**point.vector, self.vector: vector}
                batch.append(models.PointStruct(id=point.id, vector=vectors, payload=point.payload))
            self.client.upsert(new, points=batch, wait=True)

    def _check(self, new: str, chunk_rows: int, skip: np.ndarray) -> None:
        count = self.client.count(new, exact=True).count
        old = self._points(self.collection, chunk_rows, with_vectors=False, with_payload=False)
        copied = self._points(new, chunk_rows, with_vectors=False, with_payload=False)
        left_out = set(skip.tolist())
        kept = [p.id for i, p in enumerate(p for batch in old for p in batch) if i not in left_out]
        ids = kept == [p.id for batch in copied for p in batch]
        db.check_copied(self, count, ids, f"collection {new!r}", len(skip))

    def names(self) -> list[str]:
        with self._opened():
            return [c.name for c in self.client.get_collections().collections]

    def leftovers(self) -> list[str]:
        """The collections migrations of the alias wrote (``NAME_<time>_<hex>``) that no alias
        serves: replaced ones and killed runs' partial ones."""
        pattern = re.compile(re.escape(self.location.name[:36]) + r"_\d{14}_[0-9a-f]{4}")
        with self._opened():
            served = {a.collection_name for a in self.client.get_aliases().aliases}
            found = [c.name for c in self.client.get_collections().collections]
        return sorted(c for c in found if pattern.fullmatch(c) and c not in served)

    def backups(self) -> list[str]:
        """The replaced collections of the alias's migrations, oldest first (by their time)."""
        return sorted(self.leftovers(), key=lambda name: name[-19:])

    def remove(self, name: str) -> None:
        with self._opened():
            self.client.delete_collection(name)

    def restore(self, backup: str, *, force: bool = False) -> None:
        """The alias pointed back at ``backup`` (one aliases call); the migrated collection is
        left, unserved, for cleanup."""
        models = db.require("qdrant_client.models", "qdrant-client")
        name = self.location.name
        with self._opened():
            self._read_collection(self.location)
            if name not in self.aliases or not self.client.collection_exists(backup):
                raise VectorStoreError(
                    f"{self.describe()}: {name!r} must be an alias and {backup!r} a collection "
                    "of the folder to roll back."
                )
            kept = {p.id for b in self._points(backup, 1024) for p in b}
            ids = [p.id for b in self._points(self.collection, 1024) for p in b]
            db.check_nothing_new(self, [i for i in ids if i not in kept], backup, force)
            self.client.update_collection_aliases(change_aliases_operations=[
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name)),
                models.CreateAliasOperation(create_alias=models.CreateAlias(
                    collection_name=backup, alias_name=name)),
            ])  # fmt: skip


KIND = StoreKind(
    "qdrant",
    db.recognises("qdrant"),
    db.database_opener(QdrantStore),
    "a Qdrant local collection (qdrant:PATH#COLLECTION)",
)
