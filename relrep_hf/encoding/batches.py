"""Batches: tokenizing at the model's input limit, and the one encoding loop `encode_in_order`.

`encode_in_order` (run by `RelativeWrapper.encode` and `extract_embeddings`) sorts the texts by
length in characters (as sentence-transformers does: nothing is tokenized up front), tokenizes
and pads each batch at the model's real input limit (NumPy), runs a forward under
``torch.inference_mode()`` in eval mode, and puts every row back at its input's position in one
indexed copy at the end. On a GPU the next batch is tokenized in a thread while the device runs
this one; inputs go from pinned memory and outputs stay on the device (or go to pinned memory).
Tokenizing a whole window first cost an H200 as much time as the window's BERT-base forwards
(#38).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from itertools import chain
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from transformers import BatchEncoding, PreTrainedConfig, PreTrainedTokenizerBase

from relrep_hf.encoding.models import (
    InputModality,
    _text_config,
    device_and_dtype,
    input_modality,
)
from relrep_hf.encoding.pooling import masks_checked_on_host
from relrep_hf.encoding.progress import progress_bar
from relrep_hf.utils.defaults import DEFAULT_ENCODE_BATCH_SIZE
from relrep_hf.utils.deprecated_import import deprecated_attributes

# Tokenizers without a known limit report a huge sentinel (int(1e30)); no real model reads more
# than this many tokens, so anything above it means "unknown".
_MAX_SANE_LENGTH = 10**8

# Config attributes that hold the number of positions a model can embed, by model family.
_POSITION_LIMIT_ATTRIBUTES = ("max_position_embeddings", "n_positions", "n_ctx",
                              "max_sequence_length", "max_seq_len", "max_seq_length", "seq_length")  # fmt: skip


def max_input_length(tokenizer: Any, model: nn.Module | PreTrainedConfig) -> int:
    """The number of tokens to truncate inputs at for ``model``.

    That is the tokenizer's ``model_max_length`` unless it is the "unknown" sentinel, capped by
    the number of positions the model can embed (``max_position_embeddings``, ``n_positions``,
    ...). ``config.max_length`` is never used: it is a generation default, not an input limit.
    """
    config = getattr(model, "config", model)
    model_limit = _position_limit(config) if isinstance(config, PreTrainedConfig) else None
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and 0 < tokenizer_limit <= _MAX_SANE_LENGTH:
        return min(tokenizer_limit, model_limit) if model_limit else tokenizer_limit
    if model_limit:
        return model_limit
    names = ", ".join(_POSITION_LIMIT_ATTRIBUTES)
    raise ValueError(
        f"Cannot tell the input length limit: tokenizer.model_max_length is {tokenizer_limit!r} "
        f"(unset) and the model config has none of {names}. Set tokenizer.model_max_length to "
        f"the number of tokens the model was trained on."
    )


def tokenize(
    tokenizer: Any, texts: Sequence[str], max_length: int
) -> tuple[BatchEncoding, list[int]]:
    """``texts`` as padded ``pt`` tensors truncated at ``max_length`` tokens, and the indices
    of the truncated texts. Padding (on ``tokenizer.padding_side``) is done here, so tokenizers
    without a pad token (GPT-2) work unchanged: pads hold the eos id (else 0), hidden by the
    mask. The tokenizer object is never modified.
    """
    if isinstance(texts, str) or not texts:
        raise ValueError(
            f"Expected a non-empty list of strings, got {texts!r:.80}. Wrap a single text in a "
            f"list: tokenize(tokenizer, [text], max_length)."
        )
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(
            f"Expected max_length to be a positive int, got {max_length!r}. Use "
            f"max_input_length(tokenizer, model)."
        )
    encoded, _, truncated = _tokenize_rows(tokenizer, list(texts), max_length)
    return _pad(tokenizer, encoded), truncated


def _tokenize_rows(
    tokenizer: Any, texts: list[str], max_length: int
) -> tuple[dict[str, list[list[int]]], list[int], list[int]]:
    """Every text tokenized once, unpadded (rows per key, no attention mask: `_pad` makes it),
    the token counts before truncation and the indices of the texts truncated at
    ``max_length``."""
    # verbose=False: the untruncated pass would otherwise warn about every long text.
    encoded = dict(tokenizer(texts, padding=False, truncation=False, verbose=False))
    encoded.pop("attention_mask", None)
    lengths = [len(ids) for ids in encoded["input_ids"]]
    truncated = [i for i, n in enumerate(lengths) if n > max_length]
    if truncated:
        # Re-tokenize only the long texts, so special tokens (e.g. [SEP]) survive truncation.
        short = tokenizer(
            [texts[i] for i in truncated],
            padding=False,
            truncation=True,
            max_length=max_length,
            verbose=False,
        )
        for key, rows in encoded.items():
            for i, row in zip(truncated, short[key], strict=True):
                rows[i] = row
    return encoded, lengths, truncated


def encode_in_order(
    encoder: nn.Module,
    preprocessor: Any,
    inputs: Iterable[Any],
    forward: Callable[[Mapping[str, Tensor]], tuple[Tensor, ...]],
    *,
    batch_size: int = DEFAULT_ENCODE_BATCH_SIZE,
    max_length: int | None = None,
    eval_modules: Sequence[nn.Module] = (),
    progress: Any = None,
    show_progress: bool | None = None,
    warn: bool = True,
    output_device: torch.device | str | None = None,
    output_dtype: torch.dtype | None = None,
) -> tuple[tuple[Tensor, ...], list[int]]:
    """Run ``forward`` over ``inputs`` in length-sorted batches; outputs in input order.

    Args:
        encoder: the model; it sets the modality, the device batches go to and the dtype of
            floating inputs (``pixel_values``).
        preprocessor: the encoder's tokenizer, or its image processor for image models.
        inputs: a non-empty list (or other iterable) of strings, or of PIL images.
        forward: called on each batch (on the encoder's device); returns a tuple of tensors
            whose first dimension is the batch.
        batch_size: inputs per forward.
        max_length: tokens to truncate texts at; default `max_input_length`.
        eval_modules: modules besides ``encoder`` to hold in eval mode during the run.
        progress: a bar (``update(n)``) told of every batch; default a bar of its own, shown
            when ``show_progress`` (default: for 1024 inputs or more).
        warn: one `warn_truncated` warning for the inputs that were truncated.
        output_device, output_dtype: of the returned tensors (default: as ``forward`` gives).

    Returns:
        The outputs ``[N, ...]`` in the order of ``inputs``, and the (sorted) indices of the
        inputs that were truncated.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    modality = input_modality(encoder)
    items = _check_inputs(inputs, modality)
    order, batch_of, truncated, max_length = _batches(
        encoder, preprocessor, items, modality, max_length
    )
    bar = progress_bar(len(items), show_progress, desc="Encoding") if progress is None else None
    device, dtype = device_and_dtype(encoder)
    outputs = _Outputs(order, output_device, output_dtype)
    with (
        bar if bar is not None else nullcontext(progress) as progress,
        torch.inference_mode(),
        _eval_mode(encoder, *eval_modules),
        masks_checked_on_host(),
    ):
        for start, positions, batch in _prefetched(
            batch_of, order, batch_size, device.type != "cpu"
        ):
            batch = {key: _to_model(v, device, dtype) for key, v in batch.items()}
            outputs.write(start, forward(batch))
            progress.update(len(positions))
        results = outputs.in_input_order()
    if warn:
        warn_truncated(truncated, len(items), max_length or 0, stacklevel=5)
    return results, sorted(truncated)


def _batches(
    encoder: nn.Module,
    preprocessor: Any,
    items: list[Any],
    modality: InputModality,
    max_length: int | None,
) -> tuple[list[int], Callable[[list[int]], Mapping[str, Any]], list[int], int | None]:
    """The order to encode ``items`` in (texts: longest in characters first, so that a batch
    that does not fit in memory fails early, not at the end), the batch of given positions, the
    truncated items (filled in as batches are made) and the truncation length decided. Texts
    are tokenized and padded per batch, when it is made."""
    if modality != "text":
        return (
            list(range(len(items))),
            lambda positions: preprocessor(
                images=[items[i] for i in positions], return_tensors="pt"
            ),
            [],
            max_length,
        )
    if not isinstance(preprocessor, PreTrainedTokenizerBase):
        raise ValueError(
            f"{type(encoder).__name__} reads text, but the preprocessor is a "
            f"{type(preprocessor).__name__}. Pass the model's tokenizer "
            f"(AutoTokenizer.from_pretrained(...))."
        )
    if max_length is None:
        max_length = max_input_length(preprocessor, encoder)
    empty = [i for i, text in enumerate(items) if not text]
    if empty and not _tokenize_rows(preprocessor, [""], max_length)[1][0]:
        _check_tokens(empty)  # at once, not after the longer texts
    order = sorted(range(len(items)), key=lambda i: -len(items[i]))
    truncated: list[int] = []

    def batch_of(positions: list[int]) -> BatchEncoding:
        encoded, lengths, cut = _tokenize_rows(
            preprocessor, [items[i] for i in positions], max_length
        )
        _check_tokens([positions[j] for j, n in enumerate(lengths) if n == 0])
        truncated.extend(positions[j] for j in cut)
        return _pad(preprocessor, encoded)

    return order, batch_of, truncated, max_length


def _check_tokens(empty: list[int]) -> None:
    """Refuse inputs that tokenize to no tokens: there is nothing to pool."""
    if empty:
        raise ValueError(
            f"Inputs {sorted(empty)[:5]} tokenize to no tokens at all (empty strings?), so there "
            f"is nothing to pool. Drop them before encoding."
        )


def _prefetched(
    batch_of: Callable[[list[int]], Mapping[str, Any]],
    order: list[int],
    batch_size: int,
    threaded: bool,
) -> Iterator[tuple[int, list[int], Mapping[str, Any]]]:
    """``(start, positions, batch)`` in ``order``; ``threaded`` (on an accelerator) makes the
    next batch in a thread while the device runs this one (on the CPU the forward wants every
    core)."""
    starts = range(0, len(order), batch_size)
    if not threaded:
        for start in starts:
            positions = order[start : start + batch_size]
            yield start, positions, batch_of(positions)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="relrep-tokenize") as pool:
        pending = pool.submit(batch_of, order[:batch_size])
        for start in starts:
            batch = pending.result()
            if start + batch_size < len(order):
                pending = pool.submit(batch_of, order[start + batch_size : start + 2 * batch_size])
            yield start, order[start : start + batch_size], batch


class _Outputs:
    """The outputs of every batch, each ``[rows, ...]`` tensor allocated on the first batch on
    ``device`` in ``dtype`` (default: as the batch's). Rows computed on the CPU go straight to
    their input's position; rows computed on a GPU go to slots in encoding order (on the GPU, or
    in pinned memory for the CPU) without waiting for it, and `in_input_order` puts them back
    with one indexed copy at the end."""

    def __init__(self, order: list[int], device: Any, dtype: torch.dtype | None) -> None:
        self.order, self.device, self.dtype = order, device, dtype
        self.buffers: list[Tensor] = []
        self.source = torch.device("cpu")
        self.pinned = False

    def write(self, start: int, results: Sequence[Tensor]) -> None:
        if not self.buffers:
            self.source = results[0].device
            target = torch.device(self.device) if self.device is not None else self.source
            self.pinned = target.type == "cpu" and self.source.type == "cuda"
            self.buffers = [
                torch.empty(
                    (len(self.order), *r.shape[1:]),
                    dtype=self.dtype or r.dtype,
                    device=target,
                    pin_memory=self.pinned,
                )
                for r in results
            ]
        end = start + results[0].shape[0]
        for buffer, result in zip(self.buffers, results, strict=True):
            result = result.to(dtype=buffer.dtype)
            if self.source.type == "cpu":  # no device to wait for: straight to input order
                buffer[torch.as_tensor(self.order[start:end])] = result.to(buffer.device)
            else:
                buffer[start:end].copy_(result, non_blocking=self.pinned)

    def in_input_order(self) -> tuple[Tensor, ...]:
        if self.source.type == "cpu":
            return tuple(self.buffers)
        if self.pinned:
            torch.cuda.current_stream(self.source).synchronize()
        outputs = []
        for buffer in self.buffers:
            index = torch.as_tensor(self.order, device=buffer.device)
            outputs.append(torch.empty_like(buffer, pin_memory=False).index_copy_(0, index, buffer))
        return tuple(outputs)


def warn_truncated(
    truncated: Sequence[int], total: int, max_length: int, stacklevel: int = 3
) -> None:
    """One warning for all the inputs that were truncated, e.g. "3 of 100 inputs were ..."."""
    if not truncated:
        return
    shown = ", ".join(str(i) for i in list(truncated)[:5])
    more = ", ..." if len(truncated) > 5 else ""
    warnings.warn(
        f"{len(truncated)} of {total} inputs were longer than {max_length} tokens and were "
        f"truncated (inputs {shown}{more}). Their embeddings describe the first {max_length} "
        f"tokens only; split long texts to embed all of them.",
        UserWarning,
        stacklevel=stacklevel,
    )


# ---------------------------------------------------------------------------------------------
# Private helpers
# ---------------------------------------------------------------------------------------------


def _check_inputs(inputs: Iterable[Any], modality: InputModality) -> list[Any]:
    """``inputs`` as a list, or a ValueError naming the first input that cannot be encoded."""
    kind = "strings" if modality == "text" else "PIL images"
    if isinstance(inputs, (str, bytes, Mapping, Tensor)) or not isinstance(inputs, Iterable):
        raise ValueError(
            f"Expected a list of {kind}, got {type(inputs).__name__}. Wrap a single input in a "
            f"list: encode([x])."
        )
    items = list(inputs)
    if not items:
        raise ValueError(f"Expected a non-empty list of {kind}, got an empty list.")
    if modality == "text":
        wrong = next(((i, x) for i, x in enumerate(items) if not isinstance(x, str)), None)
        if wrong:
            raise ValueError(
                f"Input {wrong[0]} is a {type(wrong[1]).__name__}, not a string: a text model "
                f"encodes lists of strings. Convert or drop it ({wrong[1]!r:.60})."
            )
        return items
    from PIL import Image

    wrong = next(((i, x) for i, x in enumerate(items) if not isinstance(x, Image.Image)), None)
    if wrong:
        raise ValueError(
            f"Input {wrong[0]} is a {type(wrong[1]).__name__}, not a PIL image: an image model "
            f"encodes lists of PIL images (open files with PIL.Image.open)."
        )
    return items


def _to_model(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    """A batch tensor on the model's device; floating ones (pixels) in the model's dtype. To a
    GPU it goes from pinned memory without waiting (the copy is queued before the forward)."""
    if not isinstance(value, Tensor):
        return value
    dtype = dtype if value.is_floating_point() and dtype is not None else value.dtype
    if device.type == "cuda" and value.device.type == "cpu":
        return value.pin_memory().to(device=device, dtype=dtype, non_blocking=True)
    return value.to(device=device, dtype=dtype)


@contextmanager
def _eval_mode(*modules: nn.Module) -> Iterator[None]:
    """Every submodule in eval mode (no dropout) for the block; each one's mode restored after."""
    modes = [(module, module.training) for root in modules for module in root.modules()]
    for module, _ in modes:
        module.training = False
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def _pad(tokenizer: Any, encoded: dict[str, list[list[int]]]) -> BatchEncoding:
    """Pad lists of token rows into tensors on ``tokenizer.padding_side``, with a fresh mask."""
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    pad_values = {
        "input_ids": pad_id,
        "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0),
        "special_tokens_mask": 1,
    }
    lengths = np.fromiter(map(len, encoded["input_ids"]), dtype=np.int64)
    width = int(lengths.max())
    columns = np.arange(width)
    if tokenizer.padding_side == "left":
        real = columns >= (width - lengths)[:, None]
    else:
        real = columns < lengths[:, None]
    total = int(lengths.sum())
    padded = {}
    for key, rows in encoded.items():
        if key == "attention_mask":
            continue
        array = np.full(real.shape, pad_values.get(key, 0), dtype=np.int64)
        # A boolean mask assigns in row-major order: row by row, each row's tokens in order.
        array[real] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=total)
        padded[key] = torch.from_numpy(array)
    padded["attention_mask"] = torch.from_numpy(real.astype(np.int64))
    return BatchEncoding(padded)


def _position_limit(config: PreTrainedConfig) -> int | None:
    """The number of positions the (text) model can embed, if its config says."""
    for candidate in (_text_config(config), config):
        for name in _POSITION_LIMIT_ATTRIBUTES:
            value = getattr(candidate, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


__getattr__ = deprecated_attributes(__name__)  # PROGRESS_DELAY_SECONDS moved to progress.py
