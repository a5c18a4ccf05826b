# The public names of relrep_hf, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use. Only what a user calls (docs/api.md, tests/test_public_api.py); a name exported
# before answers from its module with a warning (utils/deprecated_import.py). Every extension
# point's `register_*` and `unregister_*` is among them, with the type it registers: the one
# place they are exported from (docs/architecture.md, "Where to extend").

__version__: str

from relrep_hf.anchors import (
    ANCHOR_METHODS as ANCHOR_METHODS,
    AnchorMethod as AnchorMethod,
    FitData as FitData,
    register_anchor_method as register_anchor_method,
    unregister_anchor_method as unregister_anchor_method,
)
from relrep_hf.anchors.arguments import FitArguments as FitArguments
from relrep_hf.anchors.param.arguments import ParamTrainingArguments as ParamTrainingArguments
from relrep_hf.anchors.param.trainer import ParamTrainer as ParamTrainer
from relrep_hf.anchors.shared_linear.arguments import SharedLinearArguments as SharedLinearArguments
from relrep_hf.encoding.encoder_kinds import (
    EncoderKind as EncoderKind,
    register_encoder_kind as register_encoder_kind,
    unregister_encoder_kind as unregister_encoder_kind,
)
from relrep_hf.functional.similarities import (
    Similarity as Similarity,
    register_similarity as register_similarity,
    unregister_similarity as unregister_similarity,
)
from relrep_hf.functional.statistics import Statistics as Statistics
from relrep_hf.migration.candidates import (
    MigrationCandidate as MigrationCandidate,
    register_migration_candidate as register_migration_candidate,
    unregister_migration_candidate as unregister_migration_candidate,
)
from relrep_hf.migration.fit import fit_migration as fit_migration
from relrep_hf.migration.map import MigrationMap as MigrationMap
from relrep_hf.migration.migrate import migrate_store as migrate_store
from relrep_hf.migration.reembed import reembed_store as reembed_store
from relrep_hf.migration.stores import (
    StoreKind as StoreKind,
    register_store_kind as register_store_kind,
    unregister_store_kind as unregister_store_kind,
)
from relrep_hf.models.anchor_set import AnchorSet as AnchorSet
from relrep_hf.models.configuration_relative_classifier import (
    RelativeClassifierConfig as RelativeClassifierConfig,
)
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig as RelativeHeadConfig
from relrep_hf.models.configuration_relative_projector import (
    RelativeProjectorConfig as RelativeProjectorConfig,
)
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification as RelativeHeadForClassification,
)
from relrep_hf.models.modeling_relative_projector import RelativeProjector as RelativeProjector
from relrep_hf.models.modeling_relative_wrapper import (
    RelativeModelForSequenceClassification as RelativeModelForSequenceClassification,
    RelativeWrapper as RelativeWrapper,
)
from relrep_hf.models.sentence_transformers_module import RelativeProjection as RelativeProjection
from relrep_hf.publishing.hub import HubError as HubError
from relrep_hf.training.head_trainer import (
    HeadTrainer as HeadTrainer,
    HeadTrainingArguments as HeadTrainingArguments,
    train_in_memory as train_in_memory,
)
from relrep_hf.translation.inverse import relative_inverse as relative_inverse
from relrep_hf.translation.translator import (
    LatentTranslator as LatentTranslator,
    translate as translate,
)
from relrep_hf.utils.hub_files import (
    ArtifactType as ArtifactType,
    register_artifact_type as register_artifact_type,
    unregister_artifact_type as unregister_artifact_type,
)
from relrep_hf.utils.publishing_hooks import (
    register_publisher as register_publisher,
    unregister_publisher as unregister_publisher,
)
