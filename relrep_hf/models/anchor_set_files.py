"""The files of a saved anchor set, read and checked against each other before any tensor is
loaded: what `AnchorSet.from_pretrained` builds from (a folder written by someone else is
untrusted input)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from relrep_hf.utils.file_checks import ArtifactFileError, read_json_file, safetensors_shapes

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
