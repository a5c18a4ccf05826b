"""relrep_hf: relative representations with learned anchors, for the Hugging Face ecosystem.

After ``import relrep_hf``, ``transformers.AutoConfig``, ``AutoModel`` and
``AutoModelForSequenceClassification`` load saved projectors and heads.

Importing the package imports nothing heavy (no torch, no transformers): every public name is
imported on first use (PEP 562 ``__getattr__``), and the Auto classes are registered when
transformers' auto modules are imported (at once, if they already are). So ``relrep-hf --help``
answers without loading torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.pipeline.auto_registration import install_auto_registration
from relrep_hf.publishing import hub as _publishing  # noqa: F401  registers the card and push hook
from relrep_hf.utils.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from relrep_hf.encoding.encoder_kinds import (
        EncoderKind,
        register_encoder_kind,
        unregister_encoder_kind,
    )
    from relrep_hf.encoding.extraction import embeddings_tensor, extract_embeddings
    from relrep_hf.functional.similarities import SIMILARITIES, relative_projection
    from relrep_hf.functional.statistics import Statistics, whitening_matrix
    from relrep_hf.migration.fit import fit_migration
    from relrep_hf.migration.map import MigrationMap
    from relrep_hf.migration.migrate import migrate_store
    from relrep_hf.migration.stores import StoreKind, register_store_kind
    from relrep_hf.models.anchor_set import AnchorSet
    from relrep_hf.models.configuration_relative_head import (
        SWAPPABLE_HEAD_LAYERS,
        RelativeHeadConfig,
    )
    from relrep_hf.models.configuration_relative_projector import RelativeProjectorConfig
    from relrep_hf.models.modeling_relative_head import (
        RelativeHeadForClassification,
        check_head_matches_projector,
    )
    from relrep_hf.models.modeling_relative_projector import RelativeProjector
    from relrep_hf.models.modeling_relative_wrapper import (
        RelativeWrapper,
        RelativeWrapperOutput,
        RelativeWrapperWithHead,
    )
    from relrep_hf.models.sentence_transformers_module import RelativeProjection
    from relrep_hf.publishing.hub import HubError, push_artifact
    from relrep_hf.training.anchor_arguments import (
        FitArguments,
        ParamTrainingArguments,
        SharedLinearArguments,
    )
    from relrep_hf.training.anchor_methods import (
        ANCHOR_METHODS,
        AnchorMethod,
        FitData,
        register_anchor_method,
        unregister_anchor_method,
    )
    from relrep_hf.training.head_directions import choose_num_directions
    from relrep_hf.training.head_trainer import (
        HeadTrainer,
        HeadTrainingArguments,
        HeadTrainOutput,
        train_in_memory,
    )
    from relrep_hf.training.param_trainer import ParamTrainer
    from relrep_hf.training.shared_linear_trainer import (
        SharedLinearTuningArguments,
        fine_tune_shared_linear,
    )
    from relrep_hf.translation.inverse import relative_inverse
    from relrep_hf.translation.translator import LatentTranslator, translate

__version__ = "0.1.0"

# public name -> the module that defines it, imported on first access
_LAZY = {
    "AnchorSet": "relrep_hf.models.anchor_set",
    "RelativeHeadConfig": "relrep_hf.models.configuration_relative_head",
    "RelativeProjectorConfig": "relrep_hf.models.configuration_relative_projector",
    "embeddings_tensor": "relrep_hf.encoding.extraction",
    "extract_embeddings": "relrep_hf.encoding.extraction",
    "HeadTrainer": "relrep_hf.training.head_trainer",
    "HeadTrainingArguments": "relrep_hf.training.head_trainer",
    "HeadTrainOutput": "relrep_hf.training.head_trainer",
    "HubError": "relrep_hf.publishing.hub",
    "push_artifact": "relrep_hf.publishing.hub",
    "RelativeHeadForClassification": "relrep_hf.models.modeling_relative_head",
    "check_head_matches_projector": "relrep_hf.models.modeling_relative_head",
    "RelativeProjector": "relrep_hf.models.modeling_relative_projector",
    "RelativeWrapper": "relrep_hf.models.modeling_relative_wrapper",
    "RelativeWrapperOutput": "relrep_hf.models.modeling_relative_wrapper",
    "RelativeWrapperWithHead": "relrep_hf.models.modeling_relative_wrapper",
    "ParamTrainingArguments": "relrep_hf.training.anchor_arguments",
    "FitArguments": "relrep_hf.training.anchor_arguments",
    "SharedLinearArguments": "relrep_hf.training.anchor_arguments",
    "ANCHOR_METHODS": "relrep_hf.training.anchor_methods",
    "AnchorMethod": "relrep_hf.training.anchor_methods",
    "FitData": "relrep_hf.training.anchor_methods",
    "register_anchor_method": "relrep_hf.training.anchor_methods",
    "unregister_anchor_method": "relrep_hf.training.anchor_methods",
    "EncoderKind": "relrep_hf.encoding.encoder_kinds",
    "register_encoder_kind": "relrep_hf.encoding.encoder_kinds",
    "unregister_encoder_kind": "relrep_hf.encoding.encoder_kinds",
    "StoreKind": "relrep_hf.migration.stores",
    "register_store_kind": "relrep_hf.migration.stores",
    "ParamTrainer": "relrep_hf.training.param_trainer",
    "SIMILARITIES": "relrep_hf.functional.similarities",
    "relative_projection": "relrep_hf.functional.similarities",
    "Statistics": "relrep_hf.functional.statistics",
    "whitening_matrix": "relrep_hf.functional.statistics",
    "LatentTranslator": "relrep_hf.translation.translator",
    "relative_inverse": "relrep_hf.translation.inverse",
    "translate": "relrep_hf.translation.translator",
    "MigrationMap": "relrep_hf.migration.map",
    "fit_migration": "relrep_hf.migration.fit",
    "migrate_store": "relrep_hf.migration.migrate",
    "SWAPPABLE_HEAD_LAYERS": "relrep_hf.models.configuration_relative_head",
    "RelativeProjection": "relrep_hf.models.sentence_transformers_module",
    "train_in_memory": "relrep_hf.training.head_trainer",
    "choose_num_directions": "relrep_hf.training.head_directions",
    "fine_tune_shared_linear": "relrep_hf.training.shared_linear_trainer",
    "SharedLinearTuningArguments": "relrep_hf.training.shared_linear_trainer",
}

__all__ = [
    "ANCHOR_METHODS",
    "SIMILARITIES",
    "SWAPPABLE_HEAD_LAYERS",
    "AnchorMethod",
    "AnchorSet",
    "EncoderKind",
    "FitArguments",
    "FitData",
    "HeadTrainOutput",
    "HeadTrainer",
    "HeadTrainingArguments",
    "HubError",
    "LatentTranslator",
    "MigrationMap",
    "ParamTrainer",
    "ParamTrainingArguments",
    "RelativeHeadConfig",
    "RelativeHeadForClassification",
    "RelativeProjection",
    "RelativeProjector",
    "RelativeProjectorConfig",
    "RelativeWrapper",
    "RelativeWrapperOutput",
    "RelativeWrapperWithHead",
    "SharedLinearArguments",
    "SharedLinearTuningArguments",
    "Statistics",
    "StoreKind",
    "check_head_matches_projector",
    "choose_num_directions",
    "embeddings_tensor",
    "extract_embeddings",
    "fine_tune_shared_linear",
    "fit_migration",
    "migrate_store",
    "push_artifact",
    "register_anchor_method",
    "register_encoder_kind",
    "register_store_kind",
    "relative_inverse",
    "relative_projection",
    "train_in_memory",
    "translate",
    "unregister_anchor_method",
    "unregister_encoder_kind",
    "whitening_matrix",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)


install_auto_registration()
