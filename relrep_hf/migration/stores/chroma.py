"""Chroma stores: a collection of a ``chromadb.PersistentClient`` folder
(``chroma:PATH#COLLECTION``).

The new vectors go into a new collection (``NAME_migrating_<time>``, the old one's metadata and
configuration: its HNSW space and parameters), ids, documents, metadatas and URIs copied over
in the old order, its count and ids checked; then two renames (``Collection.modify(name=)``):
the old collection to ``NAME_backup_<time>``, the new one to NAME. Each rename is atomic; the
pair is not: between them (a few milliseconds) NAME does not exist, and a run killed exactly
there leaves the backup and the complete new collection under their temporary names (rename
the new one to NAME by hand). A run killed before the renames leaves NAME serving the old
vectors (and a partial new collection to delete). A lock file beside the folder
(``.FOLDER.lock``) lets one migration at a time write it.

A collection created with an embedding function (its configuration's ``embedding_function``,
other than Chroma's ``default``) embeds query texts with the old model: the plan names it and
the migration refuses it unless forced, and a forced migration writes the new collection
without it (relrep_hf cannot name a Chroma function for a map's target space).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from relrep_hf.migration.plan import StorePlan
from relrep_hf.migration.space import StoreSpace
from relrep_hf.migration.stores import database as db
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    StoreKind,
    Transform,
    VectorStoreError,
    kept_rows,
)
from relrep_hf.utils.locking import FolderLockedError, folder_lock

__all__ = ["KIND", "ChromaStore"]

CARRIED = ["documents", "metadatas", "uris"]


class ChromaStore(db.DatabaseStore):
    """A collection; its space is recorded in the collection's metadata (``relrep_hf.space``)."""

    kind = "chroma"
    records_space = True
    text_field = "documents"  # what a re-embed reads
    carries = (
        "ids, documents, metadatas and URIs",
        "the collection's metadata and HNSW configuration",
    )

    def __init__(self, location: db.DatabaseLocation):
        chromadb = db.require("chromadb", "chromadb")
        self.location, self.path = location, Path(location.database)
        if not self.path.is_dir():
            raise VectorStoreError(f"{location.shown()!r}: no such Chroma folder.")
        self.client = chromadb.PersistentClient(path=str(self.path))
        names = [c.name for c in self.client.list_collections()]
        if location.name not in names:
            raise self.missing("collection", names)
        self.collection = self.client.get_collection(location.name)
        self.rows, self.dtype = self.collection.count(), np.dtype(np.float32)
        first = self.collection.get(limit=1, include=["embeddings"])["embeddings"]
        self.dim = len(first[0]) if first is not None and len(first) else 0

    def _batches(self, collection, chunk_rows: int, include: list[str]) -> Iterator[dict]:
        for offset in range(0, collection.count(), chunk_rows):
            yield collection.get(limit=chunk_rows, offset=offset, include=include)

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        for batch in self._batches(self.collection, chunk_rows, ["embeddings"]):
            yield np.asarray(batch["embeddings"], np.float32).reshape(-1, self.dim)

    def fields(self) -> list[str]:
        """``id``, ``documents`` and the metadata keys of the first rows (`values` reads them)."""
        first = self.collection.get(limit=100, include=["metadatas"])["metadatas"] or []
        keys = sorted({k for metadata in first if metadata for k in metadata} - {"id"})
        return ["id", "documents", *keys]

    def values(self, name: str, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[list]:
        """The rows' ids, documents or metadata field ``name``, in the rewrite's order."""
        include = {"id": [], "documents": ["documents"]}.get(name, ["metadatas"])
        for batch in self._batches(self.collection, chunk_rows, include):
            if name == "id":
                yield list(batch["ids"])
            elif name == "documents":
                yield list(batch["documents"] or [None] * len(batch["ids"]))
            else:
                yield [
                    (m or {}).get(name) for m in batch["metadatas"] or [None] * len(batch["ids"])
                ]

    def read_space(self) -> StoreSpace | None:
        return db.space_in_metadata(self.collection.metadata, self.location.shown())

    def _embedding_function(self) -> dict | None:
        """The collection's embedding function as its configuration records it (``{"type":
        "known", "name": ..., "config": ...}``), read without loading it; None if none."""
        function = (self.collection.configuration_json or {}).get("embedding_function")
        return function if isinstance(function, dict) and function.get("type") == "known" else None

    def plan(self, out: str | object, dim: int) -> StorePlan:
        """The collection's embedding function named: Chroma's default is carried (as every
        collection has it), another one is not (refused unless forced)."""
        plan = super().plan(out, dim)
        function = self._embedding_function()
        if function is not None and function.get("name") == "default":
            plan.carried.append(
                "Chroma's default embedding function (query texts are embedded by it, not by "
                "the new encoder: query the new vectors with query_embeddings)"
            )
        elif function is not None:
            plan.dropped.append(
                f"the embedding function {function.get('name')!r} (config "
                f"{json.dumps(function.get('config'), sort_keys=True)}), which embeds query "
                "texts with the old model: the new collection has none; attach the new "
                "encoder's function to it afterwards"
            )
        return plan

    def _configuration(self) -> dict:
        """The new collection's configuration: the old one's, without an embedding function
        other than Chroma's default (the plan refused it unless forced)."""
        from chromadb.api.collection_configuration import load_collection_configuration_from_json

        configuration = dict(self.collection.configuration_json or {})
        function = self._embedding_function()
        if function is not None and function.get("name") != "default":
            configuration["embedding_function"] = None
        return load_collection_configuration_from_json(configuration)

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
        """A new collection (its metadata recording ``space``; the rows at the positions
        ``skip`` left out), then the two renames (see the module)."""
        names = {c.name for c in self.client.list_collections()}
        name, found = db.output_name(self, out, overwrite, names.__contains__)
        skip = db.skipped_positions(skip)
        try:
            with folder_lock(self.path):
                return self._migrate(name, found, transform, chunk_rows, space, skip)
        except FolderLockedError as error:
            raise db.StoreBusyError(f"{self.describe()}: {error}") from None

    def _migrate(self, name, found, transform, chunk_rows, space, skip):
        self.collection = self.client.get_collection(self.location.name)  # as of the lock
        if self.collection.count() != self.rows:
            raise db.StoreBusyError(
                f"{self.describe()}: the collection changed since it was opened (another "
                "migration?). Nothing was written; open it again."
            )
        # Chroma refuses a write of more rows than its max batch (5,461 by default)
        chunk_rows = min(chunk_rows, self.client.get_max_batch_size())
        new = self.client.create_collection(
            db.staging_name(name),
            metadata=db.metadata_with_space(self.collection.metadata, space),
            configuration=self._configuration(),
            embedding_function=None,
        )
        try:
            self._fill(new, transform, chunk_rows, skip)
        except BaseException:  # no staging collection left behind, whatever failed
            self.client.delete_collection(new.name)
            raise
        backup = db.backup_name(name) if found else None
        if found:
            self.client.get_collection(name).modify(name=backup)
        new.modify(name=name)
        return db.MigratedLocation(self.location.with_name(name), backup)

    def _fill(self, new, transform: Transform, chunk_rows: int, skip: np.ndarray) -> None:
        """Copy every row (but those at the positions ``skip``) into ``new``, the vectors
        through ``transform``, and check it."""
        position = 0
        for batch in self._batches(self.collection, chunk_rows, ["embeddings", *CARRIED]):
            vectors = np.asarray(batch["embeddings"], np.float32).reshape(-1, self.dim)
            carried = {k: batch[k] for k in CARRIED if batch.get(k) is not None}
            carried = {k: v for k, v in carried.items() if any(x is not None for x in v)}
            ids, keep = batch["ids"], kept_rows(skip, position, len(batch["ids"]))
            position += len(ids)
            if keep is not None:
                ids, vectors = [i for i, k in zip(ids, keep, strict=True) if k], vectors[keep]
                carried = {
                    k: [x for x, y in zip(v, keep, strict=True) if y] for k, v in carried.items()
                }
            if ids:
                new.add(ids=ids, embeddings=transform(vectors), **carried)
        copied = [i for b in self._batches(new, chunk_rows, []) for i in b["ids"]]
        old = [i for b in self._batches(self.collection, chunk_rows, []) for i in b["ids"]]
        left_out = {old[p] for p in skip.tolist()}
        same = sorted(copied) == sorted(i for i in old if i not in left_out)
        db.check_copied(self, new.count(), same, f"collection {new.name!r}", len(skip))

    def names(self) -> list[str]:
        return [c.name for c in self.client.list_collections()]

    def remove(self, name: str) -> None:
        self.client.delete_collection(name)

    def restore(self, backup: str, *, force: bool = False) -> None:
        """The migrated collection renamed aside, the backup renamed to NAME, the migrated one
        deleted; under the folder's lock."""
        try:
            with folder_lock(self.path):
                served = self.client.get_collection(self.location.name)
                kept = self.client.get_collection(backup)
                ids = [i for b in self._batches(served, 5000, []) for i in b["ids"]]
                before = {i for b in self._batches(kept, 5000, []) for i in b["ids"]}
                db.check_nothing_new(self, [i for i in ids if i not in before], backup, force)
                aside = db.rolled_back_name(self.location.name)
                served.modify(name=aside)
                kept.modify(name=self.location.name)
                self.client.delete_collection(aside)
        except FolderLockedError as error:
            raise db.StoreBusyError(f"{self.describe()}: {error}") from None


KIND = StoreKind(
    "chroma",
    db.recognises("chroma"),
    db.database_opener(ChromaStore),
    "a Chroma collection (chroma:PATH#COLLECTION)",
)
