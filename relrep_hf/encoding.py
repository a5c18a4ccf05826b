"""Encoding: inputs -> tokenized batches -> one layer's hidden states -> one pooled vector per input.

Relative representations are built from one vector per input. This module turns a model's
token-level hidden states into that vector, the same way whatever the padding side: the real
tokens of each row are found from the attention mask only (never from ``pad_token_id``, which
decoders often share with their end-of-sequence token). `encode_in_order` is the one encoding
loop of the library (`RelativeWrapper.encode` and `extract_embeddings` both run it): it sorts
texts by token length, tokenizes each batch at the model's real input limit, runs a forward
under ``torch.inference_mode()`` in eval mode, and puts every row back at its input's position.

Read top to bottom: pooling, the module that gives hidden states and running it, tokenizing,
the encoding loop, private helpers.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, Literal

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm
from transformers import BatchEncoding, PreTrainedConfig, PreTrainedTokenizerBase

Pooling = Literal["last", "cls", "mean"]
POOLINGS: tuple[str, ...] = ("last", "cls", "mean")

Modality = Literal["text", "image", "multimodal"]
InputModality = Literal["text", "image"]

# Inputs at or above this count get a progress bar unless `show_progress` says otherwise.
PROGRESS_MIN_INPUTS = 1024
# Tokenizers without a known limit report a huge sentinel (int(1e30)); no real model reads more
# than this many tokens, so anything above it means "unknown".
_MAX_SANE_LENGTH = 10**8

# Config attributes that hold the number of positions a model can embed, by model family.
_POSITION_LIMIT_ATTRIBUTES = ("max_position_embeddings", "n_positions", "n_ctx",
                              "max_sequence_length", "max_seq_len", "max_seq_length", "seq_length")  # fmt: skip


def validate_pooling(pooling: str) -> Pooling:
    """Return ``pooling`` unchanged if it names a pooling, else raise a ValueError listing them."""
    if not isinstance(pooling, str) or pooling not in POOLINGS:
        valid = ", ".join(repr(name) for name in POOLINGS)
        raise ValueError(f"Invalid pooling {pooling!r}. Valid: {valid}.")
    return pooling


def pool(hidden_states: Tensor, attention_mask: Tensor | None, pooling: Pooling) -> Tensor:
    """Pool token vectors ``[B, T, d]`` into one vector per row ``[B, d]``.

    ``last`` is the last real token and ``cls`` the first real token of each row, whatever the
    padding side; ``mean`` averages the real tokens only. Real tokens are those where
    ``attention_mask`` is non-zero; ``None`` means every token is real.
    """
    validate_pooling(pooling)
    if hidden_states.dim() != 3:
        raise ValueError(
            f"Expected hidden_states of shape [batch, tokens, dim], got shape "
            f"{tuple(hidden_states.shape)}. Pass one layer's hidden states, e.g. "
            f"outputs.hidden_states[-1]."
        )
    batch, length, _ = hidden_states.shape
    if attention_mask is None:
        mask = torch.ones(batch, length, dtype=torch.bool, device=hidden_states.device)
    else:
        if tuple(attention_mask.shape) != (batch, length):
            raise ValueError(
                f"Expected attention_mask of shape {(batch, length)} to match hidden_states "
                f"{tuple(hidden_states.shape)}, got {tuple(attention_mask.shape)}. Pass the mask "
                f"of the same tokenized batch."
            )
        mask = attention_mask.to(device=hidden_states.device) != 0
    empty_rows = (~mask.any(dim=1)).nonzero().flatten().tolist()
    if empty_rows:
        raise ValueError(
            f"Rows {empty_rows} of attention_mask have no real token (all zeros), so there is "
            f"nothing to pool. Remove empty inputs before encoding."
        )

    if pooling == "mean":
        # Sum in at least float32: half-precision sums over long sequences lose digits. `where`
        # rather than multiplying by the mask, so NaN or inf in pad positions cannot leak in.
        acc_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
        keep = mask.unsqueeze(-1)
        summed = torch.where(keep, hidden_states.to(acc_dtype), 0.0).sum(dim=1)
        counts = keep.sum(dim=1).to(acc_dtype)
        return (summed / counts).to(hidden_states.dtype)

    positions = torch.arange(length, device=hidden_states.device).expand(batch, length)
    if pooling == "last":
        index = torch.where(mask, positions, -1).amax(dim=1)
    else:
        index = torch.where(mask, positions, length).amin(dim=1)
    rows = torch.arange(batch, device=hidden_states.device)
    return hidden_states[rows, index]


def base_model_for_hidden_states(model: nn.Module, modality: Modality = "text") -> nn.Module:
    """The module whose forward returns the hidden states to pool.

    Task heads are dropped (``*ForCausalLM`` -> its base model); encoder-decoder models (T5,
    BART) give their encoder; composite models with a nested text config give their text model
    for ``modality="text"`` and their vision tower for ``"image"``; ``"multimodal"`` keeps the
    base model so text and images go through together. Other models are returned as they are.
    """
    base = getattr(model, "base_model", model)
    if modality == "multimodal":
        return base
    if modality == "image":
        # `get_encoder(modality="image")` finds a nested vision tower (CLIP, Llava) and returns
        # the model itself when the model is the vision model (ViT).
        if hasattr(model, "get_encoder"):
            tower = model.get_encoder(modality="image")
            if tower is not model:
                return tower
        return base
    if modality != "text":
        raise ValueError(f"Invalid modality {modality!r}. Valid: 'text', 'image', 'multimodal'.")

    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        return model.get_encoder()
    if config is not None and _text_config(config) is not config and hasattr(model, "get_decoder"):
        return model.get_decoder()
    return base


def hidden_states(model: nn.Module, inputs: Mapping[str, Any], layer: int = -1) -> Tensor:
    """The hidden states ``[B, T, d]`` of one layer (see `layer_hidden_states`)."""
    return layer_hidden_states(model, inputs, [layer])[0]


def layer_hidden_states(
    model: nn.Module, inputs: Mapping[str, Any], layers: Sequence[int]
) -> list[Tensor]:
    """Run ``model`` once on ``inputs``; the hidden states ``[B, T, d]`` of each of ``layers``.

    A layer indexes transformers' ``hidden_states`` tuple (0: embeddings); -1 is the final
    output, ``last_hidden_state`` (after the final layer norm of ViT, CLIP, DINOv2, ...), and
    alone it does not request the other layers. Only inputs the forward accepts are passed. For
    causal decoders fed left-padded batches, ``position_ids`` come from the attention mask (as
    in ``generate``), or GPT-2 would shift each row's positions by its padding. Gradients and
    train/eval mode are left to the caller.
    """
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise ValueError(f"Expected layer to be an int (e.g. -1 for the last), got {layer!r}.")
    modality = _modality(inputs)
    module = base_model_for_hidden_states(model, modality)
    accepted, takes_kwargs = _forward_parameters(module)
    kwargs = {name: value for name, value in inputs.items() if name in accepted}
    if not kwargs:
        raise ValueError(
            f"None of the inputs {sorted(inputs)} is accepted by "
            f"{type(module).__name__}.forward, which takes {sorted(accepted)}. Pass the output "
            f"of the model's tokenizer or processor."
        )

    mask = kwargs.get("attention_mask")
    # Multimodal models (e.g. Qwen2-VL) compute their own positions around image tokens.
    if (
        modality == "text"
        and "position_ids" in accepted
        and "position_ids" not in kwargs
        and isinstance(mask, Tensor)
        and mask.dim() == 2
    ):
        position_ids = _position_ids_from_mask(mask)
        default = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        shifted = bool(((position_ids != default) & (mask != 0)).any())
        if shifted and is_causal_decoder(module):
            kwargs["position_ids"] = position_ids
    if "use_cache" in accepted:
        kwargs["use_cache"] = False
    if "return_dict" in accepted or takes_kwargs:
        kwargs["return_dict"] = True

    if all(layer == -1 for layer in layers):
        final = getattr(module(**kwargs), "last_hidden_state", None)
        if final is not None:
            return [final for _ in layers]
        # This output has no last_hidden_state: run again, asking for the hidden_states tuple.

    if "output_hidden_states" not in accepted and not takes_kwargs:
        raise ValueError(
            f"{type(module).__name__}.forward does not take output_hidden_states, so its "
            f"layers cannot be read. Pass a transformers model, or layer=-1."
        )
    outputs = module(**kwargs, output_hidden_states=True)
    all_layers = getattr(outputs, "hidden_states", None)
    if not all_layers:
        raise ValueError(
            f"{type(module).__name__} returned no hidden_states. Pass a transformers model whose "
            f"output has a hidden_states field."
        )
    count = len(all_layers)
    final = getattr(outputs, "last_hidden_state", None)
    states = []
    for layer in layers:
        if not -count <= layer < count:
            raise ValueError(
                f"Layer {layer} is out of range for {type(module).__name__}, which returns "
                f"{count} hidden states (embeddings + {count - 1} layers). Valid: {-count} to "
                f"{count - 1}."
            )
        last = layer % count == count - 1 and final is not None
        states.append(final if last else all_layers[layer])
    return states


def pool_model_output(
    model: nn.Module, inputs: Mapping[str, Any], pooling: Pooling, layer: int = -1
) -> Tensor:
    """Hidden states of ``layer`` pooled with the inputs' attention mask, ``[B, d]``; without a
    mask (``pixel_values`` alone) every token or patch counts as real."""
    return pool_model_outputs(model, inputs, [(pooling, layer)])[0]


def pool_model_outputs(
    model: nn.Module, inputs: Mapping[str, Any], views: Sequence[tuple[Pooling, int]]
) -> tuple[Tensor, ...]:
    """One ``[B, d]`` tensor per ``(pooling, layer)`` view (each a space of its own), all from
    one forward pass."""
    for pooling, _ in views:
        validate_pooling(pooling)
    layers = sorted({layer for _, layer in views})
    states = dict(zip(layers, layer_hidden_states(model, inputs, layers), strict=True))
    mask = inputs.get("attention_mask")
    return tuple(pool(states[layer], mask, pooling) for pooling, layer in views)


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


def input_modality(encoder: nn.Module) -> InputModality:
    """``"image"`` for models that read ``pixel_values`` (ViT, DINOv2, ...), else ``"text"``."""
    return "image" if getattr(encoder, "main_input_name", None) == "pixel_values" else "text"


def encode_in_order(
    encoder: nn.Module,
    preprocessor: Any,
    inputs: Iterable[Any],
    forward: Callable[[Mapping[str, Tensor]], tuple[Tensor, ...]],
    *,
    batch_size: int = 32,
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
    order = list(range(len(items)))
    if modality == "text":
        if not isinstance(preprocessor, PreTrainedTokenizerBase):
            raise ValueError(
                f"{type(encoder).__name__} reads text, but the preprocessor is a "
                f"{type(preprocessor).__name__}. Pass the model's tokenizer "
                f"(AutoTokenizer.from_pretrained(...))."
            )
        if max_length is None:
            max_length = max_input_length(preprocessor, encoder)
        lengths = _token_lengths(preprocessor, items)
        # Longest first: a batch that does not fit in memory fails at once, not at the end.
        order.sort(key=lambda i: -lengths[i])
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
                outputs = [
                    torch.empty(
                        (len(items), *r.shape[1:]),
                        dtype=output_dtype or r.dtype,
                        device=output_device or r.device,
                    )
                    for r in results
                ]
            for output, result in zip(outputs, results, strict=True):
                index = torch.tensor(positions, device=output.device)
                output[index] = result.to(device=output.device, dtype=output.dtype)
            progress.update(len(positions))
    if warn:
        warn_truncated(truncated, len(items), max_length or 0, stacklevel=5)
    return tuple(outputs), sorted(truncated)


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


def device_and_dtype(model: nn.Module) -> tuple[torch.device, torch.dtype | None]:
    """The device inputs go to and the floating dtype of the model's first parameter."""
    for parameter in model.parameters():
        return parameter.device, parameter.dtype if parameter.is_floating_point() else None
    return torch.device("cpu"), None


def embedding_config(encoder: nn.Module, modality: InputModality) -> PreTrainedConfig | None:
    """The config of the part of ``encoder`` whose hidden states are pooled (its text config)."""
    module = base_model_for_hidden_states(encoder, modality)
    config = getattr(module, "config", None) or getattr(encoder, "config", None)
    return _text_config(config) if config is not None and modality == "text" else config


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


def _modality(inputs: Mapping[str, Any]) -> Modality:
    """Which part of a composite model the inputs are for: text, images, or both."""
    has_text = "input_ids" in inputs or "inputs_embeds" in inputs
    has_image = "pixel_values" in inputs
    if has_text and has_image:
        return "multimodal"
    return "image" if has_image else "text"


def _text_config(config: PreTrainedConfig) -> PreTrainedConfig:
    """``config``'s nested text config, or ``config`` itself when it has none or several."""
    try:
        return config.get_text_config(decoder=True)
    except (AttributeError, ValueError):
        return config


def _forward_parameters(module: nn.Module) -> tuple[frozenset[str], bool]:
    """Names of the keyword arguments ``module.forward`` takes, and whether it takes ``**kwargs``."""
    parameters = inspect.signature(module.forward).parameters.values()
    names = frozenset(
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    return names, takes_kwargs


def _position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """0, 1, 2, ... over each row's real tokens (pads get 0), as ``generate`` computes them."""
    mask = attention_mask != 0
    return (mask.long().cumsum(-1) - 1).masked_fill(~mask, 0)


def is_causal_decoder(module: nn.Module) -> bool:
    """Whether ``module`` is a causal decoder, judged by its attention layers' ``is_causal``.

    Bidirectional encoders keep their own position handling: RoBERTa-style models derive
    positions from ``input_ids`` with an offset that mask-derived positions would break.
    """
    return any(getattr(sub, "is_causal", False) is True for sub in module.modules())


def _position_limit(config: PreTrainedConfig) -> int | None:
    """The number of positions the (text) model can embed, if its config says."""
    for candidate in (_text_config(config), config):
        for name in _POSITION_LIMIT_ATTRIBUTES:
            value = getattr(candidate, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None
