"""A flat FAISS index (with its ids): the ``faiss`` store kind. Its space is recorded in a
sidecar, ``<name>.space.json``, as a .npy file's (an index file has no metadata slot)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from relrep_hf.migration.space import StoreSpace
from relrep_hf.migration.stores.base import (
    DEFAULT_CHUNK_ROWS,
    StoreKind,
    Transform,
    VectorStore,
    VectorStoreError,
    existing_path,
    has_suffix,
)
from relrep_hf.migration.stores.npy import SidecarSpace

__all__ = ["KIND", "FaissStore"]


class FaissStore(SidecarSpace, VectorStore):
    """A flat FAISS index (``IndexFlatL2``/``IndexFlatIP``, optionally inside an ``IndexIDMap``
    or ``IndexIDMap2``, whose ids are carried over). The old index's codes are memory-mapped;
    FAISS builds the new index in memory."""

    kind = "faiss"
    records_space = True  # in the sidecar (`SidecarSpace.record_beside`)
    output_dtypes = (np.dtype(np.float32),)  # a flat index holds float32

    def __init__(self, path: Path, **_: object):
        import faiss

        self.path = path
        try:
            # codes memory-mapped: an open (an overwritten output's check too) reads header, ids
            self.owner = index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        except RuntimeError as error:
            raise VectorStoreError(
                f"{str(path)!r}: not a readable FAISS index ({str(error).splitlines()[0]})."
            ) from None
        self.ids = None
        if isinstance(index, (faiss.IndexIDMap, faiss.IndexIDMap2)):
            self.ids = faiss.vector_to_array(index.id_map)
            index = faiss.downcast_index(index.index)
        if not isinstance(index, faiss.IndexFlat):
            raise VectorStoreError(
                f"{str(path)!r}: an index of kind {type(index).__name__}, which is not flat: only "
                "flat indexes (IndexFlatL2, IndexFlatIP, optionally in an IndexIDMap) are migrated. "
                "An IVF or HNSW index's quantizer and graph, and a PQ/SQ index's codes, are built "
                "on the old space: migrate the vectors (keep them in a .npy or reconstruct them with "
                "index.reconstruct_n) and train and fill a new index of that kind with the result."
            )
        if index.metric_type not in (faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT):
            raise VectorStoreError(
                f"{str(path)!r}: an index of metric {index.metric_type} (FAISS METRIC_* code); "
                "a migration map is fitted for cosine/inner-product and L2 search, so only "
                "METRIC_L2 and METRIC_INNER_PRODUCT indexes are migrated. Rebuild it as one of those."
            )
        self.index, self.metric = index, index.metric_type
        self.rows, self.dim, self.dtype = index.ntotal, index.d, np.dtype(np.float32)
        codes = faiss.rev_swig_ptr(index.get_xb(), self.rows * self.dim)
        self.vectors = codes.reshape(self.rows, self.dim)

    @functools.cached_property
    def normalised(self) -> bool:
        """An inner-product index of unit rows (cosine); a pass over every row, by a rewrite."""
        import faiss

        return (
            self.rows > 0
            and self.metric == faiss.METRIC_INNER_PRODUCT
            and all(
                bool(np.abs(np.linalg.norm(chunk.astype(np.float64), axis=1) - 1.0).max() < 1e-3)
                for chunk in self.chunks()
            )
        )

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        for start in range(0, self.rows, chunk_rows):
            yield self.vectors[start : start + chunk_rows]

    def write(
        self,
        staging: Path,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        dtype=None,
        space: StoreSpace | None = None,  # recorded by `record_beside`: an index has no slot
    ) -> None:
        """The new flat index of the same metric; an inner-product index of unit vectors only
        (a cosine index) gets unit vectors again."""
        import faiss

        flat = faiss.IndexFlat(dim, self.metric)
        out = flat if self.ids is None else faiss.IndexIDMap2(flat)
        for start, chunk in zip(
            range(0, self.rows, chunk_rows), self.chunks(chunk_rows), strict=True
        ):
            vectors = np.ascontiguousarray(transform(chunk), dtype=np.float32)
            if self.normalised and self.metric == faiss.METRIC_INNER_PRODUCT:
                faiss.normalize_L2(vectors)
            if self.ids is None:
                out.add(vectors)
            else:
                out.add_with_ids(vectors, self.ids[start : start + len(chunk)])
        faiss.write_index(out, str(staging))


KIND = StoreKind(
    "faiss",
    has_suffix(".faiss", ".index"),
    existing_path(FaissStore),
    "a FAISS index (.faiss/.index)",
)
