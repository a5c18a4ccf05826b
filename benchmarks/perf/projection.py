"""RelativeProjector forward against a bare ``torch.addmm`` of the same shapes.

On a GPU where one is (#38's target there: <= 1.02x one addmm), each call timed to the end of
its queued work; else on the CPU."""

from __future__ import annotations

import torch

from benchmarks.common import interleaved_medians, row
from relrep_hf import RelativeProjector, Statistics


def _synchronized(function):
    """``function`` followed by a wait for the GPU's queued work (where a GPU is)."""
    if not torch.cuda.is_available():
        return function
    return lambda: (function(), torch.cuda.synchronize())


CALLS = 1000  # small batches: each timed run is this many calls (the per-call overhead shows)


def _repeated(function, calls: int):
    """``function`` called ``calls`` times in a row (one timed run)."""

    def many():
        for _ in range(calls):
            function()

    return many


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads: none (the core install runs it)."""
    return {}


def run(quick: bool = False) -> list[dict]:
    n, d, m = (2048, 768, 300) if quick else (65536, 768, 300)
    timing = {"repeats": 1, "warmup": 1} if quick else {}  # quick: a crash check, not a figure
    return _rows(n, d, m, 1, timing) + _rows(8, d, m, CALLS // 10 if quick else CALLS, timing)


def _rows(n: int, d: int, m: int, calls: int, timing: dict) -> list[dict]:
    """Both similarities on ``n`` rows, each timed run ``calls`` calls (``timing``: the
    repeats and warmup of `interleaved_medians`, its defaults when empty)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=generator).to(device)
    support = torch.randn(4096, d, generator=generator, dtype=torch.float64)
    results = []
    for similarity in ("wip", "cosine"):
        projector = RelativeProjector.from_statistics(
            support[:m], Statistics.from_embeddings(support), similarity=similarity
        ).to(device)
        weight, bias = projector.weight.detach().clone(), projector.bias.detach().clone()
        with torch.inference_mode():
            if similarity == "wip":
                bare = lambda b=bias, w=weight: torch.addmm(b, x, w)  # noqa: E731
                baseline = "torch.addmm"
            else:
                bare = lambda w=weight: torch.nn.functional.normalize(x, dim=-1) @ w  # noqa: E731
                baseline = "normalize + matmul"
            arms = {"bare": bare, "projector": lambda p=projector: p(x)}
            arms = {k: _synchronized(_repeated(f, calls)) for k, f in arms.items()}
            times = interleaved_medians(arms, **timing)
        results.append(
            row(
                f"projector forward ({similarity}, N={n}, d={d}, m={m}, float32, {device}"
                + (f", {calls} calls" if calls > 1 else "")
                + ")",
                baseline,
                times["bare"],
                times["projector"],
                "s",
            )
        )
    return results
