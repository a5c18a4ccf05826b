"""What each artifact saves (`relrep_hf.utils.hub_files.ArtifactType`), declared in the
artifacts' layer and registered with the bottom layer by `relrep_hf.models.register_artifact_types`.

Each artifact class (or its config, for a transformers model) points at its own declaration as
``artifact_type``; the declarations sit here, light (no torch, no transformers), because a save,
a load or a push reads every kind's files (to tell what a folder holds, and which files of a
repo are stale) and must not import every artifact, the migration package among them, to do so.
A new artifact is one declaration here and its class's ``artifact_type``; utils/ names none.
"""

from __future__ import annotations

from relrep_hf.models.remote_code import REMOTE_CODE
from relrep_hf.utils.hub_files import ArtifactType

__all__ = [
    "ANCHOR_SET_FILES",
    "ANCHOR_SET_TYPE",
    "ARTIFACT_TYPES_DECLARED",
    "CLASSIFIER_TYPE",
    "HEAD_METRICS_NAME",
    "HEAD_TYPE",
    "MIGRATION_MAP_FILE",
    "MIGRATION_MAP_TYPE",
    "PROJECTOR_TYPE",
    "TOKENIZER_FILES",
]

ANCHOR_SET_FILES = ("anchor_set.json", "anchor_set.safetensors", "support.jsonl")
"""An anchor set's config, mixture weights and support inputs."""
HEAD_METRICS_NAME = "metrics.json"
"""A head's evaluation, beside its weights (written by `write_head_metrics`, shown on its card)."""
MIGRATION_MAP_FILE = "migration_map.safetensors"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
    "preprocessor_config.json",
)
"""The files a tokenizer (or image processor) may save, which a text classifier carries so
that ``pipeline(model=folder)`` finds its encoder's tokenizer."""
_MODEL_FILES = ("config.json", "model.safetensors")


def _remote_code(model_type: str) -> tuple[str, ...]:
    return REMOTE_CODE[model_type][0]


ANCHOR_SET_TYPE = ArtifactType(
    "anchor_set",
    "an anchor set",
    "AnchorSet.from_pretrained",
    ANCHOR_SET_FILES,
    ("README.md", "stitching_heatmap.png", "manifest.json"),
    markers=ANCHOR_SET_FILES[:2],
)
PROJECTOR_TYPE = ArtifactType(
    "projector",
    "a projector",
    "RelativeProjector.from_pretrained",
    _MODEL_FILES,
    ("README.md", *_remote_code("relative_projector"), "manifest.json"),
    model_type="relative_projector",
)
HEAD_TYPE = ArtifactType(
    "head",
    "a head",
    "RelativeHeadForClassification.from_pretrained",
    _MODEL_FILES,
    ("README.md", *_remote_code("relative_head"), HEAD_METRICS_NAME, "manifest.json"),
    model_type="relative_head",
)
CLASSIFIER_TYPE = ArtifactType(
    "classifier",
    "a text classifier",
    "RelativeModelForSequenceClassification.from_pretrained",
    _MODEL_FILES,
    ("README.md", *_remote_code("relative_classifier"), *TOKENIZER_FILES, "manifest.json"),
    model_type="relative_classifier",
)
MIGRATION_MAP_TYPE = ArtifactType(
    "migration_map",
    "a migration map",
    "MigrationMap.from_pretrained",
    (MIGRATION_MAP_FILE,),
    ("README.md", "manifest.json"),
    markers=(MIGRATION_MAP_FILE,),
)

ARTIFACT_TYPES_DECLARED = (
    ANCHOR_SET_TYPE,
    PROJECTOR_TYPE,
    HEAD_TYPE,
    CLASSIFIER_TYPE,
    MIGRATION_MAP_TYPE,
)
"""The package's artifact types, in the order they are registered."""
