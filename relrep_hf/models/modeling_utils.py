"""`RelrepPreTrainedModel`: what every relrep_hf artifact model shares.

Projectors and heads are small artifacts: a config and a few tensors. Saving them is
atomic (a killed process never leaves a half-written folder); their model card is written
and their pushes are sent by the publishing layer, reached through
`relrep_hf.utils.publishing_hooks`; loading turns broken files into errors that say what to do.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers import PreTrainedModel

from relrep_hf.models.configuration_utils import NewerFormatError
from relrep_hf.utils.file_checks import (
    ArtifactFileError,
    check_sizes,
    compare_tensors,
    read_json_file,
    safetensors_shapes,
)
from relrep_hf.utils.hub_files import resolve_folder
from relrep_hf.utils.io import atomic_directory
from relrep_hf.utils.local_paths import check_local_path
from relrep_hf.utils.manifest import read_consistently, verify_folder, write_manifest
from relrep_hf.utils.publishing_hooks import publisher

_HUB_KWARGS = ("repo_id", "token", "private", "commit_message", "revision", "create_pr")
CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"
_SIZE_KEYS = ("hidden_size", "num_anchors", "num_labels", "hidden_sizes")


class RelrepPreTrainedModel(PreTrainedModel):
    """Atomic saves with a model card, one-commit pushes, clear load errors."""

    artifact_name = "model"  # used in messages: "projector", "head"

    def _write_extras(self, folder: Path) -> None:
        """Files of the artifact's own saved beside config.json and model.safetensors."""

    def save_pretrained(
        self, save_directory: str | os.PathLike, *, push_to_hub: bool = False, **kwargs
    ) -> None:
        """Save config.json, model.safetensors, the model card and their manifest (sha256 of
        each file) atomically and durably: into a staging folder that then replaces the whole
        folder, so it holds exactly these files (see `relrep_hf.utils.io.atomic_directory`). The card
        is written by the publishing layer (`relrep_hf.utils.publishing_hooks`)."""
        hub_kwargs = {key: kwargs.pop(key) for key in _HUB_KWARGS if key in kwargs}
        with atomic_directory(save_directory) as staging:
            super().save_pretrained(staging, **kwargs)
            self._write_extras(staging)
            publisher().write_card(staging)
            write_manifest(staging)
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
        """Push as one commit (the publishing layer's `relrep_hf.publishing.hub.push_folder`, reached
        through `relrep_hf.utils.publishing_hooks`); returns its sha.

        The pushed config names the encoder and anchor set by Hub id and commit, never by a
        local path. The model in memory is not changed.
        """
        return publisher().push_folder(
            self.save_pretrained,
            repo_id,
            private=private,
            token=token,
            revision=revision,
            commit_message=commit_message or f"Upload {self.artifact_name} with relrep_hf",
            create_pr=create_pr,
        )

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str | os.PathLike,
        *args,
        verify: bool | None = None,
        **kwargs,
    ):
        """Load, turning broken files into errors that say what to do.

        The files are checked before anything is built from them: against the manifest of
        sha256 digests written at save time (``verify=False`` or ``RELREP_HF_VERIFY=0`` skips
        that), and structurally (safetensors header, sizes in config.json, the tensors the
        model expects). Weights are read from safetensors only, never from a pickle.
        """
        wants_info = kwargs.pop("output_loading_info", False)
        subfolder = kwargs.pop("subfolder", "") or ""
        source, what = str(pretrained_model_name_or_path), cls.artifact_name
        folder = Path(pretrained_model_name_or_path)
        if not folder.is_dir():
            check_local_path(pretrained_model_name_or_path)
            folder, commit = resolve_folder(
                pretrained_model_name_or_path,
                revision=kwargs.get("revision"),
                token=kwargs.get("token"),
                cache_dir=kwargs.get("cache_dir"),
                local_files_only=kwargs.get("local_files_only", False),
                force_download=kwargs.get("force_download", False),
            )
            kwargs["revision"] = commit  # transformers reads the very snapshot checked here
        if subfolder:  # e.g. a sentence-transformers module's folder: load the files checked
            folder = folder / subfolder
            source = f"{source} (subfolder {subfolder!r})"
            pretrained_model_name_or_path = folder
        cls._check_kind(folder, source)

        def load(read: Path) -> tuple[RelrepPreTrainedModel, dict]:
            # ``read``: the folder, or a private copy of one version of it (`read_consistently`)
            name = pretrained_model_name_or_path if read == folder else read
            # The digests are computed on a second thread (hashlib releases the GIL) while the
            # files are checked and loaded; no model is returned, and no other error raised,
            # before the check has passed.
            with ThreadPoolExecutor(max_workers=1) as pool:
                digests = pool.submit(
                    verify_folder, read, required=(CONFIG_NAME, WEIGHTS_NAME), what=what,
                    source=source, verify=verify, stacklevel=5,
                )  # fmt: skip
                try:
                    loaded = cls._load_checked(read, source, name, *args, **kwargs)
                except BaseException:
                    digests.result()  # a corrupted file explains the failure better: raise that
                    raise
                digests.result()
            if read != folder:  # the model names the folder, not the copy
                loaded[0].config._name_or_path = str(pretrained_model_name_or_path)
            return loaded

        # one version of the folder, though other processes save to it meanwhile
        model, info = read_consistently(folder, load, source=source)
        missing = sorted(info["missing_keys"])
        if missing:
            raise OSError(
                f"The {what} at {source!r} lacks the tensors {missing}: the file was not written "
                f"by {cls.__name__}.save_pretrained, or it is incomplete. Save it again."
            )
        model.post_load()
        return (model, info) if wants_info else model

    @classmethod
    def _load_checked(cls, folder: Path, source: str, name_or_path, *args, **kwargs):
        """The structural checks, then transformers' load (safetensors only)."""
        what = cls.artifact_name
        cls._check_files(folder, source)
        kwargs["use_safetensors"] = True
        try:
            return super().from_pretrained(name_or_path, *args, output_loading_info=True, **kwargs)
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

    def post_load(self) -> None:
        """Called after a successful `from_pretrained`."""

    @classmethod
    def _check_kind(cls, folder: Path, source: str) -> None:
        """Refuse a folder that holds another kind of artifact, or none."""
        what = cls.artifact_name
        if (folder / "anchor_set.json").is_file() and not (folder / CONFIG_NAME).is_file():
            raise ArtifactFileError(
                f"{source!r} is an anchor set, not a {what}: load it with "
                "AnchorSet.from_pretrained, and build projectors from it with "
                "RelativeProjector.from_anchor_set."
            )
        missing = [n for n in (CONFIG_NAME, WEIGHTS_NAME) if not (folder / n).is_file()]
        if missing:
            raise ArtifactFileError(
                f"{source!r} is not a saved {what}: it lacks {', '.join(missing)} (weights load "
                f"from safetensors only, never from a pickle). Save it with "
                f"{cls.__name__}.save_pretrained."
            )

    @classmethod
    def _check_files(cls, folder: Path, source: str) -> None:
        """Refuse files that are not this artifact before transformers builds anything."""
        what = cls.artifact_name
        tensors = safetensors_shapes(folder / WEIGHTS_NAME, what=what, source=source)
        raw = read_json_file(folder / CONFIG_NAME, what=what, source=source)
        expected_type = cls.config_class.model_type
        if not isinstance(raw, dict) or raw.get("model_type") != expected_type:
            found = raw.get("model_type") if isinstance(raw, dict) else type(raw).__name__
            raise ArtifactFileError(
                f"{CONFIG_NAME} of the {what} at {source!r} has model_type {found!r}, not "
                f"{expected_type!r}: it is not a {what} saved by relrep_hf. Save it again."
            )
        numbers = max(1, sum(math.prod(shape) for _, shape in tensors.values()))
        keys = _SIZE_KEYS
        if isinstance(raw, dict) and raw.get("num_directions") is not None:
            # a head reading its first num_directions features has weights for those alone
            keys = (*(k for k in keys if k != "num_anchors"), "num_directions")
        check_sizes(raw, limit=numbers, keys=keys, file=CONFIG_NAME, what=what, source=source)
        for key in ("id2label", "label2id"):
            if key in raw and (not isinstance(raw[key], dict) or len(raw[key]) > numbers):
                raise ArtifactFileError(
                    f"{CONFIG_NAME} of the {what} at {source!r} has a malformed {key} (a map "
                    "with one entry per label is expected). Save it again."
                )
        try:
            config = cls.config_class.from_dict(raw)
            with torch.device("meta"):  # shapes only: nothing is allocated
                expected = {k: tuple(v.shape) for k, v in cls(config).state_dict().items()}
        except NewerFormatError as error:  # not corrupted: the fix is an upgrade
            raise ArtifactFileError(
                f"{CONFIG_NAME} of the {what} at {source!r}: {error}"
            ) from error
        except Exception as error:  # whatever the config's values make the constructors raise
            raise ArtifactFileError(
                f"{CONFIG_NAME} of the {what} at {source!r} is invalid ({type(error).__name__}: "
                f"{error}). It is corrupted or was not written by relrep_hf: save it again."
            ) from error
        declared = ", ".join(f"{k}={raw[k]}" for k in _SIZE_KEYS if k in raw)
        compare_tensors(
            tensors, expected, file=WEIGHTS_NAME, what=what, source=source, declared=declared
        )

    @classmethod
    def _declared_sizes(cls, source: str) -> str:
        try:
            config = cls.config_class.from_pretrained(source)
        except (OSError, ValueError):
            return "unreadable"
        sizes = ("hidden_size", "num_anchors", "num_labels")
        return ", ".join(f"{k}={getattr(config, k)}" for k in sizes if hasattr(config, k))
