"""Where `relrep_hf.encoding.packaged_encoders` lived before the package had layers: run folders
record encoder specs such as ``py:relrep_hf.packaged_encoders:use_multilingual``, so they still
resolve."""

from relrep_hf.encoding.packaged_encoders import *  # noqa: F403
from relrep_hf.encoding.packaged_encoders import (  # noqa: F401
    SMOLLM2_HUB_ID,
    e5_small,
    smollm2_gguf_path,
    use_multilingual,
)
