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

from relrep_hf.utils.lazy_imports import lazy_attributes, stub_names

_LAZY = stub_names(__file__)  # public name -> its module, from __init__.pyi
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
