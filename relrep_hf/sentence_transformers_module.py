"""Where `relrep_hf.models.sentence_transformers_module` lived before the package had layers:
sentence-transformers saves record a module's import path (``modules.json``), so folders saved
then still load."""

from relrep_hf.models.sentence_transformers_module import *  # noqa: F403
from relrep_hf.models.sentence_transformers_module import RelativeProjection  # noqa: F401
