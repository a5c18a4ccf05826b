"""The stores a migration rewrites, one module per kind, as a PEFT method is one folder of
``tuners/``: each kind's module holds its store class and its one `StoreKind` declaration
(``KIND``), and `register_builtin_store_kinds` registers them all, in one place. What the kinds
share is in `base` (the registry, `VectorStore`, `rewrite_store`, `open_store`), `arrow` (the
stores of record batches) and `database` (the database URIs, backups and staging names).

- files: `npy` (a sidecar records the space), `safetensors`, `parquet`, `faiss`;
- folders: `datasets` (``save_to_disk``), `lance` (one table of a LanceDB database);
- databases, named by URIs: `qdrant` (local mode), `chroma`, `pgvector` (with `pgvector_plan`,
  what a table's rewrite carries), `sqlite_vec`.

A kind of one's own is one `register_store_kind` call (`unregister_store_kind` takes it out).
Importing a kind's module registers nothing: the package's kinds are registered when this
package is first imported, by the call at the bottom of this file.
"""

from __future__ import annotations

from relrep_hf.migration.stores import (
    chroma,
    datasets,
    faiss,
    lance,
    npy,
    parquet,
    pgvector,
    qdrant,
    safetensors,
    sqlite_vec,
)
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    STORE_KINDS,
    StoreKind,
    Transform,
    VectorStore,
    VectorStoreError,
    open_store,
    records_space,
    register_store_kind,
    rewrite_store,
    store_kind,
    unregister_store_kind,
)

__all__ = [
    "BUILTIN_KINDS",
    "DEFAULT_CHUNK_ROWS",
    "STORE_KINDS",
    "StoreKind",
    "Transform",
    "VectorStore",
    "VectorStoreError",
    "open_store",
    "records_space",
    "register_builtin_store_kinds",
    "register_store_kind",
    "rewrite_store",
    "store_kind",
    "unregister_store_kind",
]

# the package's kinds, in the order errors and ``--help`` list them
BUILTIN_KINDS: tuple[StoreKind, ...] = (
    npy.KIND,
    safetensors.KIND,
    parquet.KIND,
    faiss.KIND,
    datasets.KIND,
    lance.KIND,
    qdrant.KIND,
    chroma.KIND,
    pgvector.KIND,
    sqlite_vec.KIND,
)


def register_builtin_store_kinds() -> None:
    """Register the package's kinds (`BUILTIN_KINDS`) that are not registered now (so a call
    after `unregister_store_kind` puts a builtin kind back)."""
    for kind in BUILTIN_KINDS:
        if kind.name not in STORE_KINDS:
            register_store_kind(kind)


register_builtin_store_kinds()
