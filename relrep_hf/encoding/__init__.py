"""Encoding: inputs -> tokenized batches -> one layer's hidden states -> one pooled vector per input.

Relative representations are built from one vector per input; this package is the one place
that makes it. Its modules import one way only: `models` (which part of a model gives the
hidden states, and running it) <- `pooling` (mask-aware pooling of those states) and `batches`
(tokenizing, and the one encoding loop `encode_in_order`). Import from ``relrep_hf.encoding``.
"""

from relrep_hf.encoding.batches import (
    PROGRESS_MIN_INPUTS,
    encode_in_order,
    max_input_length,
    tokenize,
    warn_truncated,
)
from relrep_hf.encoding.models import (
    InputModality,
    Modality,
    base_model_for_hidden_states,
    device_and_dtype,
    embedding_config,
    hidden_states,
    input_modality,
    is_causal_decoder,
    layer_hidden_states,
)
from relrep_hf.encoding.pooling import (
    POOLINGS,
    Pooling,
    pool,
    pool_model_output,
    pool_model_outputs,
    validate_pooling,
)

__all__ = [
    "POOLINGS",
    "PROGRESS_MIN_INPUTS",
    "InputModality",
    "Modality",
    "Pooling",
    "base_model_for_hidden_states",
    "device_and_dtype",
    "embedding_config",
    "encode_in_order",
    "hidden_states",
    "input_modality",
    "is_causal_decoder",
    "layer_hidden_states",
    "max_input_length",
    "pool",
    "pool_model_output",
    "pool_model_outputs",
    "tokenize",
    "validate_pooling",
    "warn_truncated",
]
