"""The cases of issue #31 (migration at scale) for the table of bad inputs.

``tests/test_reliability.py`` appends `CASES` to its ``BAD_INPUTS``: each is ``(input, where,
call)`` and ``call(setup)`` (a ``test_reliability.Setup``) must raise an error of relrep_hf's.
Each store is a real file written here; tests/test_vector_stores.py checks that nothing is
written or overwritten.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

D_OLD, D_NEW = 4, 3


def migration_map() -> Any:
    from relrep_hf.models.migration_map import MigrationMap

    return MigrationMap(torch.ones(D_OLD, D_NEW), torch.zeros(D_NEW))


def migrate(s: Any, vectors: Path, out: str, **kwargs: Any) -> Path:
    from relrep_hf.pipeline.migration import migrate_store

    return migrate_store(migration_map(), vectors, s.folder / out, show_progress=False, **kwargs)


def vectors(s: Any, name: str, array: np.ndarray | None = None) -> Path:
    path = s.folder / name
    np.save(path, np.ones((5, D_OLD), np.float32) if array is None else array)
    return path


def with_nan_row(s: Any) -> Path:
    array = np.ones((5, D_OLD), np.float32)
    array[3, 1] = np.nan
    return vectors(s, "nan-rows.npy", array)


def faiss_index(s: Any, name: str, kind: str) -> Path:
    import faiss

    path = s.folder / name
    if kind == "l1":
        index = faiss.IndexFlat(D_OLD, faiss.METRIC_L1)
    else:
        index = faiss.IndexHNSWFlat(D_OLD, 8)
    index.add(np.ones((5, D_OLD), np.float32))
    faiss.write_index(index, str(path))
    return path


def existing_output(s: Any) -> Path:
    source = vectors(s, "to-migrate.npy")
    vectors(s, "already-there.npy")
    return migrate(s, source, "already-there.npy")


def fit_rows(s: Any) -> Any:
    from relrep_hf import fit_migration

    return fit_migration(s.data[:50, :4], s.data[:49, 4:])


CASES: list[tuple[str, str, Callable[[Any], object]]] = [
    ("old vectors of another dimension than the migration map's", "`migrate_store` (`relrep-hf migrate`)",
     lambda s: migrate(s, vectors(s, "wide.npy", np.ones((5, D_OLD + 2), np.float32)), "out.npy")),
    ("a NaN in the vectors to migrate", "`migrate_store` (`relrep-hf migrate`)",
     lambda s: migrate(s, with_nan_row(s), "out-nan.npy")),
    ("a FAISS index of the L1 metric", "`migrate_store` (`relrep-hf migrate`)",
     lambda s: migrate(s, faiss_index(s, "l1.faiss", "l1"), "out-l1.faiss")),
    ("a FAISS HNSW index (not flat)", "`migrate_store` (`relrep-hf migrate`)",
     lambda s: migrate(s, faiss_index(s, "hnsw.faiss", "hnsw"), "out-hnsw.faiss")),
    ("an output store that exists, without overwrite", "`migrate_store` (`relrep-hf migrate`)",
     existing_output),
    ("an output of another kind than the input (.npy to .parquet)", "`migrate_store`",
     lambda s: migrate(s, vectors(s, "kind.npy"), "out.parquet")),
    ("a vector file that is not a store (.csv)", "`open_store` (`relrep-hf migrate`)",
     lambda s: migrate(s, s.folder / "vectors.csv" if (s.folder / "vectors.csv").write_text("1\n") else None, "out.npy")),
    ("old and new rows that do not pair (50 and 49)", "`fit_migration`", fit_rows),
    ("a migration map folder without its file", "`MigrationMap.from_pretrained`",
     lambda s: __import__("relrep_hf").MigrationMap.from_pretrained(s.folder)),
]  # fmt: skip
