"""Small causal LMs trained from scratch on real text, for the quality benchmark's spaces.

Why: the benchmark needs groups of genuinely different real spaces that are not in this
repository. Decoder LMs trained here from scratch give them: GPT-2 and Llama architectures,
different widths, depths and seeds, each with its own byte-level BPE tokenizer (different vocab
sizes), so no two share a token id or a coordinate.

The training text is English prose from the docstrings of installed Python packages
(:data:`CORPUS_PACKAGES`, `benchmarks.spaces.lm_text`). The benchmark embeds the
bundled sentences (Python *standard-library* docstrings, `relrep_hf.encoding.corpora.load_sentences`),
which are held out: a training paragraph that contains one of them is dropped.

Models are trained once and cached (:func:`default_cache_dir`); each folder loads with
``AutoModel.from_pretrained`` / ``AutoTokenizer.from_pretrained`` and holds ``training.json``
(architecture, parameters, vocab, seconds, losses, held-out perplexity).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from tqdm.auto import tqdm

from benchmarks.spaces.lm_text import corpus_id, training_paragraphs
from relrep_hf.encoding import load_sentences

CACHE_FORMAT = 1  # bump when the training code changes what a cached model is
CORPUS_PACKAGES = ("numpy", "huggingface_hub", "datasets", "accelerate")
QUICK_CORPUS_PACKAGES = ("huggingface_hub",)
QUICK_CORPUS_CHARS = 300_000
END_OF_TEXT = "<|endoftext|>"
HELD_OUT_EVERY = 40  # every 40th paragraph is held out for the perplexity


@dataclass(frozen=True)
class LMSpec:
    """One small LM: architecture, size, tokenizer and training schedule."""

    name: str
    architecture: Literal["gpt2", "llama"]
    width: int
    layers: int
    heads: int
    vocab_size: int
    seed: int
    context: int = 128  # tokens per training block, and the positions the model embeds
    steps: int = 400
    batch_size: int = 16
    learning_rate: float = 2e-3


MODELS: tuple[LMSpec, ...] = (
    LMSpec("gpt2-w128-s0", "gpt2", width=128, layers=2, heads=4, vocab_size=4096, seed=0),
    LMSpec("gpt2-w192-s1", "gpt2", width=192, layers=3, heads=6, vocab_size=6144, seed=1),
    LMSpec("llama-w128-s2", "llama", width=128, layers=2, heads=4, vocab_size=5120, seed=2),
    LMSpec("llama-w160-s3", "llama", width=160, layers=3, heads=5, vocab_size=8000, seed=3),
)
QUICK_MODELS: tuple[LMSpec, ...] = tuple(
    LMSpec(
        f"quick-{spec.name}",
        spec.architecture,
        width=32,
        layers=1 + i % 2,
        heads=2,
        vocab_size=512 + 128 * i,
        seed=spec.seed,
        steps=80,
        batch_size=8,
        learning_rate=5e-3,
    )
    for i, spec in enumerate(MODELS)
)


def cache_root() -> Path:
    """The benchmark's cache: ``$RELREP_HF_CACHE``, else ``$XDG_CACHE_HOME/relrep_hf``
    (``~/.cache/relrep_hf``). Trained models go in ``small_lms/``, derived spaces in ``spaces/``."""
    if os.environ.get("RELREP_HF_CACHE"):
        return Path(os.environ["RELREP_HF_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "relrep_hf"


def default_cache_dir() -> Path:
    """Where the trained LMs are cached: ``cache_root() / "small_lms"``."""
    return cache_root() / "small_lms"


# ---------------------------------------------------------------------------------------------
# Tokenizer and model
# ---------------------------------------------------------------------------------------------


def train_tokenizer(texts: Sequence[str], vocab_size: int, context: int) -> Any:
    """A byte-level BPE tokenizer trained on ``texts``, as a ``PreTrainedTokenizerFast``
    whose only special token is ``<|endoftext|>`` (bos, eos and pad, as GPT-2)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=END_OF_TEXT,
        eos_token=END_OF_TEXT,
        pad_token=END_OF_TEXT,
        model_max_length=context,
    )


def build_model(spec: LMSpec, vocab_size: int, end_of_text: int) -> torch.nn.Module:
    """A freshly initialised causal LM for ``spec`` (seeded)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(spec.seed)
    special = {"bos_token_id": end_of_text, "eos_token_id": end_of_text}
    if spec.architecture == "gpt2":
        config = GPT2Config(
            vocab_size=vocab_size,
            n_positions=spec.context,
            n_embd=spec.width,
            n_layer=spec.layers,
            n_head=spec.heads,
            **special,
        )
        return GPT2LMHeadModel(config)
    if spec.architecture == "llama":
        config = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=spec.width,
            intermediate_size=3 * spec.width,
            num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads,
            num_key_value_heads=spec.heads,
            max_position_embeddings=spec.context,
            tie_word_embeddings=True,
            pad_token_id=end_of_text,
            **special,
        )
        return LlamaForCausalLM(config)
    raise ValueError(f"Invalid architecture {spec.architecture!r}. Valid: 'gpt2', 'llama'.")


def _token_stream(tokenizer: Any, texts: Sequence[str], end_of_text: int) -> torch.Tensor:
    """All texts' tokens in one 1-D tensor, each text followed by ``<|endoftext|>``."""
    ids: list[int] = []
    for encoded in tokenizer.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False):
        ids.extend(encoded.ids)
        ids.append(end_of_text)
    return torch.tensor(ids, dtype=torch.long)


@torch.no_grad()
def held_out_loss(model: torch.nn.Module, stream: torch.Tensor, context: int) -> float:
    """Mean next-token loss (nats) over the non-overlapping blocks of ``stream``."""
    model.eval()
    blocks = stream[: len(stream) // context * context].view(-1, context)  # [B, context]
    total, count = 0.0, 0
    for start in range(0, len(blocks), 32):
        batch = blocks[start : start + 32]
        loss = model(input_ids=batch, labels=batch).loss
        total += loss.item() * batch.numel()
        count += batch.numel()
    return total / count


# ---------------------------------------------------------------------------------------------
# Training and the cache
# ---------------------------------------------------------------------------------------------


def spec_key(spec: LMSpec, corpus: dict[str, str]) -> str:
    """Hash of what determines a trained model: its spec, the corpus and the code's format."""
    payload = json.dumps({"spec": asdict(spec), "corpus": corpus, "format": CACHE_FORMAT})
    return hashlib.sha256(payload.encode()).hexdigest()[:10]


def train_lm(
    spec: LMSpec, paragraphs: Sequence[str], folder: Path, *, progress: bool = True
) -> dict[str, Any]:
    """Train ``spec`` on ``paragraphs`` and save model, tokenizer and ``training.json`` into
    ``folder`` (written to a temporary sibling, then renamed: never half a model)."""
    started = time.perf_counter()
    cpu_started = time.process_time()
    held_out = list(paragraphs[::HELD_OUT_EVERY])
    train = [p for i, p in enumerate(paragraphs) if i % HELD_OUT_EVERY]
    tokenizer = train_tokenizer(train, spec.vocab_size, spec.context)
    end_of_text = tokenizer.convert_tokens_to_ids(END_OF_TEXT)
    train_stream = _token_stream(tokenizer, train, end_of_text)
    held_out_stream = _token_stream(tokenizer, held_out, end_of_text)
    model = build_model(spec, len(tokenizer), end_of_text)
    initial_held_out = held_out_loss(model, held_out_stream, spec.context)

    generator = torch.Generator().manual_seed(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate, weight_decay=0.01)
    warmup = max(1, spec.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (
            min(1.0, (step + 1) / warmup)
            * 0.5
            * (1 + math.cos(math.pi * min(step, spec.steps) / spec.steps))
        ),
    )
    losses = []
    bar = tqdm(range(spec.steps), desc=f"training {spec.name}", disable=not progress)
    model.train()
    for _ in bar:
        starts = torch.randint(
            len(train_stream) - spec.context, (spec.batch_size,), generator=generator
        )
        batch = torch.stack([train_stream[s : s + spec.context] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss  # [batch, context] -> mean nats
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{loss.item():.3f}")
    final_held_out = held_out_loss(model, held_out_stream, spec.context)
    tail = losses[-max(1, spec.steps // 10) :]
    record = {
        "spec": asdict(spec),
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "train_paragraphs": len(train),
        "train_tokens": len(train_stream),
        "held_out_tokens": len(held_out_stream),
        "tokens_seen": spec.steps * spec.batch_size * spec.context,
        "first_loss": losses[0],
        "final_loss": sum(tail) / len(tail),
        "initial_held_out_perplexity": math.exp(initial_held_out),
        "held_out_perplexity": math.exp(final_held_out),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
        "torch_threads": torch.get_num_threads(),
    }
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "training.json").write_text(json.dumps(record, indent=2) + "\n")
        try:
            os.rename(staging, folder)
        except OSError:
            if not (folder / "training.json").is_file():
                raise
            return read_record(folder)  # another process trained the same model meanwhile
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return record


def ensure_small_lms(
    *,
    quick: bool = False,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> dict[str, Path]:
    """``{name: folder}`` of every model of :data:`MODELS` (``quick``: :data:`QUICK_MODELS`),
    training those not cached yet, on text that holds none of the bundled sentences."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    packages = QUICK_CORPUS_PACKAGES if quick else CORPUS_PACKAGES
    corpus = corpus_id(packages)
    specs = QUICK_MODELS if quick else MODELS
    folders = {spec.name: root / f"{spec.name}-{spec_key(spec, corpus)}" for spec in specs}
    missing = [spec for spec in specs if not (folders[spec.name] / "training.json").is_file()]
    if missing:
        held_out = load_sentences()["text"]  # the benchmark's evaluation text
        paragraphs = training_paragraphs(
            packages, exclude=held_out, max_chars=QUICK_CORPUS_CHARS if quick else None
        )
        for spec in missing:
            if (folders[spec.name] / "training.json").is_file():
                continue  # another process trained it meanwhile
            record = train_lm(spec, paragraphs, folders[spec.name], progress=progress)
            if progress:
                print(summary_line(record))
    return folders


def read_record(folder: str | os.PathLike) -> dict[str, Any]:
    """The ``training.json`` of a trained model folder."""
    return json.loads((Path(folder) / "training.json").read_text())


def summary_line(record: dict[str, Any]) -> str:
    """One line per model for logs and reports."""
    spec = record["spec"]
    return (
        f"{spec['name']}: {record['architecture']} {spec['layers']}x{spec['width']}, "
        f"{record['parameters'] / 1e6:.2f}M params, vocab {record['vocab_size']}, "
        f"{record['tokens_seen'] / 1e6:.2f}M tokens seen in {record['seconds']:.0f} s "
        f"({record['cpu_seconds']:.0f} CPU s), loss {record['first_loss']:.2f} -> "
        f"{record['final_loss']:.2f}, held-out perplexity "
        f"{record['initial_held_out_perplexity']:.0f} -> {record['held_out_perplexity']:.1f}"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, dict]:
    """Train the small LMs not cached yet (4 models, ~10-15 min on 2 idle cores; ``--quick``: 4
    much smaller ones, seconds) and print their records; cached ones are only read."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks small_lms", description=main.__doc__
    )
    parser.add_argument("--quick", action="store_true", help="tiny models, for CI")
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help=f"default: {default_cache_dir()}"
    )
    parser.add_argument("--json", action="store_true", help="print the training records as JSON")
    args = parser.parse_args(argv)
    folders = ensure_small_lms(quick=args.quick, cache_dir=args.cache_dir)
    records = {name: read_record(folder) for name, folder in folders.items()}
    for name, folder in folders.items():
        print(f"{summary_line(records[name])}\n    {folder}")
    if args.json:
        print(json.dumps(records, indent=2))
    return records
