"""relrep_hf: relative representations with learned anchors, for the Hugging Face ecosystem.

After ``import relrep_hf``, ``transformers.AutoModel.from_pretrained(path)`` loads a saved
`RelativeProjector`, and ``AutoModelForSequenceClassification`` a relative head.

Only what that registration needs is imported here; every other public name is imported on
first use (PEP 562 ``__getattr__``), so ``import relrep_hf`` and ``relrep-hf --help`` do not load
datasets, evaluate, accelerate or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

from relrep_hf import hub as _publishing  # noqa: F401  registers the card and push hook
from relrep_hf.configuration_relative_head import RelativeHeadConfig
from relrep_hf.configuration_relative_projector import RelativeProjectorConfig
from relrep_hf.modeling_relative_head import (
    RelativeHeadForClassification,
    check_head_matches_projector,
)
from relrep_hf.modeling_relative_projector import RelativeProjector
from relrep_hf.similarities import SIMILARITIES, relative_projection
from relrep_hf.statistics import Statistics, whitening_matrix

if TYPE_CHECKING:
    from relrep_hf.anchor_set import AnchorSet
    from relrep_hf.extraction import embeddings_tensor, extract_embeddings
    from relrep_hf.head_trainer import HeadTrainer, HeadTrainingArguments, HeadTrainOutput
    from relrep_hf.hub import HubError, push_artifact
    from relrep_hf.modeling_relative_wrapper import (
        RelativeWrapper,
        RelativeWrapperOutput,
        RelativeWrapperWithHead,
    )
    from relrep_hf.param_arguments import ParamTrainingArguments
    from relrep_hf.param_trainer import ParamTrainer
    from relrep_hf.translation import LatentTranslator, relative_inverse, translate

__version__ = "0.1.0"

AutoConfig.register(RelativeProjectorConfig.model_type, RelativeProjectorConfig, exist_ok=True)
AutoModel.register(RelativeProjectorConfig, RelativeProjector, exist_ok=True)
AutoConfig.register(RelativeHeadConfig.model_type, RelativeHeadConfig, exist_ok=True)
AutoModel.register(RelativeHeadConfig, RelativeHeadForClassification, exist_ok=True)
AutoModelForSequenceClassification.register(
    RelativeHeadConfig, RelativeHeadForClassification, exist_ok=True
)

# name -> the module that defines it, imported on first access
_LAZY = {
    "AnchorSet": "relrep_hf.anchor_set",
    "embeddings_tensor": "relrep_hf.extraction",
    "extract_embeddings": "relrep_hf.extraction",
    "HeadTrainer": "relrep_hf.head_trainer",
    "HeadTrainingArguments": "relrep_hf.head_trainer",
    "HeadTrainOutput": "relrep_hf.head_trainer",
    "HubError": "relrep_hf.hub",
    "push_artifact": "relrep_hf.hub",
    "RelativeWrapper": "relrep_hf.modeling_relative_wrapper",
    "RelativeWrapperOutput": "relrep_hf.modeling_relative_wrapper",
    "RelativeWrapperWithHead": "relrep_hf.modeling_relative_wrapper",
    "ParamTrainer": "relrep_hf.param_trainer",
    "ParamTrainingArguments": "relrep_hf.param_arguments",
    "LatentTranslator": "relrep_hf.translation",
    "relative_inverse": "relrep_hf.translation",
    "translate": "relrep_hf.translation",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'relrep_hf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "SIMILARITIES",
    "AnchorSet",
    "HeadTrainOutput",
    "HeadTrainer",
    "HeadTrainingArguments",
    "HubError",
    "LatentTranslator",
    "ParamTrainer",
    "ParamTrainingArguments",
    "RelativeHeadConfig",
    "RelativeHeadForClassification",
    "RelativeProjector",
    "RelativeProjectorConfig",
    "RelativeWrapper",
    "RelativeWrapperOutput",
    "RelativeWrapperWithHead",
    "Statistics",
    "check_head_matches_projector",
    "embeddings_tensor",
    "extract_embeddings",
    "push_artifact",
    "relative_inverse",
    "relative_projection",
    "translate",
    "whitening_matrix",
]
