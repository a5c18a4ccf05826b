"""Artifacts: what is saved, loaded and pushed (anchor sets, projectors, heads, the wrapper, maps).

What each artifact saves (`relrep_hf.utils.hub_files.ArtifactType`: its files, its
``model_type`` or marker files) is declared in `artifact_types` and named by the artifact's
class (or its config, for a transformers model) as ``artifact_type``.
`register_artifact_types` is the one place that registers the package's own; ``import
relrep_hf`` defers it to the first time the types are read.
"""

from __future__ import annotations

__all__ = ["register_artifact_types"]


def register_artifact_types() -> None:
    """Register the package's artifact types (`artifact_types.ARTIFACT_TYPES_DECLARED`, light:
    no artifact is imported) with `relrep_hf.utils.hub_files`."""
    from relrep_hf.models.artifact_types import ARTIFACT_TYPES_DECLARED
    from relrep_hf.utils.hub_files import ARTIFACT_TYPES, register_artifact_type

    for declared in ARTIFACT_TYPES_DECLARED:
        if declared.name not in ARTIFACT_TYPES:
            register_artifact_type(declared)
