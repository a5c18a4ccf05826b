"""Migration: stored vectors of an old encoder moved into a new encoder's space, instead of
re-embedding the corpus. One package, as a PEFT method is one folder of ``tuners/``:

- `candidates`: the maps a migration can use (affine least squares, ridge, Procrustes, the
  anchor path, least squares shrunk toward it, low rank), one registry entry each
  (`register_migration_candidate`);
- `selection`: `select_migration_map`, the choice by out-of-fold Recall@1 and retention@10;
- `report`: the held-out report and its recommendation (migrate, bridge or re-embed);
- `fit`: `fit_migration`, the chosen map fitted on a user's paired rows;
- `map`: `MigrationMap`, the artifact (saved, loaded, pushed);
- `stores`: the stores a map rewrites, one module and one `StoreKind` per kind (.npy,
  .safetensors, parquet, datasets, FAISS, LanceDB, and the databases Qdrant, Chroma, pgvector,
  sqlite-vec), written aside and swapped in whole (a rename, an alias switch, a transaction);
- `migrate`: `migrate_store`, a store streamed through a map in chunks, and `migrate`, the
  anchor path alone;
- `space`: `StoreSpace`, the record of the space a store's vectors are in, and the checks of a
  map against it;
- `reembed`: `reembed_store`, a store re-embedded from its text, resumable.
"""

from relrep_hf.migration.candidates import (
    CANDIDATES,
    MIGRATION_CANDIDATES,
    MigrationCandidate,
    register_migration_candidate,
    unregister_migration_candidate,
)
from relrep_hf.migration.fit import anchor_path_maps, fit_migration
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.migrate import migrate, migrate_store
from relrep_hf.migration.reembed import MissingTextError, ReembedEstimate, reembed_store
from relrep_hf.migration.report import migration_report
from relrep_hf.migration.selection import (
    BLEND,
    DEFAULT_FOLDS,
    MigrationSelection,
    select_migration_map,
)
from relrep_hf.migration.space import StoreSpace, StoreSpaceError
from relrep_hf.migration.stores import (
    STORE_KINDS,
    StoreKind,
    VectorStore,
    VectorStoreError,
    open_store,
    register_store_kind,
    unregister_store_kind,
)
from relrep_hf.migration.stores.database import MigratedLocation

__all__ = [
    "BLEND",
    "CANDIDATES",
    "DEFAULT_FOLDS",
    "MIGRATION_CANDIDATES",
    "STORE_KINDS",
    "MigratedLocation",
    "MigrationCandidate",
    "MigrationMap",
    "MigrationSelection",
    "MissingTextError",
    "ReembedEstimate",
    "StoreKind",
    "StoreSpace",
    "StoreSpaceError",
    "VectorStore",
    "VectorStoreError",
    "anchor_path_maps",
    "fit_migration",
    "migrate",
    "migrate_store",
    "migration_report",
    "open_store",
    "reembed_store",
    "register_migration_candidate",
    "register_store_kind",
    "select_migration_map",
    "unregister_migration_candidate",
    "unregister_store_kind",
]
