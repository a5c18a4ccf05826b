"""The data side of `ParamTrainer`: parallel embeddings of several encoders, row by row.

`ParallelEmbeddings` reads rows from tensors in memory or from `datasets` columns (batch by batch,
so N may exceed memory), whitens them, and estimates each encoder's statistics; `shard` and
`gather_rows` split a global batch across processes and gather it back, differentiably.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.distributed.nn.functional as distributed_functional
from torch import Tensor

from relrep_hf.functional.statistics import Statistics, all_reduce, whiten
from relrep_hf.utils.validation import as_embeddings

if TYPE_CHECKING:
    import datasets

__all__ = ["ParallelEmbeddings", "arrow_matrix", "gather_rows", "shard"]


def _is_dataset(embeddings: object) -> bool:
    """Whether ``embeddings`` is a `datasets.Dataset`: only once datasets is imported, so a
    trainer of tensors does not import it (1.2 s, with pandas)."""
    module = sys.modules.get("datasets")
    return module is not None and isinstance(embeddings, module.Dataset)


class ParallelEmbeddings:
    """Row access to parallel embeddings held as tensors or as `datasets` columns."""

    def __init__(
        self, embeddings: Mapping[str, Tensor] | datasets.Dataset, columns: Sequence[str] | None
    ):
        if _is_dataset(embeddings):
            self.names = list(
                columns or [c for c in embeddings.column_names if c not in ("text", "label")]
            )
            missing = [c for c in self.names if c not in embeddings.column_names]
            if missing:
                raise ValueError(
                    f"The dataset has no columns {missing}; it has {embeddings.column_names}."
                )
            # Arrow batches viewed as numpy: several times faster than the torch formatter.
            self.dataset = embeddings.with_format("arrow", columns=self.names)
            self.tensors = None
            self.length = len(embeddings)
            first = self.dataset[0:1]
            self.dims = [arrow_matrix(first, name).shape[1] for name in self.names]
        else:
            if not isinstance(embeddings, Mapping) or not embeddings:
                raise ValueError(
                    "embeddings must be a non-empty mapping {encoder name: Tensor [N, d]} or a datasets.Dataset."
                )
            self.names = list(embeddings)
            # NumPy arrays and lists of floats as tensors (NumPy shared without a copy)
            embeddings = {
                n: as_embeddings(e, name=f"embeddings of {n!r}") for n, e in embeddings.items()
            }
            self.tensors = embeddings
            self.dataset = None
            counts = {name: t.shape[0] for name, t in embeddings.items()}
            if len(set(counts.values())) != 1:
                raise ValueError(
                    f"Every encoder must embed the same N inputs (parallel rows), got {counts}."
                )
            for name, t in embeddings.items():
                if t.ndim != 2:
                    raise ValueError(
                        f"Embeddings of {name!r} must be [N, d], got {tuple(t.shape)}."
                    )
            self.length = next(iter(counts.values()))
            self.dims = [embeddings[name].shape[1] for name in self.names]

    def rows(self, indices: Tensor) -> list[Tensor]:
        if self.tensors is not None:
            return [self.tensors[name][indices] for name in self.names]
        batch = self.dataset[indices.tolist()]
        return [arrow_matrix(batch, name) for name in self.names]

    def whitened(
        self, means: list[Tensor], whitenings: list[Tensor], device: torch.device, chunk: int
    ) -> Callable[[Tensor], list[Tensor]]:
        """Row access in whitened float32 coordinates. Every epoch reads every row, so
        embeddings held in memory are whitened once, ``chunk`` rows at a time; a dataset's
        rows are whitened batch by batch as they are read."""
        if self.tensors is None:
            return lambda indices: [
                whiten(rows.to(device, torch.float32), mean=mu, whitening=w)
                for rows, mu, w in zip(self.rows(indices), means, whitenings, strict=True)
            ]
        whitened = []
        for name, mu, w in zip(self.names, means, whitenings, strict=True):
            source = self.tensors[name]
            # on the embeddings' own device: only batches travel to the training device
            mu, w = mu.to(source.device), w.to(source.device)
            out = torch.empty(source.shape, dtype=torch.float32, device=source.device)
            for start in range(0, self.length, chunk):
                rows = source[start : start + chunk].float() - mu
                torch.matmul(rows, w, out=out[start : start + chunk])  # whiten(), in place
            whitened.append(out)
        return lambda indices: [
            t.index_select(0, indices.to(t.device)).to(device) for t in whitened
        ]

    def statistics(self, batch_size: int, rank: int, world: int) -> list[Statistics]:
        """Each encoder's statistics over all rows; each process reads a contiguous shard."""
        per_rank = math.ceil(self.length / world)
        start, stop = rank * per_rank, min(self.length, (rank + 1) * per_rank)
        stats = [Statistics.empty(d) for d in self.dims]
        for chunk_start in range(start, stop, batch_size):
            indices = torch.arange(chunk_start, min(stop, chunk_start + batch_size))
            for i, (name, rows) in enumerate(zip(self.names, self.rows(indices), strict=True)):
                try:
                    stats[i] = stats[i].update(rows)
                except ValueError as error:
                    raise ValueError(
                        f"Encoder {name!r}, rows {chunk_start}..{indices[-1].item()}: {error}"
                    ) from error
        return [all_reduce(s) for s in stats]


def arrow_matrix(table: pa.Table, column: str) -> Tensor:
    """A list-of-floats Arrow column as a float32 tensor [rows, d]."""
    array = table.column(column).combine_chunks()
    lengths = pc.min_max(pc.list_value_length(array))
    if array.null_count or lengths["min"] != lengths["max"]:
        raise ValueError(
            f"The rows of column {column!r} differ in length or are missing; every row must be "
            "one embedding of the same size."
        )
    values = array.flatten().to_numpy(zero_copy_only=False)
    return torch.from_numpy(np.array(values, dtype=np.float32).reshape(table.num_rows, -1))


def shard(global_indices: Tensor, rank: int, world: int) -> tuple[Tensor, list[int]]:
    """This process's contiguous slice of a global batch, and every slice's size."""
    sizes = [len(part) for part in torch.tensor_split(torch.arange(len(global_indices)), world)]
    start = sum(sizes[:rank])
    return global_indices[start : start + sizes[rank]], sizes


def gather_rows(tensor: Tensor, sizes: list[int]) -> Tensor:
    """Differentiable all-gather of row blocks of unequal sizes, in rank order."""
    if len(sizes) == 1:
        return tensor
    padded = torch.nn.functional.pad(tensor, (0, 0, 0, max(sizes) - tensor.shape[0]))
    parts = distributed_functional.all_gather(padded)
    return torch.cat([part[:size] for part, size in zip(parts, sizes, strict=True)])
