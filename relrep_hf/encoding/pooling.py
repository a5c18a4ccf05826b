"""Pooling: token-level hidden states -> one vector per input, from the attention mask only.

The real tokens of each row are found from the attention mask (never from ``pad_token_id``,
which decoders often share with their end-of-sequence token), so pooling is the same whatever
the padding side.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

import torch
from torch import Tensor, nn

from relrep_hf.encoding.models import is_causal_decoder, layer_hidden_states

Pooling = Literal["last", "cls", "mean"]
POOLINGS: tuple[str, ...] = ("last", "cls", "mean")
# how a card describes each pooling, and sentence-transformers' ``pooling_mode`` names for them
POOLING_DESCRIPTIONS = {"mean": "mean-pooled", "cls": "CLS-token", "last": "last-token"}
SENTENCE_TRANSFORMERS_POOLINGS = {"mean": "mean", "cls": "cls", "lasttoken": "last"}
# Set by `masks_checked_on_host`: the masks pooled were checked before they left the CPU.
_MASKS_CHECKED: ContextVar[bool] = ContextVar("relrep_hf_masks_checked", default=False)


@contextmanager
def masks_checked_on_host() -> Iterator[None]:
    """Within the block, `pool` does not check again that a mask on a GPU has a real token in
    every row: the encoding loop checked its inputs on the CPU, and the check on the device
    would make the CPU wait for the GPU at every batch."""
    token = _MASKS_CHECKED.set(True)
    try:
        yield
    finally:
        _MASKS_CHECKED.reset(token)


def default_pooling(model: nn.Module) -> Pooling:
    """The pooling a spec without one gets: the last token of a causal decoder (the only one
    that has seen the whole input), the mean of an encoder's tokens."""
    return "last" if is_causal_decoder(model) else "mean"


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
    checked = _MASKS_CHECKED.get() and mask.device.type != "cpu"
    empty_rows = [] if checked else (~mask.any(dim=1)).nonzero().flatten().tolist()
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
