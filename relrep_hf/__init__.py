"""relrep_hf: relative representations with learned anchors, for the Hugging Face ecosystem.

After ``import relrep_hf``, ``transformers.AutoModel.from_pretrained(path)`` loads a
saved `RelativeProjector`.
"""

from transformers import AutoConfig, AutoModel

from relrep_hf.anchor_set import AnchorSet
from relrep_hf.configuration_relative_projector import RelativeProjectorConfig
from relrep_hf.modeling_relative_projector import RelativeProjector
from relrep_hf.param_trainer import ParamTrainer, ParamTrainingArguments
from relrep_hf.similarities import SIMILARITIES, relative_projection
from relrep_hf.statistics import Statistics, whitening_matrix

__version__ = "0.1.0"

AutoConfig.register(RelativeProjectorConfig.model_type, RelativeProjectorConfig, exist_ok=True)
AutoModel.register(RelativeProjectorConfig, RelativeProjector, exist_ok=True)

__all__ = [
    "SIMILARITIES",
    "AnchorSet",
    "ParamTrainer",
    "ParamTrainingArguments",
    "RelativeProjector",
    "RelativeProjectorConfig",
    "Statistics",
    "relative_projection",
    "whitening_matrix",
]
