"""Publishing on the Hub: push artifacts as one commit each, with their card and provenance.

* `relrep_hf.publishing.hub.push`: `prepare_upload` (portable provenance, model card, remote code,
  manifest) and `push_folder`, the one upload (`relrep_hf.utils.hub_files.commit_folder`) with it.
* `relrep_hf.publishing.hub.folders`: `push_artifact` and `push_run`, for folders written by training.

Importing this package registers the publisher that artifacts reach through
`relrep_hf.utils.publishing_hooks` (``save_pretrained`` writes the card through it, ``push_to_hub``
readies the folder through it); ``relrep_hf/__init__.py`` imports it, so the hook is in effect whenever any
relrep_hf module is. The card and Hub code load on first use: this import stays light. The
transfers both ways (`resolve_folder`, `commit_folder`, `HubError`) are `relrep_hf.utils.hub_files`,
below the artifacts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from relrep_hf.utils.lazy_imports import lazy_attributes
from relrep_hf.utils.publishing_hooks import register_publisher

if TYPE_CHECKING:
    from relrep_hf.publishing.hub.folders import push_artifact, push_run
    from relrep_hf.publishing.hub.push import prepare_upload, push_folder
    from relrep_hf.utils.hub_files import HubError, artifact_kind

__all__ = [
    "HubError",
    "RelrepPublisher",
    "artifact_kind",
    "prepare_upload",
    "push_artifact",
    "push_folder",
    "push_run",
]

# name -> the module that defines it, imported on first access
_LAZY = {
    "HubError": "relrep_hf.utils.hub_files",
    "artifact_kind": "relrep_hf.utils.hub_files",
    "prepare_upload": "relrep_hf.publishing.hub.push",
    "push_artifact": "relrep_hf.publishing.hub.folders",
    "push_folder": "relrep_hf.publishing.hub.push",
    "push_run": "relrep_hf.publishing.hub.folders",
}


class RelrepPublisher:
    """What artifacts get through the hook: cards from `relrep_hf.publishing.cards`, and the
    folder readied for a push by `prepare_upload`."""

    def write_card(self, folder: Path) -> Path | None:
        from relrep_hf.publishing.cards import write_folder_card

        return write_folder_card(folder)

    def prepare_upload(
        self, folder: Path, *, repo_id: str, token: str | bool | None = None
    ) -> None:
        from relrep_hf.publishing.hub.push import prepare_upload

        prepare_upload(folder, repo_id=repo_id, token=token)

    def __repr__(self) -> str:
        return "relrep_hf.publishing.hub.RelrepPublisher()"


register_publisher(RelrepPublisher(), exist_ok=True)


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
