"""Encoding: inputs -> tokenized batches -> one layer's hidden states -> one pooled vector per input.

Relative representations are built from one vector per input; this package is the one place
that makes it. Its modules import one way only: `models` (which part of a model gives the
hidden states, and running it) <- `pooling` (mask-aware pooling of those states) and `batches`
(tokenizing, and the one encoding loop `encode_in_order`). The layer's other modules: the registry of
encoder kinds (`encoder_kinds`), encoder specs (`encoders`, `gguf_encoders`,
`packaged_encoders`), datasets to cached embeddings (`extraction`, `extraction_writer`,
`array_encoders`) and corpora (`corpora`, `parallel_corpus`).

A public API: a program imports these names from ``relrep_hf.encoding`` (docs/architecture.md,
"The public API"), lazily: ``relrep-hf --help`` imports no torch.
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
    from relrep_hf.encoding.corpora import (
        BUNDLED_SENTENCES_ID,
        load_sentences,
        sentence_labels,
        template_sentences,
    )
    from relrep_hf.encoding.encoder_kinds import (
        ENCODER_KINDS,
        Embedded,
        EmbedRequest,
        EncoderKind,
        embed_encoders,
        encoder_kind,
        encoder_kinds_help,
        parse_encoder,
        register_encoder_kind,
        unregister_encoder_kind,
    )
    from relrep_hf.encoding.encoders import (
        ArraySpec,
        EncoderSpec,
        load_encoder,
    )
    from relrep_hf.encoding.extraction import (
        ExtractionOptions,
        embeddings_tensor,
        extract_embedding_views,
        extract_embeddings,
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
    from relrep_hf.encoding.packaged_encoders import (
        e5_small,
        smollm2_gguf_path,
        use_multilingual,
    )
    from relrep_hf.encoding.parallel_corpus import (
        LANGUAGES,
        PARALLEL_VERSES_ID,
        TOPICS,
        load_parallel_verses,
    )
    from relrep_hf.encoding.pooling import (
        POOLINGS,
        Pooling,
        pool,
        pool_model_output,
        pool_model_outputs,
        validate_pooling,
    )

# public name -> the module that defines it, imported on first access
_LAZY = {
    "PROGRESS_MIN_INPUTS": "relrep_hf.encoding.batches",
    "encode_in_order": "relrep_hf.encoding.batches",
    "max_input_length": "relrep_hf.encoding.batches",
    "tokenize": "relrep_hf.encoding.batches",
    "warn_truncated": "relrep_hf.encoding.batches",
    "InputModality": "relrep_hf.encoding.models",
    "Modality": "relrep_hf.encoding.models",
    "base_model_for_hidden_states": "relrep_hf.encoding.models",
    "device_and_dtype": "relrep_hf.encoding.models",
    "embedding_config": "relrep_hf.encoding.models",
    "hidden_states": "relrep_hf.encoding.models",
    "input_modality": "relrep_hf.encoding.models",
    "is_causal_decoder": "relrep_hf.encoding.models",
    "layer_hidden_states": "relrep_hf.encoding.models",
    "POOLINGS": "relrep_hf.encoding.pooling",
    "Pooling": "relrep_hf.encoding.pooling",
    "pool": "relrep_hf.encoding.pooling",
    "pool_model_output": "relrep_hf.encoding.pooling",
    "pool_model_outputs": "relrep_hf.encoding.pooling",
    "validate_pooling": "relrep_hf.encoding.pooling",
    "ENCODER_KINDS": "relrep_hf.encoding.encoder_kinds",
    "EmbedRequest": "relrep_hf.encoding.encoder_kinds",
    "Embedded": "relrep_hf.encoding.encoder_kinds",
    "EncoderKind": "relrep_hf.encoding.encoder_kinds",
    "embed_encoders": "relrep_hf.encoding.encoder_kinds",
    "encoder_kind": "relrep_hf.encoding.encoder_kinds",
    "encoder_kinds_help": "relrep_hf.encoding.encoder_kinds",
    "parse_encoder": "relrep_hf.encoding.encoder_kinds",
    "register_encoder_kind": "relrep_hf.encoding.encoder_kinds",
    "unregister_encoder_kind": "relrep_hf.encoding.encoder_kinds",
    "ArraySpec": "relrep_hf.encoding.encoders",
    "EncoderSpec": "relrep_hf.encoding.encoders",
    "load_encoder": "relrep_hf.encoding.encoders",
    "ExtractionOptions": "relrep_hf.encoding.extraction",
    "embeddings_tensor": "relrep_hf.encoding.extraction",
    "extract_embedding_views": "relrep_hf.encoding.extraction",
    "extract_embeddings": "relrep_hf.encoding.extraction",
    "BUNDLED_SENTENCES_ID": "relrep_hf.encoding.corpora",
    "load_sentences": "relrep_hf.encoding.corpora",
    "sentence_labels": "relrep_hf.encoding.corpora",
    "template_sentences": "relrep_hf.encoding.corpora",
    "LANGUAGES": "relrep_hf.encoding.parallel_corpus",
    "PARALLEL_VERSES_ID": "relrep_hf.encoding.parallel_corpus",
    "TOPICS": "relrep_hf.encoding.parallel_corpus",
    "load_parallel_verses": "relrep_hf.encoding.parallel_corpus",
    "e5_small": "relrep_hf.encoding.packaged_encoders",
    "smollm2_gguf_path": "relrep_hf.encoding.packaged_encoders",
    "use_multilingual": "relrep_hf.encoding.packaged_encoders",
}

__all__ = [
    "BUNDLED_SENTENCES_ID",
    "ENCODER_KINDS",
    "LANGUAGES",
    "PARALLEL_VERSES_ID",
    "POOLINGS",
    "PROGRESS_MIN_INPUTS",
    "TOPICS",
    "ArraySpec",
    "EmbedRequest",
    "Embedded",
    "EncoderKind",
    "EncoderSpec",
    "ExtractionOptions",
    "InputModality",
    "Modality",
    "Pooling",
    "base_model_for_hidden_states",
    "device_and_dtype",
    "e5_small",
    "embed_encoders",
    "embedding_config",
    "embeddings_tensor",
    "encode_in_order",
    "encoder_kind",
    "encoder_kinds_help",
    "extract_embedding_views",
    "extract_embeddings",
    "hidden_states",
    "input_modality",
    "is_causal_decoder",
    "layer_hidden_states",
    "load_encoder",
    "load_parallel_verses",
    "load_sentences",
    "max_input_length",
    "parse_encoder",
    "pool",
    "pool_model_output",
    "pool_model_outputs",
    "register_encoder_kind",
    "sentence_labels",
    "smollm2_gguf_path",
    "template_sentences",
    "tokenize",
    "unregister_encoder_kind",
    "use_multilingual",
    "validate_pooling",
    "warn_truncated",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
