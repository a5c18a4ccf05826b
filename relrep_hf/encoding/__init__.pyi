# The public names of relrep_hf.encoding, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use.

from relrep_hf.encoding.batches import (
    PROGRESS_DELAY_SECONDS as PROGRESS_DELAY_SECONDS,
    encode_in_order as encode_in_order,
    max_input_length as max_input_length,
    progress_bar as progress_bar,
    tokenize as tokenize,
    warn_truncated as warn_truncated,
)
from relrep_hf.encoding.corpora import (
    BUNDLED_SENTENCES_ID as BUNDLED_SENTENCES_ID,
    load_sentences as load_sentences,
    sentence_labels as sentence_labels,
    template_sentences as template_sentences,
)
from relrep_hf.encoding.encoder_kinds import (
    ENCODER_KINDS as ENCODER_KINDS,
    Embedded as Embedded,
    EmbedRequest as EmbedRequest,
    EncoderKind as EncoderKind,
    embed_encoders as embed_encoders,
    encoder_kind as encoder_kind,
    encoder_kinds_help as encoder_kinds_help,
    parse_encoder as parse_encoder,
    register_encoder_kind as register_encoder_kind,
    unregister_encoder_kind as unregister_encoder_kind,
)
from relrep_hf.encoding.encoders import (
    ArraySpec as ArraySpec,
    EncoderSpec as EncoderSpec,
    load_encoder as load_encoder,
)
from relrep_hf.encoding.extraction import (
    ExtractionOptions as ExtractionOptions,
    embeddings_tensor as embeddings_tensor,
    extract_embedding_views as extract_embedding_views,
    extract_embeddings as extract_embeddings,
)
from relrep_hf.encoding.models import (
    InputModality as InputModality,
    Modality as Modality,
    base_model_for_hidden_states as base_model_for_hidden_states,
    device_and_dtype as device_and_dtype,
    embedding_config as embedding_config,
    hidden_states as hidden_states,
    input_modality as input_modality,
    is_causal_decoder as is_causal_decoder,
    layer_hidden_states as layer_hidden_states,
)
from relrep_hf.encoding.packaged_encoders import (
    e5_small as e5_small,
    smollm2_gguf_path as smollm2_gguf_path,
    use_multilingual as use_multilingual,
)
from relrep_hf.encoding.parallel_corpus import (
    LANGUAGES as LANGUAGES,
    PARALLEL_VERSES_ID as PARALLEL_VERSES_ID,
    TOPICS as TOPICS,
    load_parallel_verses as load_parallel_verses,
)
from relrep_hf.encoding.pooling import (
    POOLINGS as POOLINGS,
    Pooling as Pooling,
    pool as pool,
    pool_model_output as pool_model_output,
    pool_model_outputs as pool_model_outputs,
    validate_pooling as validate_pooling,
)
