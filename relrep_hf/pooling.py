"""Mask-aware pooling and hidden-state extraction for any Hugging Face model.

Relative representations are built from one vector per input. This module turns a model's
token-level hidden states into that vector, and it does so the same way whatever the padding
side: the real tokens of each row are found from the attention mask only (never from
``pad_token_id``, which decoders often share with their end-of-sequence token).

Read top to bottom: pooling of hidden states, picking the module that gives hidden states,
running it, and tokenizing at the model's real length limit.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
from torch import Tensor, nn
from transformers import BatchEncoding, PreTrainedConfig

Pooling = Literal["last", "cls", "mean"]
POOLINGS: tuple[str, ...] = ("last", "cls", "mean")

Modality = Literal["text", "image", "multimodal"]

# Tokenizers without a known limit report a huge sentinel (int(1e30)); no real model reads more
# than this many tokens, so anything above it means "unknown".
_MAX_SANE_LENGTH = 10**8

# Config attributes that hold the number of positions a model can embed, by model family.
_POSITION_LIMIT_ATTRIBUTES = (
    "max_position_embeddings",
    "n_positions",
    "n_ctx",
    "max_sequence_length",
    "max_seq_len",
    "max_seq_length",
    "seq_length",
)


def validate_pooling(pooling: str) -> str:
    """Return ``pooling`` unchanged if it names a pooling, else raise a ValueError listing them."""
    if not isinstance(pooling, str) or pooling not in POOLINGS:
        valid = ", ".join(repr(name) for name in POOLINGS)
        raise ValueError(f"Invalid pooling {pooling!r}. Valid: {valid}.")
    return pooling


def pool(hidden_states: Tensor, attention_mask: Tensor | None, pooling: str) -> Tensor:
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
    """Run ``model`` on ``inputs`` and return the hidden states of one layer, ``[B, T, d]``.

    See `layer_hidden_states`, which reads several layers from the same forward pass.
    """
    return layer_hidden_states(model, inputs, [layer])[0]


def layer_hidden_states(
    model: nn.Module, inputs: Mapping[str, Any], layers: Sequence[int]
) -> list[Tensor]:
    """Run ``model`` once on ``inputs`` and return the hidden states of each of ``layers``.

    ``layer`` indexes transformers' ``hidden_states`` tuple: 0 is the embedding output, 1 the
    first layer's output, and -1 (the default) the model's final output, ``last_hidden_state``.
    The two differ only for models whose tuple ends before a final layer norm (ViT, CLIP,
    SigLIP, DINOv2); there the last index gives the normalized output that the model's own
    heads use. For ``layer=-1`` the other layers are not requested, which saves their memory.

    Only the inputs the module's forward accepts are passed, so a tokenizer's extra keys or a
    seq2seq model's decoder inputs are ignored. For causal decoders fed left-padded batches,
    ``position_ids`` are derived from the attention mask (as ``generate`` does): models with
    absolute positions such as GPT-2 would otherwise shift each row's positions by its padding.
    Gradients and train/eval mode are left to the caller.
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
    model: nn.Module, inputs: Mapping[str, Any], pooling: str, layer: int = -1
) -> Tensor:
    """Hidden states of ``layer`` pooled with the inputs' attention mask, ``[B, d]``.

    Inputs without an attention mask (e.g. ``pixel_values`` alone) count every token or patch
    as real: ``cls`` is token 0, ``mean`` all patches, ``last`` the last patch.
    """
    return pool_model_outputs(model, inputs, [(pooling, layer)])[0]


def pool_model_outputs(
    model: nn.Module, inputs: Mapping[str, Any], views: Sequence[tuple[str, int]]
) -> tuple[Tensor, ...]:
    """One ``[B, d]`` tensor per ``(pooling, layer)`` view, all from one forward pass.

    Several layers and poolings of one model are different spaces, and one pass with every
    hidden state gives them all (the main job embeds four views of MiniLM this way).
    """
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
    """Tokenize ``texts`` into padded ``pt`` tensors, truncating at ``max_length`` tokens.

    Returns the batch and the indices of the texts that were truncated, so callers can warn.
    Padding follows ``tokenizer.padding_side`` and is done here rather than by the tokenizer,
    so tokenizers without a pad token (GPT-2) work without being changed: their pad positions
    hold the eos token id (0 if there is none either), which the attention mask hides. The
    user's tokenizer object is never modified.
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
