"""Extraction over a `datasets` dataset larger than a memory budget: peak memory.

A fresh process memory-maps an Arrow dataset from disk (a short ``text`` column and a 4 KiB
``payload`` column per row that extraction never reads, so the dataset on disk is several
times the budget) and runs `relrep_hf.encoding.extraction.extract_embeddings` with a tiny BERT
(1 layer, d=256) over every row, writing the embeddings to an Arrow cache. Its peak RSS
growth (sampled every 2 ms) is compared with the budget and with the dataset's size on disk;
the ratio is peak / dataset size (below 1: extraction never held the dataset in memory).

RSS counts the pages of the memory-mapped dataset that were read (``RssFile``: page cache,
given back under pressure) as well as allocated memory (``RssAnon``); both peaks are reported,
the row's value being the allocated one (Linux; elsewhere the RSS).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import datasets
import numpy as np
import torch
from datasets.arrow_writer import ArrowWriter
from transformers import AutoModel, AutoTokenizer

from benchmarks.common import peak_memories, row
from relrep_hf.encoding import extract_embeddings

MIB = 1024**2
BUDGET_MIB = 128
PAYLOAD = 4096
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]


def write_dataset(path: Path, rows: int) -> None:
    """An Arrow file of ``rows`` short texts with a large payload each, written in blocks."""
    features = datasets.Features({"text": datasets.Value("string"),
                                  "payload": datasets.Value("binary")})  # fmt: skip
    rng = np.random.default_rng(0)
    with ArrowWriter(path=str(path), features=features) as writer:
        for start in range(0, rows, 1024):
            n = min(1024, rows - start)
            words = rng.integers(0, len(WORDS), size=(n, 6))
            writer.write_batch({
                "text": [" ".join(WORDS[i] for i in line) for line in words],
                "payload": [rng.bytes(PAYLOAD) for _ in range(n)],
            })  # fmt: skip
        writer.finalize()


def tiny_encoder(folder: Path) -> None:
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", model_max_length=16
    )
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=256, num_hidden_layers=1,
                        num_attention_heads=4, intermediate_size=512,
                        max_position_embeddings=16)  # fmt: skip
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def extract(data_file: str, encoder_folder: str, cache_dir: str) -> int:
    """What the measured process runs: the whole extraction, from the files on disk (the
    libraries are imported with this module, before the baseline is taken)."""
    torch.set_num_threads(1)
    dataset = datasets.Dataset.from_file(data_file)  # memory-mapped, not loaded
    encoder = AutoModel.from_pretrained(encoder_folder)
    tokenizer = AutoTokenizer.from_pretrained(encoder_folder)
    embedded = extract_embeddings(
        encoder, tokenizer, dataset, pooling="mean", batch_size=256, cache_dir=cache_dir,
        show_progress=False,
    )  # fmt: skip
    return len(embedded)


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads: none (the core install runs it)."""
    return {}


def run(quick: bool = False) -> list[dict]:
    rows = 2_000 if quick else 80_000  # quick: a crash check (the data under the budget)
    with tempfile.TemporaryDirectory(prefix="relrep-bench-extraction-") as tmp:
        folder = Path(tmp)
        data_file = folder / "data.arrow"
        write_dataset(data_file, rows)
        tiny_encoder(folder / "encoder")
        size_mib = data_file.stat().st_size / MIB
        seconds, peaks = peak_memories(
            extract, str(data_file), str(folder / "encoder"), str(folder / "cache"), quick=quick
        )
        embeddings_mib = sum(p.stat().st_size for p in (folder / "cache").rglob("*.arrow")) / MIB
    peak_mib = peaks["anon"] / MIB
    return [
        row(
            f"extraction peak allocated memory (N={rows}, d=256, tiny BERT)",
            "dataset size on disk",
            size_mib,
            peak_mib,
            "MiB",
            budget_mib=BUDGET_MIB,
            within_budget=bool(peak_mib <= BUDGET_MIB),
            dataset_larger_than_budget=bool(size_mib > BUDGET_MIB),
            embeddings_written_mib=embeddings_mib,
            peak_rss_mib=peaks["rss"] / MIB,
            peak_mapped_file_mib=peaks["file"] / MIB,
            seconds=seconds,
        )
    ]
