"""Artifacts: what is saved, loaded and pushed (anchor sets, projectors, heads, the wrapper, maps).

Each artifact declares what it saves (`relrep_hf.utils.hub_files.ArtifactType`: its files, its
``model_type`` or marker files) on its class, or on its config for a transformers model.
`register_artifact_types` is the one place that registers the package's own; ``import
relrep_hf`` defers it to the first time the types are read (importing the artifacts loads
torch).
"""

from __future__ import annotations

__all__ = ["register_artifact_types"]


def register_artifact_types() -> None:
    """Register the package's artifact types with `relrep_hf.utils.hub_files`."""
    from relrep_hf.migration.map import MigrationMap
    from relrep_hf.models.anchor_set import AnchorSet
    from relrep_hf.models.configuration_relative_classifier import RelativeClassifierConfig
    from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
    from relrep_hf.models.configuration_relative_projector import RelativeProjectorConfig
    from relrep_hf.utils.hub_files import ARTIFACT_TYPES, register_artifact_type

    for declared in (
        AnchorSet,
        RelativeProjectorConfig,
        RelativeHeadConfig,
        RelativeClassifierConfig,
        MigrationMap,
    ):
        if declared.artifact_type.name not in ARTIFACT_TYPES:
            register_artifact_type(declared.artifact_type)
