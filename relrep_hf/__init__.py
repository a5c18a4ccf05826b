"""relrep_hf: relative representations with learned anchors, for the Hugging Face ecosystem.

After ``import relrep_hf``, ``transformers.AutoConfig``, ``AutoModel`` and
``AutoModelForSequenceClassification`` load saved projectors and heads.

Importing the package imports nothing heavy (no torch, no transformers): every public name is
imported on first use (PEP 562 ``__getattr__``), and the Auto classes are registered when
transformers' auto modules are imported (at once, if they already are). So ``relrep-hf --help``
answers without loading torch.
"""

from __future__ import annotations

from relrep_hf.anchors import register_anchor_methods
from relrep_hf.models import register_artifact_types
from relrep_hf.pipeline.auto_registration import install_auto_registration
from relrep_hf.publishing import hub as _publishing  # noqa: F401  registers the card and push hook
from relrep_hf.utils.deprecated_import import install_deprecated_imports
from relrep_hf.utils.hub_files import defer_artifact_types
from relrep_hf.utils.lazy_imports import lazy_attributes, stub_names

__version__ = "0.1.0"


_LAZY = stub_names(__file__)  # public name -> its module, from __init__.pyi
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)


install_auto_registration()
register_anchor_methods()  # the anchor methods, one folder each (relrep_hf.anchors)
defer_artifact_types(register_artifact_types)  # what each artifact saves, read on first use
install_deprecated_imports()  # moved paths (saved artifacts record some) still import, warning
