"""Batches: tokenizing at the model's input limit, and the one encoding loop `encode_in_order`.

`encode_in_order` (run by `RelativeWrapper.encode` and `extract_embeddings`) sorts texts by
token length, tokenizes each batch at the model's real input limit, runs a forward under
``torch.inference_mode()`` in eval mode, and puts every row back at its input's position.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm
from transformers import BatchEncoding, PreTrainedConfig, PreTrainedTokenizerBase

from relrep_hf.encoding.models import (
    InputModality,
    _text_config,
    device_and_dtype,
    input_modality,
)
from relrep_hf.utils.defaults import DEFAULT_ENCODE_BATCH_SIZE

# Inputs at or above this count get a progress bar unless `show_progress` says otherwise.
PROGRESS_MIN_INPUTS = 1024
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
    texts = list(texts)
    # verbose=False: the untruncated pass would otherwise warn about every long text.
    encoded = dict(tokenizer(texts, padding=False, truncation=False, verbose=False))
    truncated = [i for i, ids in enumerate(encoded["input_ids"]) if len(ids) > max_length]
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
    return _pad(tokenizer, encoded), truncated


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
    order, max_length = _encoding_order(encoder, preprocessor, items, modality, max_length)
    show = len(items) >= PROGRESS_MIN_INPUTS if show_progress is None else show_progress
    bar = tqdm(total=len(items), desc="Encoding", disable=not show) if progress is None else None
    device, dtype = device_and_dtype(encoder)
    outputs: list[Tensor] = []
    truncated: list[int] = []
    with (
        bar if bar is not None else nullcontext(progress) as progress,
        torch.inference_mode(),
        _eval_mode(encoder, *eval_modules),
    ):
        for start in range(0, len(order), batch_size):
            positions = order[start : start + batch_size]
            batch_items = [items[i] for i in positions]
            if modality == "text":
                batch, cut = tokenize(preprocessor, batch_items, max_length)
                truncated.extend(positions[i] for i in cut)
            else:
                batch = preprocessor(images=batch_items, return_tensors="pt")
            batch = {key: _to_model(value, device, dtype) for key, value in batch.items()}
            results = forward(batch)
            if not outputs:
                outputs = _empty_outputs(results, len(items), output_device, output_dtype)
            for output, result in zip(outputs, results, strict=True):
                index = torch.tensor(positions, device=output.device)
                output[index] = result.to(device=output.device, dtype=output.dtype)
            progress.update(len(positions))
    if warn:
        warn_truncated(truncated, len(items), max_length or 0, stacklevel=5)
    return tuple(outputs), sorted(truncated)


def _encoding_order(
    encoder: nn.Module,
    preprocessor: Any,
    items: list[Any],
    modality: InputModality,
    max_length: int | None,
) -> tuple[list[int], int | None]:
    """The order to encode ``items`` in (texts: longest first, so that a batch that does not
    fit in memory fails at once, not at the end) and the truncation length decided."""
    order = list(range(len(items)))
    if modality != "text":
        return order, max_length
    if not isinstance(preprocessor, PreTrainedTokenizerBase):
        raise ValueError(
            f"{type(encoder).__name__} reads text, but the preprocessor is a "
            f"{type(preprocessor).__name__}. Pass the model's tokenizer "
            f"(AutoTokenizer.from_pretrained(...))."
        )
    if max_length is None:
        max_length = max_input_length(preprocessor, encoder)
    lengths = _token_lengths(preprocessor, items)
    order.sort(key=lambda i: -lengths[i])
    return order, max_length


def _empty_outputs(
    results: Sequence[Tensor],
    rows: int,
    device: torch.device | str | None,
    dtype: torch.dtype | None,
) -> list[Tensor]:
    """One ``[rows, ...]`` tensor per output of the first batch, on ``device`` in ``dtype``
    (default: as the batch's)."""
    return [
        torch.empty((rows, *r.shape[1:]), dtype=dtype or r.dtype, device=device or r.device)
        for r in results
    ]


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


def _token_lengths(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[int]:
    """Tokens per text, special tokens included, before truncation; empty results are errors."""
    ids = tokenizer(texts, padding=False, truncation=False, verbose=False)["input_ids"]
    lengths = [len(row) for row in ids]
    empty = [i for i, n in enumerate(lengths) if n == 0]
    if empty:
        raise ValueError(
            f"Inputs {empty[:5]} tokenize to no tokens at all (empty strings?), so there is "
            f"nothing to pool. Drop them before encoding."
        )
    return lengths


def _to_model(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    """A batch tensor on the model's device; floating ones (pixels) in the model's dtype."""
    if not isinstance(value, Tensor):
        return value
    if value.is_floating_point() and dtype is not None:
        return value.to(device=device, dtype=dtype)
    return value.to(device)


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
    left = tokenizer.padding_side == "left"
    lengths = [len(ids) for ids in encoded["input_ids"]]
    width = max(lengths)
    encoded["attention_mask"] = [[1] * n for n in lengths]
    padded = {}
    for key, rows in encoded.items():
        value = pad_values.get(key, 0)
        padded[key] = torch.tensor(
            [
                [value] * (width - len(row)) + row if left else row + [value] * (width - len(row))
                for row in rows
            ],
            dtype=torch.long,
        )
    return BatchEncoding(padded)


def _position_limit(config: PreTrainedConfig) -> int | None:
    """The number of positions the (text) model can embed, if its config says."""
    for candidate in (_text_config(config), config):
        for name in _POSITION_LIMIT_ATTRIBUTES:
            value = getattr(candidate, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None
