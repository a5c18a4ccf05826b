"""Model anatomy: which part of a model gives the hidden states, and running it for some layers.

Composite, encoder-decoder and task-head models hide the module whose hidden states are pooled;
this module finds it (by modality), runs it once for the requested layers, and says what it
reads (text or images), where its inputs go and whether it is a causal decoder.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
from torch import Tensor, nn
from transformers import PreTrainedConfig

Modality = Literal["text", "image", "multimodal"]
InputModality = Literal["text", "image"]


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
    accepted, takes_kwargs, causal = _forward_facts(module)
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
        and causal  # before the check below, which waits for a GPU
    ):
        position_ids = _position_ids_from_mask(mask)
        default = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        if bool(((position_ids != default) & (mask != 0)).any()):
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


def input_modality(encoder: nn.Module) -> InputModality:
    """``"image"`` for models that read ``pixel_values`` (ViT, DINOv2, ...), else ``"text"``."""
    return "image" if getattr(encoder, "main_input_name", None) == "pixel_values" else "text"


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


def is_causal_decoder(module: nn.Module) -> bool:
    """Whether ``module`` is a causal decoder, judged by its attention layers' ``is_causal``.

    Bidirectional encoders keep their own position handling: RoBERTa-style models derive
    positions from ``input_ids`` with an offset that mask-derived positions would break.
    """
    return any(getattr(sub, "is_causal", False) is True for sub in module.modules())


# ---------------------------------------------------------------------------------------------
# Private helpers
# ---------------------------------------------------------------------------------------------


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


# Per module, read once: a forward's signature (through transformers' decorators) and a walk of
# every submodule cost ~0.5 ms a batch, as much as a small model's forward on a GPU (#38).
_FORWARD_FACTS: weakref.WeakKeyDictionary[nn.Module, tuple[Any, frozenset[str], bool, bool]] = (
    weakref.WeakKeyDictionary()
)


def _forward_facts(module: nn.Module) -> tuple[frozenset[str], bool, bool]:
    """`_forward_parameters` of ``module`` and whether it `is_causal_decoder`, cached per module
    (weakly: a model freed is dropped) and per forward (a forward replaced is read again)."""
    forward = getattr(module.forward, "__func__", module.forward)
    cached = _FORWARD_FACTS.get(module)
    if cached is None or cached[0] is not forward:
        cached = (forward, *_forward_parameters(module), is_causal_decoder(module))
        _FORWARD_FACTS[module] = cached
    return cached[1], cached[2], cached[3]


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
