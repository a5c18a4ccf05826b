"""Real Qdrant and Chroma stores written through each database's own client, never through
relrep_hf, and the PostgreSQL server of the pgvector stores: what the ``databases`` benchmark
migrates and what the migration tests check (tests/fixtures/database_stores.py). Each writer
returns the store's URI.

The writers take rows (ids, vectors, payloads) and write them in chunks, so a store of many rows
never holds them all as the client's objects. pgvector and sqlite-vec have no writer here: the
benchmark's tables are plain, the tests' carry the constraints, index and metadata columns a
migration must keep, so they share no schema.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

QDRANT_CHUNK = 256  # points per upsert


def qdrant(where, name: str, ids: Sequence, vectors: np.ndarray, payloads: Sequence[dict]) -> str:
    """A Qdrant local store in folder ``where``: the collection ``{name}_v1`` behind the alias
    ``name``, as Qdrant recommends for swaps."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(where))
    try:
        params = models.VectorParams(size=vectors.shape[1], distance=models.Distance.EUCLID)
        client.create_collection(f"{name}_v1", vectors_config=params)
        for start in range(0, len(ids), QDRANT_CHUNK):
            chunk = slice(start, start + QDRANT_CHUNK)
            points = [
                models.PointStruct(id=i, vector=v.tolist(), payload=p)
                for i, v, p in zip(ids[chunk], vectors[chunk], payloads[chunk], strict=True)
            ]
            client.upsert(f"{name}_v1", points=points)
        alias = models.CreateAlias(collection_name=f"{name}_v1", alias_name=name)
        client.update_collection_aliases(
            change_aliases_operations=[models.CreateAliasOperation(create_alias=alias)]
        )
    finally:
        client.close()
    return f"qdrant:{where}#{name}"


def chroma(
    where,
    name: str,
    ids: Sequence[str],
    vectors: np.ndarray,
    documents: Sequence[str],
    metadatas: Sequence[dict] | None = None,
) -> str:
    """A Chroma persistent store in folder ``where``: the collection ``name`` (L2), added in the
    client's largest batches."""
    import chromadb

    client = chromadb.PersistentClient(path=str(where))
    collection = client.create_collection(name, metadata={"hnsw:space": "l2"})
    step = client.get_max_batch_size()
    for start in range(0, len(ids), step):
        chunk = slice(start, start + step)
        collection.add(
            ids=list(ids[chunk]),
            embeddings=vectors[chunk],
            documents=list(documents[chunk]),
            metadatas=None if metadatas is None else list(metadatas[chunk]),
        )
    return f"chroma:{where}#{name}"


def postgres(folder):
    """A PostgreSQL server (pgserver) in ``folder`` with the pgvector extension; the caller
    calls its ``cleanup()``."""
    import pgserver
    import psycopg

    server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except BaseException:
        server.cleanup()
        raise
    return server
