"""The files of a saved anchor set: written, and read and checked against each other before
any tensor is loaded (a folder written by someone else is untrusted input). `AnchorSet`'s
``save_pretrained`` and ``from_pretrained`` build on them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from relrep_hf.functional.statistics import DEFAULT_EPS, DEFAULT_SHRINKAGE
from relrep_hf.utils.file_checks import ArtifactFileError, read_json_file, safetensors_shapes
from relrep_hf.utils.hub_files import artifact_kind, resolve_folder
from relrep_hf.utils.manifest import read_consistently, verify_folder

WEIGHTS_NAME = "anchor_set.safetensors"
CONFIG_NAME = "anchor_set.json"
SUPPORT_NAME = "support.jsonl"
FORMAT_VERSION = 1

_DESCRIPTION_TYPES = {
    "format_version": int,
    "num_anchors": int,
    "support_size": int,
    "strategy": str,
    "support_reference": (dict, type(None)),
    "encoders": list,
    "training": dict,
    "metrics": dict,
    "mixing": str,
    "similarity": str,
    "shrinkage": (int, float),
    "eps": (int, float),
}
_MAX_SUPPORT_LINE = 1 << 20  # one support input: a text or a reference, far below 1 MiB


def read_anchor_set_files(folder: Path, source: str) -> tuple[Tensor, dict[str, Any], list[Any]]:
    """The mixture, description and support inputs of an anchor set folder, each checked
    against the others before the tensor is read."""
    what = "anchor set"
    tensors = safetensors_shapes(folder / WEIGHTS_NAME, what=what, source=source)
    found = tensors.get("mixture")
    if set(tensors) != {"mixture"} or found[0] not in ("F16", "BF16", "F32", "F64"):
        raise ArtifactFileError(
            f"{WEIGHTS_NAME} of the anchor set at {source!r} must hold exactly one floating-point "
            f"tensor 'mixture', it holds {sorted(tensors)} ({found[0] if found else 'none'}). "
            "Save the anchor set again."
        )
    shape = found[1]
    if len(shape) != 2 or 0 in shape:
        raise ArtifactFileError(
            f"{WEIGHTS_NAME} of the anchor set at {source!r} holds a mixture of shape "
            f"{list(shape)}, not [m, K] with m, K >= 1. Save the anchor set again."
        )
    description = read_json_file(folder / CONFIG_NAME, what=what, source=source)
    problems = [] if isinstance(description, dict) else ["it is not a JSON object"]
    for key, kind in _DESCRIPTION_TYPES.items() if not problems else ():
        if key in description and (
            not isinstance(description[key], kind) or isinstance(description[key], bool)
        ):
            problems.append(f"{key} is {type(description[key]).__name__}")
    if not problems:
        version = description.get("format_version", FORMAT_VERSION)
        if version > FORMAT_VERSION:
            problems.append(
                f"format_version {version} is newer than this relrep_hf reads "
                f"({FORMAT_VERSION}): upgrade relrep_hf"
            )
        for key, size in (("num_anchors", shape[0]), ("support_size", shape[1])):
            if key in description and description[key] != size:
                problems.append(f"{key}={description[key]} but the mixture has {size}")
    if problems:
        raise ArtifactFileError(
            f"{CONFIG_NAME} of the anchor set at {source!r} is invalid: {'; '.join(problems)}. "
            "Save the anchor set again."
        )
    support = _read_support(folder / SUPPORT_NAME, shape[1], source)
    try:
        mixture = load_file(folder / WEIGHTS_NAME)["mixture"]
    except SafetensorError as error:
        raise ArtifactFileError(
            f"The anchor set at {source!r} is corrupted or truncated ({error}). "
            "Download it again (or save it again)."
        ) from error
    return mixture, description, support


def _read_support(path: Path, expected: int, source: str) -> list[Any]:
    """The support inputs of ``support.jsonl``: ``expected`` lines of JSON objects, each a text
    (``{"text": ...}``) or a reference to an input."""

    def broken(problem: str) -> ArtifactFileError:
        return ArtifactFileError(
            f"{SUPPORT_NAME} of the anchor set at {source!r} is invalid: {problem}. Download it "
            "again or save the anchor set again."
        )

    support: list[Any] = []
    with open(path, "rb") as file:
        for number, line in enumerate(iter(lambda: file.readline(_MAX_SUPPORT_LINE + 1), b"")):
            if len(line) > _MAX_SUPPORT_LINE:
                raise broken(f"line {number + 1} is longer than {_MAX_SUPPORT_LINE} bytes")
            if not line.strip():
                continue
            if len(support) == expected:
                raise broken(f"it has more than the K={expected} rows the mixture mixes")
            try:
                row = json.loads(line)
            except (ValueError, UnicodeDecodeError) as error:
                raise broken(f"line {number + 1} is not JSON ({error})") from error
            if not isinstance(row, dict) or not row:
                raise broken(f"line {number + 1} is not a JSON object")
            if set(row) == {"text"}:
                if not isinstance(row["text"], str):
                    raise broken(f"line {number + 1} has a text that is not a string")
                support.append(row["text"])
            else:
                support.append(row)
    if len(support) != expected:
        raise broken(f"it has {len(support)} rows but the mixture mixes K={expected}")
    return support


def write_anchor_set_files(
    folder: Path, mixture: Tensor, description: dict[str, Any], support: list[Any]
) -> None:
    """The three files: the mixture, ``description`` (with the format version) and one support
    input per line (texts as ``{"text": ...}``, readable with ``datasets``)."""
    save_file(
        {"mixture": mixture.detach().cpu().contiguous()},
        folder / WEIGHTS_NAME,
        metadata={"format": "pt"},
    )
    description = {"format_version": FORMAT_VERSION, **description}
    (folder / CONFIG_NAME).write_text(json.dumps(description, indent=2, sort_keys=True) + "\n")
    with open(folder / SUPPORT_NAME, "w", encoding="utf-8") as file:
        for item in support:
            row = {"text": item} if isinstance(item, str) else item
            file.write(json.dumps(row, ensure_ascii=False) + "\n")


def saved_fields(description: dict[str, Any]) -> dict[str, Any]:
    """`AnchorSet`'s fields (besides mixture and support) from a saved description; anchor sets
    saved before the similarity settings were recorded take their training's, or the paper's."""
    training = description.get("training", {})
    return {
        "support_reference": description.get("support_reference"),
        "strategy": description.get("strategy", "param"),
        "encoders": description.get("encoders", []),
        "training": training,
        "metrics": description.get("metrics", {}),
        "mixing": description.get("mixing", ""),
        **{
            key: description.get(key, training.get(key, default))
            for key, default in (
                ("similarity", "wip"),
                ("shrinkage", DEFAULT_SHRINKAGE),
                ("eps", DEFAULT_EPS),
            )
        },
    }


def what_else_it_is(folder: Path) -> str:
    """A hint naming the artifact a folder holds instead of an anchor set ("" if none)."""
    try:
        kind = artifact_kind(folder)
    except FileNotFoundError:
        return ""
    return {
        "projector": " It holds a projector: load it with RelativeProjector.from_pretrained "
        "(its config names its anchor set).",
        "head": " It holds a head: load it with RelativeHeadForClassification.from_pretrained.",
        "run": " It is a run folder: its anchor set is in anchor_set/.",
    }.get(kind, "")


def load_anchor_set_files(
    path_or_repo_id: str | os.PathLike, *, verify: bool | None = None, **download: Any
) -> tuple[Tensor, list[Any], dict[str, Any]]:
    """An anchor set's mixture, support inputs and other fields from a folder or a Hub repo:
    resolved (``download``: `resolve_folder`'s revision, token, cache and download options),
    checked against its manifest (``verify``) and read as one version of the folder, though
    other processes save to it meanwhile."""
    folder, commit = resolve_folder(path_or_repo_id, **download)
    source = str(path_or_repo_id)
    missing = [n for n in (WEIGHTS_NAME, CONFIG_NAME, SUPPORT_NAME) if not (folder / n).is_file()]
    if missing:
        raise OSError(
            f"{source!r} is not an anchor set: it lacks {', '.join(missing)}. "
            "Anchor sets are written by AnchorSet.save_pretrained or ParamTrainer."
            + what_else_it_is(folder)
        )

    def load(read: Path) -> tuple[Tensor, dict[str, Any], list[Any]]:
        verify_folder(  # ``read``: the folder, or a copy of one version of it
            read,
            required=(WEIGHTS_NAME, CONFIG_NAME, SUPPORT_NAME),
            what="anchor set",
            source=source,
            verify=verify,
            stacklevel=6,
        )
        return read_anchor_set_files(read, source)

    mixture, description, support = read_consistently(folder, load, source=source)
    fields = saved_fields(description)
    fields["repo_id"], fields["revision"] = ("", "") if commit is None else (source, commit)
    return mixture, support, fields
