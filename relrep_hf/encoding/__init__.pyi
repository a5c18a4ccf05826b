# The public names of relrep_hf.encoding, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use. Only what a user calls (docs/api.md, tests/test_public_api.py); a name exported
# before answers from its module with a warning (utils/deprecated_import.py).

from relrep_hf.encoding.batches import encode_in_order as encode_in_order, tokenize as tokenize
from relrep_hf.encoding.corpora import load_sentences as load_sentences
from relrep_hf.encoding.encoder_kinds import (
    embed_encoders as embed_encoders,
    parse_encoder as parse_encoder,
)
from relrep_hf.encoding.encoders import EncoderSpec as EncoderSpec, load_encoder as load_encoder
from relrep_hf.encoding.extraction import (
    embeddings_tensor as embeddings_tensor,
    extract_embedding_views as extract_embedding_views,
    extract_embeddings as extract_embeddings,
)
from relrep_hf.encoding.models import hidden_states as hidden_states
from relrep_hf.encoding.packaged_encoders import (
    e5_small as e5_small,
    use_multilingual as use_multilingual,
)
from relrep_hf.encoding.parallel_corpus import load_parallel_verses as load_parallel_verses
from relrep_hf.encoding.pooling import Pooling as Pooling, pool as pool
