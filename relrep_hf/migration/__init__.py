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

`fit_migration`, `MigrationMap`, `migrate_store` and `reembed_store` are exported from
``relrep_hf``, with the extension points (`register_store_kind`, `register_migration_candidate`);
this package exports what a migration needs besides them (docs/api.md).
"""

from __future__ import annotations

from relrep_hf.utils.lazy_imports import lazy_attributes, stub_names

# Each public name imported on first use (PEP 562), as relrep_hf's are: a Ray worker or a child
# driver that imports one module of this package (a store, the shard machinery) runs this file
# first, and an eager import of `migrate` loaded torch and transformers there (9 of the 9 s of
# ``import relrep_hf.migration.stores``). The names this package exported before issue #45
# (fit_migration, MigrationMap, the registries, ...) answer from their homes with a
# DeprecationWarning (utils/deprecated_import.py's table).
_LAZY = stub_names(__file__)  # public name -> its module, from __init__.pyi
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
