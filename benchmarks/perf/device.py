"""The trainer and extraction on a GPU, against the same code on the same machine's CPU.

Needs CUDA (``python -m benchmarks device``; not in the default list of
``python -m benchmarks``, which runs where CI runs, without one). Each row pairs a GPU run with a baseline run in the same
process:

- PARAM (`ParamTrainer`, float32) on the GPU against the same trainer on the CPU
  (``Accelerator(cpu=True)``, every core), at `param`'s sizes, with the largest relative
  difference between the two devices' losses over the first epoch, step by step;
- PARAM on the GPU against the paper's formulas read directly (`param`'s autograd
  version) on the GPU; and with ``bf16=True`` against float32;
- `extract_embeddings` (a BERT of all-MiniLM-L6-v2's shape, built from its config with random
  weights: the time does not depend on the weights) over the bundled sentences, on the GPU
  against the CPU, and against a plain loop (tokenize, forward, mean-pool, no cache) on the GPU.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState

from benchmarks.common import row
from benchmarks.perf.param import loss_deviation
from relrep_hf import ParamTrainer, ParamTrainingArguments
from relrep_hf.encoding import embeddings_tensor, extract_embeddings, load_sentences
from tests.fixtures.param_reference import direct_epoch, random_spaces

EPOCHS = 3
DEVICE = "cuda"


def _param(spaces, m: int, k: int, *, cpu: bool, bf16: bool = False, logging_steps: int = 1):
    with tempfile.TemporaryDirectory() as out:
        args = ParamTrainingArguments(
            out, num_anchors=m, support_size=k, num_train_epochs=EPOCHS, save_strategy="no",
            disable_tqdm=True, logging_steps=logging_steps, bf16=bf16,
        )  # fmt: skip
        AcceleratorState._reset_state(reset_partial_state=True)  # one process, two devices
        trainer = ParamTrainer(args, spaces, accelerator=Accelerator(cpu=cpu))
        trainer.train()
    return trainer


def _synchronized(function):
    """(seconds, result) of ``function()``, the GPU's queued work included."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = function()
    torch.cuda.synchronize()
    return time.perf_counter() - start, result


def _param_rows(quick: bool, repeats: int) -> list[dict]:
    n, d, k, m, encoders = (4000, 256, 1000, 100, 3) if quick else (20000, 768, 5000, 300, 3)
    spaces = random_spaces(n, d, encoders)
    on_gpu = {name: x.to(DEVICE) for name, x in spaces.items()}
    cpu, gpu, gpu_logged, gpu_bf16, direct = [], [], [], [], []
    _param(on_gpu, m, k, cpu=False)  # warm-up: CUDA context, kernels, cuBLAS handles
    for _ in range(repeats):
        reference = _param(spaces, m, k, cpu=True)
        cpu.append(reference.train_runtime["epoch_seconds"])
        trainer = _param(on_gpu, m, k, cpu=False)
        gpu_logged.append(trainer.train_runtime["epoch_seconds"])
        quiet = _param(on_gpu, m, k, cpu=False, logging_steps=10)
        gpu.append(quiet.train_runtime["epoch_seconds"])
        low = _param(on_gpu, m, k, cpu=False, bf16=True, logging_steps=10)
        gpu_bf16.append(low.train_runtime["epoch_seconds"])
        # reads every step's losses back, so its clock stops after the GPU's work
        direct.append(direct_epoch(on_gpu, trainer.args, trainer.support_indices)[0])
    steps = -(-n // trainer.args.train_batch_size)
    size = f"N={n}, d={d}, K={k}, m={m}, {encoders} encoders"
    median = statistics.median
    return [
        row(
            f"PARAM epoch on {torch.cuda.get_device_name()} ({size})",
            f"the same trainer on this machine's CPU ({torch.get_num_threads()} threads)",
            median(cpu),
            median(gpu),
            "s",
            max_relative_loss_difference_gpu_cpu_first_epoch=loss_deviation(
                trainer.log_history[:steps], reference.log_history[:steps]
            ),
            logging_every_step_seconds=median(gpu_logged),
        ),
        row(
            f"PARAM epoch on the GPU, every step logged ({size})",
            "the paper's formulas read directly, autograd, on the GPU (every step read back)",
            median(direct),
            median(gpu_logged),
            "s",
        ),
        row(
            f"PARAM epoch on the GPU, bf16=True ({size})",
            "float32 on the GPU",
            median(gpu),
            median(gpu_bf16),
            "s",
            max_relative_loss_deviation_from_float32=loss_deviation(
                low.log_history, quiet.log_history
            ),
        ),
    ]


def wordpiece_tokenizer(sentences: list[str]):
    """A WordPiece tokenizer trained on the sentences: real tokenization lengths, no download."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    backend.train_from_iterator(
        sentences, trainers.WordPieceTrainer(vocab_size=8000, special_tokens=special)
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=256,
    )  # fmt: skip


def _minilm_shaped_encoder(sentences: list[str]):
    """A BERT of all-MiniLM-L6-v2's shape (random weights) and `wordpiece_tokenizer`."""
    from transformers import BertConfig, BertModel

    tokenizer = wordpiece_tokenizer(sentences)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=384,
                        num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)  # fmt: skip
    return BertModel(config).eval(), tokenizer


def _plain_loop(encoder, tokenizer, sentences: list[str], batch_size: int) -> torch.Tensor:
    rows = []
    with torch.inference_mode():
        for start in range(0, len(sentences), batch_size):
            batch = tokenizer(
                sentences[start : start + batch_size], padding=True, truncation=True,
                return_tensors="pt",
            ).to(encoder.device)  # fmt: skip
            hidden = encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            rows.append(((hidden * mask).sum(1) / mask.sum(1)).cpu())
    return torch.cat(rows)


def _extraction_rows(quick: bool) -> list[dict]:
    dataset = load_sentences(1000 if quick else None)
    sentences = list(dataset["text"])
    encoder, tokenizer = _minilm_shaped_encoder(sentences)
    batch_size = 64

    def extract(device: str) -> torch.Tensor:
        with tempfile.TemporaryDirectory() as cache:
            embedded = extract_embeddings(
                encoder.to(device), tokenizer, dataset, pooling="mean", batch_size=batch_size,
                cache_dir=cache, show_progress=False,
            )  # fmt: skip
            return embeddings_tensor(embedded)

    extract(DEVICE)  # warm-up
    gpu, loop = [], []
    for _ in range(3):  # interleaved
        seconds, on_gpu = _synchronized(lambda: extract(DEVICE))
        gpu.append(seconds)
        seconds, plain = _synchronized(
            lambda: _plain_loop(encoder.to(DEVICE), tokenizer, sentences, batch_size)
        )
        loop.append(seconds)
    gpu_seconds, plain_seconds = statistics.median(gpu), statistics.median(loop)
    start = time.perf_counter()
    on_cpu = extract("cpu")
    cpu_seconds = time.perf_counter() - start
    size = f"{len(sentences)} sentences, MiniLM-L6 shape, batch {batch_size}"
    return [
        row(
            f"extract_embeddings on the GPU ({size})",
            f"the same on this machine's CPU ({torch.get_num_threads()} threads)",
            cpu_seconds,
            gpu_seconds,
            "s",
            max_abs_difference_gpu_cpu=float((on_gpu - on_cpu).abs().max()),
        ),
        row(
            f"extract_embeddings on the GPU, cached to Arrow ({size})",
            "a plain loop on the GPU: tokenize, forward, mean-pool, no cache",
            plain_seconds,
            gpu_seconds,
            "s",
            max_abs_difference_from_plain_loop=float((on_gpu - plain).abs().max()),
        ),
    ]


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads: none (it needs a CUDA GPU, which `run` checks)."""
    return {}


def run(quick: bool = False, repeats: int = 3) -> list[dict]:
    if not torch.cuda.is_available():
        raise SystemExit("device needs a CUDA GPU; run it where torch.cuda.is_available().")
    return _param_rows(quick, repeats) + _extraction_rows(quick)
