"""`RelrepPreTrainedModel`: the artifact base on a transformers `PreTrainedModel`.

Projectors and heads are small artifacts: a config and a few tensors. They save, verify and
push as every artifact does (`relrep_hf.utils.artifacts.ArtifactMixin`: the folder checked, an
atomic save with card and sha256 manifest, one-commit pushes); what is theirs is transformers'
file format and ``from_pretrained`` signature, and the structural checks that turn broken files
into errors that say what to do. `AutoModel.from_pretrained` still loads them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers import PreTrainedModel

from relrep_hf.models.configuration_utils import NewerFormatError
from relrep_hf.utils.artifacts import ArtifactMixin, read_verified, resolve_artifact_folder
from relrep_hf.utils.file_checks import (
    ArtifactFileError,
    check_sizes,
    compare_tensors,
    read_json_file,
    safetensors_shapes,
)

CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"
_SIZE_KEYS = ("hidden_size", "num_anchors", "num_labels", "hidden_sizes")


class RelrepPreTrainedModel(ArtifactMixin, PreTrainedModel):
    """The artifact base (`relrep_hf.utils.artifacts.ArtifactMixin`: checked, atomic saves with
    card and manifest, one-commit pushes) on a transformers model, with clear load errors."""

    artifact_name = "model"  # used in messages: "projector", "head"

    def __init_subclass__(cls, **kwargs) -> None:
        """A model's names, said once: in messages as its config class names it, and its
        weights' prefix (transformers' ``base_model_prefix``) from its kind; a subclass that
        sets either itself keeps its own."""
        if cls.artifact_kind:
            if "artifact_name" not in vars(cls):
                cls.artifact_name = cls.config_class.artifact_name
            if "base_model_prefix" not in vars(cls):
                cls.base_model_prefix = f"relative_{cls.artifact_kind}"
        super().__init_subclass__(**kwargs)

    def _write_extras(self, folder: Path) -> None:
        """Files of the artifact's own saved beside config.json and model.safetensors."""

    def _save_files(self, folder: Path, **kwargs) -> None:
        """config.json and model.safetensors (transformers' save), and the artifact's extras."""
        PreTrainedModel.save_pretrained(self, folder, **kwargs)
        self._write_extras(folder)

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
        what = cls.artifact_name
        download = ("revision", "token", "cache_dir", "local_files_only", "force_download")
        folder, commit, source = resolve_artifact_folder(
            pretrained_model_name_or_path,
            kind=cls.artifact_kind,
            what=what,
            loader=cls.__name__,
            subfolder=subfolder,
            **{key: kwargs[key] for key in download if key in kwargs},
        )
        if commit is not None:
            kwargs["revision"] = commit  # transformers reads the very snapshot checked here
        if subfolder:  # e.g. a sentence-transformers module's folder: load the files checked
            pretrained_model_name_or_path = folder

        def load(read: Path) -> tuple[RelrepPreTrainedModel, dict]:
            # ``read``: the folder, or a private copy of one version of it (`read_verified`)
            name = pretrained_model_name_or_path if read == folder else read
            loaded = cls._load_checked(read, source, name, *args, **kwargs)
            if read != folder:  # the model names the folder, not the copy
                loaded[0].config._name_or_path = str(pretrained_model_name_or_path)
            return loaded

        model, info = read_verified(
            folder, load, required=(CONFIG_NAME, WEIGHTS_NAME), what=what, source=source,
            verify=verify, stacklevel=7,
        )  # fmt: skip
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
            # transformers' load (the next in line after the artifact base's)
            return super(ArtifactMixin, cls).from_pretrained(
                name_or_path, *args, output_loading_info=True, **kwargs
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

    def post_load(self) -> None:
        """Called after a successful `from_pretrained`."""

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
