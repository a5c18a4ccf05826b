"""Run by ``tests/test_reliability.py`` under ``torchrun --nproc_per_node 2``: each rank
accumulates `Statistics` over its own, uneven shard of the rows, ``all_reduce`` merges them,
and every rank saves what it got to ``OUT-<rank>.pt``.

    python -m torch.distributed.run --standalone --nproc_per_node 2 \
        tests/distributed_statistics.py OUT
"""

from __future__ import annotations

import sys

import torch

from relrep_hf.functional.statistics import Statistics, all_reduce

N, D = 1001, 12
# Row boundaries of the two ranks' shards: uneven, and each rank empty once.
SHARDINGS = {"uneven": (0, 137, N), "rank 1 empty": (0, N, N), "rank 0 empty": (0, 0, N)}
BATCH_SIZES = (50, 333)  # per rank: the ranks also split their shard differently


def rows() -> torch.Tensor:
    """The float32 embeddings every test computes statistics of: correlated, far from 0."""
    generator = torch.Generator().manual_seed(0)
    mixing = torch.randn(D, D, generator=generator)
    shift = 50 * torch.randn(D, generator=generator)
    return torch.randn(N, D, generator=generator) @ mixing + shift


def main(out: str) -> None:
    torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank()
    data = rows()
    results = {}
    for name, bounds in SHARDINGS.items():
        stats = Statistics.empty(D)
        for batch in data[bounds[rank] : bounds[rank + 1]].split(BATCH_SIZES[rank]):
            stats = stats.update(batch)
        results[name] = {"local_count": stats.count, **all_reduce(stats).to_dict()}
    torch.save(results, f"{out}-{rank}.pt")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
