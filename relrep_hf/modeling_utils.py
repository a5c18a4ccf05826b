"""`RelrepPreTrainedModel`: what every relrep_hf artifact model shares.

Projectors and heads are small artifacts: a config and a few tensors. Saving them is
atomic (a killed process never leaves a half-written folder) and writes their model
card; pushing sends one commit with portable provenance; loading turns broken files
into errors that say what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

from safetensors import SafetensorError
from transformers import PreTrainedModel

from relrep_hf.cards import write_card
from relrep_hf.hub import push_folder
from relrep_hf.io import atomic_directory

_HUB_KWARGS = ("repo_id", "token", "private", "commit_message", "revision", "create_pr")


class RelrepPreTrainedModel(PreTrainedModel):
    """Atomic saves with a model card, one-commit pushes, clear load errors."""

    artifact_name = "model"  # used in messages: "projector", "head"

    def _write_extras(self, folder: Path) -> None:
        """Files saved beside config.json and model.safetensors (the model card)."""
        write_card(self, folder)

    def save_pretrained(
        self, save_directory: str | os.PathLike, *, push_to_hub: bool = False, **kwargs
    ) -> None:
        """Save config.json, model.safetensors and the model card atomically (into a temporary
        folder, then renamed into place)."""
        hub_kwargs = {key: kwargs.pop(key) for key in _HUB_KWARGS if key in kwargs}
        with atomic_directory(save_directory) as staging:
            super().save_pretrained(staging, **kwargs)
            self._write_extras(staging)
        if push_to_hub:
            self.push_to_hub(hub_kwargs.pop("repo_id", Path(save_directory).name), **hub_kwargs)

    def push_to_hub(
        self,
        repo_id: str,
        *,
        private: bool | None = None,
        token: str | bool | None = None,
        revision: str | None = None,
        commit_message: str | None = None,
        create_pr: bool = False,
    ) -> str:
        """Push as one commit (see `relrep_hf.hub.push_folder`); returns its sha.

        The pushed config names the encoder and anchor set by Hub id and commit, never by a
        local path. The model in memory is not changed.
        """
        return push_folder(
            self.save_pretrained,
            repo_id,
            private=private,
            token=token,
            revision=revision,
            commit_message=commit_message or f"Upload {self.artifact_name} with relrep_hf",
            create_pr=create_pr,
        )

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *args, **kwargs):
        """Load, turning broken files into errors that say what to do."""
        wants_info = kwargs.pop("output_loading_info", False)
        source, what = str(pretrained_model_name_or_path), cls.artifact_name
        try:
            model, info = super().from_pretrained(
                pretrained_model_name_or_path, *args, output_loading_info=True, **kwargs
            )
        except SafetensorError as error:
            raise OSError(
                f"The weights of the {what} at {source!r} are corrupted or truncated ({error}). "
                "Download it again (force_download=True) or save it again."
            ) from error
        except RuntimeError as error:
            if "mismatch" not in str(error):
                raise
            raise ValueError(
                f"The tensors of the {what} at {source!r} do not have the sizes its config.json "
                f"declares ({cls._declared_sizes(source)}). The config and the weights come from "
                f"different saves: save the {what} again."
            ) from error
        missing = sorted(info["missing_keys"])
        if missing:
            raise OSError(
                f"The {what} at {source!r} lacks the tensors {missing}: the file was not written "
                f"by {cls.__name__}.save_pretrained, or it is incomplete. Save it again."
            )
        model.post_load()
        return (model, info) if wants_info else model

    def post_load(self) -> None:
        """Called after a successful `from_pretrained`."""

    @classmethod
    def _declared_sizes(cls, source: str) -> str:
        try:
            config = cls.config_class.from_pretrained(source)
        except (OSError, ValueError):
            return "unreadable"
        sizes = ("hidden_size", "num_anchors", "num_labels")
        return ", ".join(f"{k}={getattr(config, k)}" for k in sizes if hasattr(config, k))
