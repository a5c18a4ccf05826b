"""What an artifact gets before it goes to the Hub: its card, remote code and provenance.

Every push is one commit made by `relrep_hf.utils.hub_files.commit_folder` (the one upload path,
beside the download path), which calls `prepare_upload` on the temporary folder first: the
artifact is made portable (`relrep_hf.publishing.provenance`), given its model card
(`relrep_hf.publishing.cards`) and, for a projector, head or text classifier, the code that loads
it with transformers alone (`relrep_hf.models.remote_code`). `push_folder` here is that upload with this preparation
(saved folders: `relrep_hf.publishing.hub.folders`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from relrep_hf.migration.map import MigrationMap
from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.models.modeling_relative_wrapper import RelativeModelForSequenceClassification
from relrep_hf.models.remote_code import write_remote_code
from relrep_hf.publishing.cards import write_folder_card
from relrep_hf.publishing.provenance import make_portable
from relrep_hf.utils.hub_files import (
    ARTIFACT_FILES,
    commit_folder,
    detect_artifact_kind,
)
from relrep_hf.utils.manifest import write_manifest

__all__ = ["copy_artifact", "prepare_upload", "push_folder", "validate_artifact"]


def push_folder(save: Callable[[Path], None], repo_id: str, **kwargs: Any) -> str:
    """`relrep_hf.utils.hub_files.commit_folder` with this layer's `prepare_upload`: the artifact
    written by ``save(folder)``, made portable, carded and pushed as one commit; returns its sha.
    ``kwargs``: ``private``, ``token``, ``revision``, ``commit_message``, ``create_pr``."""
    return commit_folder(save, repo_id, prepare=prepare_upload, **kwargs)


def prepare_upload(folder: Path, *, repo_id: str, token: str | bool | None = None) -> None:
    """Make a saved artifact ``folder`` (a temporary copy) ready for the Hub, in place.

    Portable provenance in its config, the remote code of a projector, head or text classifier, the model card and the
    manifest. A folder that holds no relrep_hf artifact is left as it is.
    """
    kind = detect_artifact_kind(folder)
    if kind is None or kind == "run":
        return
    make_portable(folder, token=token)
    if kind in ("projector", "head", "classifier"):
        write_remote_code(folder)
    write_folder_card(folder, repo_id=repo_id)
    write_manifest(folder)


def validate_artifact(folder: Path, kind: str) -> Any:
    """Load the artifact in ``folder`` (a full check of its files); errors name the folder."""
    loader = {
        "anchor_set": AnchorSet.from_pretrained,
        "projector": RelativeProjector.from_pretrained,
        "head": RelativeHeadForClassification.from_pretrained,
        # its own files, checked; the encoder it names is not downloaded to push it
        "classifier": partial(
            RelativeModelForSequenceClassification.from_pretrained, load_encoder=False
        ),
        "migration_map": MigrationMap.from_pretrained,
    }[kind]
    try:
        return loader(str(folder))
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise ValueError(
            f"The {kind.replace('_', ' ')} in {str(folder)!r} cannot be loaded ({error}); "
            "nothing was pushed. Save it again."
        ) from error


def copy_artifact(source: Path, target: Path, kind: str) -> None:
    """Copy the artifact's own files (required and optional ones that exist)."""
    required, optional = ARTIFACT_FILES[kind]
    for name in (*required, *optional):
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
