"""relrep_hf: relative representations with learned anchors, for the Hugging Face ecosystem.

After ``import relrep_hf``, ``transformers.AutoModel.from_pretrained(path)`` loads a saved
`RelativeProjector`, and ``AutoModelForSequenceClassification`` a relative head.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

from relrep_hf.anchor_set import AnchorSet
from relrep_hf.configuration_relative_head import RelativeHeadConfig
from relrep_hf.configuration_relative_projector import RelativeProjectorConfig
from relrep_hf.extraction import embeddings_tensor, extract_embeddings
from relrep_hf.head_trainer import HeadTrainer, HeadTrainingArguments, HeadTrainOutput
from relrep_hf.hub import HubError, push_artifact
from relrep_hf.modeling_relative_head import (
    RelativeHeadForClassification,
    check_head_matches_projector,
)
from relrep_hf.modeling_relative_projector import RelativeProjector
from relrep_hf.modeling_relative_wrapper import (
    RelativeWrapper,
    RelativeWrapperOutput,
    RelativeWrapperWithHead,
)
from relrep_hf.param_trainer import ParamTrainer, ParamTrainingArguments
from relrep_hf.similarities import SIMILARITIES, relative_projection
from relrep_hf.statistics import Statistics, whitening_matrix
from relrep_hf.translation import LatentTranslator, relative_inverse, translate

__version__ = "0.1.0"

AutoConfig.register(RelativeProjectorConfig.model_type, RelativeProjectorConfig, exist_ok=True)
AutoModel.register(RelativeProjectorConfig, RelativeProjector, exist_ok=True)
AutoConfig.register(RelativeHeadConfig.model_type, RelativeHeadConfig, exist_ok=True)
AutoModel.register(RelativeHeadConfig, RelativeHeadForClassification, exist_ok=True)
AutoModelForSequenceClassification.register(
    RelativeHeadConfig, RelativeHeadForClassification, exist_ok=True
)

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
