"""RelativeProjector forward against a bare ``torch.addmm`` of the same shapes."""

from __future__ import annotations

import torch

from benchmarks.common import interleaved_medians, row
from relrep_hf import RelativeProjector, Statistics


def run(quick: bool = False) -> list[dict]:
    n, d, m = (8192, 768, 300) if quick else (65536, 768, 300)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=generator)
    support = torch.randn(4096, d, generator=generator, dtype=torch.float64)
    results = []
    for similarity in ("wip", "cosine"):
        projector = RelativeProjector.from_statistics(
            support[:m], Statistics.from_embeddings(support), similarity=similarity
        )
        weight, bias = projector.weight.detach().clone(), projector.bias.detach().clone()
        with torch.inference_mode():
            if similarity == "wip":
                bare = lambda b=bias, w=weight: torch.addmm(b, x, w)  # noqa: E731
                baseline = "torch.addmm"
            else:
                bare = lambda w=weight: torch.nn.functional.normalize(x, dim=-1) @ w  # noqa: E731
                baseline = "normalize + matmul"
            times = interleaved_medians({"bare": bare, "projector": lambda p=projector: p(x)})
        results.append(
            row(
                f"projector forward ({similarity}, N={n}, d={d}, m={m}, float32)",
                baseline,
                times["bare"],
                times["projector"],
                "s",
            )
        )
    return results
