"""Encoding: inputs -> tokenized batches -> one layer's hidden states -> one pooled vector per input.

Relative representations are built from one vector per input; this package is the one place
that makes it. Its modules import one way only: `models` (which part of a model gives the
hidden states, and running it) <- `pooling` (mask-aware pooling of those states) and `batches`
(tokenizing, and the one encoding loop `encode_in_order`). Import from ``relrep_hf.encoding``
(lazily: ``relrep-hf --help`` imports no torch). The layer's other modules: the registry of
encoder kinds (`encoder_kinds`), encoder specs (`encoders`, `gguf_encoders`,
`packaged_encoders`), datasets to cached embeddings (`extraction`, `extraction_writer`,
`array_encoders`) and corpora (`corpora`, `parallel_corpus`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.utils.lazy_imports import lazy_attributes

if TYPE_CHECKING:
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

_LAZY = {
    "InputModality": "relrep_hf.encoding.models",
    "Modality": "relrep_hf.encoding.models",
    "POOLINGS": "relrep_hf.encoding.pooling",
    "PROGRESS_MIN_INPUTS": "relrep_hf.encoding.batches",
    "Pooling": "relrep_hf.encoding.pooling",
    "base_model_for_hidden_states": "relrep_hf.encoding.models",
    "device_and_dtype": "relrep_hf.encoding.models",
    "embedding_config": "relrep_hf.encoding.models",
    "encode_in_order": "relrep_hf.encoding.batches",
    "hidden_states": "relrep_hf.encoding.models",
    "input_modality": "relrep_hf.encoding.models",
    "is_causal_decoder": "relrep_hf.encoding.models",
    "layer_hidden_states": "relrep_hf.encoding.models",
    "max_input_length": "relrep_hf.encoding.batches",
    "pool": "relrep_hf.encoding.pooling",
    "pool_model_output": "relrep_hf.encoding.pooling",
    "pool_model_outputs": "relrep_hf.encoding.pooling",
    "tokenize": "relrep_hf.encoding.batches",
    "validate_pooling": "relrep_hf.encoding.pooling",
    "warn_truncated": "relrep_hf.encoding.batches",
}

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


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
