"""Checks on artifact files written by someone else, before anything is built from them.

Loading never executes code (JSON and safetensors only, never pickle) and never allocates
from a size it has not checked: the safetensors header is parsed here first (its length
against the file's, each tensor's dtype, shape and byte range), every size in config.json is
bounded by the number of elements the weights file really holds (``num_labels = 10**9`` would
otherwise build a billion-entry ``id2label``), and the tensors a model expects are compared
with those in the file before transformers reads it. Each error names the file and says what
to do.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

HEADER_LIMIT = 100 * 1024 * 1024  # the safetensors format's own limit
JSON_LIMIT = 16 * 1024 * 1024  # configs and anchor set descriptions are a few kB
# bytes per element of the dtypes safetensors stores
DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})
DTYPE_NAMES = frozenset({"float16", "bfloat16", "float32", "float64", "auto"})


class ArtifactFileError(OSError, ValueError):
    """A file of an artifact is malformed; the message names it. An `OSError` (the file is
    bad) and a `ValueError` (its content is), as transformers raises either."""


def read_json_file(path: Path, *, what: str, source: str, limit: int = JSON_LIMIT) -> Any:
    """Parse a JSON file of an artifact, refusing one larger than ``limit`` bytes."""
    size = path.stat().st_size
    if size > limit:
        raise ArtifactFileError(
            f"{path.name} of the {what} at {source!r} has {size} bytes, more than the {limit} a "
            "relrep_hf file can have: it is not a relrep_hf artifact. Save it again."
        )
    try:
        return json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as error:
        raise ArtifactFileError(
            f"{path.name} of the {what} at {source!r} is not valid JSON ({error}): it is "
            "corrupted or truncated. Download it again (force_download=True) or save it again."
        ) from error


def safetensors_shapes(path: Path, *, what: str, source: str) -> dict[str, tuple[str, tuple]]:
    """``{name: (dtype, shape)}`` of a safetensors file, from its header, fully checked.

    The header length, every dtype, shape and byte range are checked against the file's size
    (no tensor data is read).
    """

    def broken(problem: str) -> ArtifactFileError:
        return ArtifactFileError(
            f"{path.name} of the {what} at {source!r} is not a valid safetensors file: "
            f"{problem}. It is corrupted or truncated: download it again "
            "(force_download=True) or save it again."
        )

    size = path.stat().st_size
    with open(path, "rb") as file:
        prefix = file.read(8)
        if len(prefix) < 8:
            raise broken(f"it has {size} bytes, fewer than the 8 of a header length")
        length = int.from_bytes(prefix, "little")
        if length > size - 8 or length > HEADER_LIMIT:
            raise broken(f"its header claims {length} bytes but the file has {size}")
        raw = file.read(length)
    try:
        header = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise broken(f"its header is not JSON ({error})") from error
    if not isinstance(header, dict):
        raise broken("its header is not a JSON object")
    data_size = size - 8 - length
    tensors: dict[str, tuple[str, tuple]] = {}
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise broken("its __metadata__ is not a map of strings")
            continue
        if not isinstance(entry, dict):
            raise broken(f"the entry of tensor {name!r} is not a JSON object")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in DTYPE_SIZES:
            raise broken(f"tensor {name!r} has the unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
            raise broken(f"tensor {name!r} has the invalid shape {shape!r}")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(type(n) is int for n in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_size
        ):
            raise broken(f"tensor {name!r} has byte range {offsets!r} outside the file's data")
        if (offsets[1] - offsets[0]) != math.prod(shape) * DTYPE_SIZES[dtype]:
            raise broken(
                f"tensor {name!r} of shape {shape} and dtype {dtype} spans "
                f"{offsets[1] - offsets[0]} bytes"
            )
        spans.append(tuple(offsets))
        tensors[name] = (dtype, tuple(shape))
    spans.sort()
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)):
        raise broken("its tensors overlap")
    return tensors


def check_sizes(
    config: dict[str, Any], *, limit: int, keys: tuple[str, ...], file: str, what: str, source: str
) -> None:
    """Every size ``keys`` of ``config`` lies in ``[1, limit]``: an int, or for ``hidden_sizes``
    a list of ints; and ``dtype`` / ``torch_dtype``, when given, name a floating-point dtype."""
    for key in keys:
        if key not in config:
            continue
        value = config[key]
        if key == "hidden_sizes":
            valid = isinstance(value, list) and len(value) <= limit
            values = value if valid else []
        else:
            valid, values = True, [value]
        if not valid or not all(type(v) is int and 1 <= v <= limit for v in values):
            raise ArtifactFileError(
                f"{file} of the {what} at {source!r} declares {key}={_short(value)}, but the "
                f"weights file holds only {limit} numbers: sizes must be positive integers no "
                "larger than that. The config is corrupted or from another artifact; save it again."
            )
    for key in ("dtype", "torch_dtype"):
        value = config.get(key)
        if value is not None and (not isinstance(value, str) or value not in DTYPE_NAMES):
            raise ArtifactFileError(
                f"{file} of the {what} at {source!r} declares {key}={_short(config[key])}, not "
                f"one of {sorted(DTYPE_NAMES)}. The config is corrupted; save it again."
            )


def compare_tensors(
    found: dict[str, tuple[str, tuple]],
    expected: dict[str, tuple],
    *,
    file: str,
    what: str,
    source: str,
    declared: str,
) -> None:
    """The tensors in the file are exactly those the model expects, in float dtypes and with the
    shapes its config declares."""
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing or extra:
        parts = [
            f"lacks the tensors {missing}" if missing else "",
            f"has the unexpected tensors {extra}" if extra else "",
        ]
        raise ArtifactFileError(
            f"{file} of the {what} at {source!r} {' and '.join(p for p in parts if p)}: it was "
            "not written by this artifact's save_pretrained, or it is from another artifact. "
            "Save it again."
        )
    for name, shape in sorted(expected.items()):
        dtype, found_shape = found[name]
        if dtype not in FLOAT_DTYPES:
            raise ArtifactFileError(
                f"{file} of the {what} at {source!r} stores {name!r} as {dtype}, not as a "
                "floating-point tensor (F16, BF16, F32, F64). Save it again."
            )
        if tuple(found_shape) != tuple(shape):
            raise ArtifactFileError(
                f"The tensors of the {what} at {source!r} do not have the sizes its config.json "
                f"declares ({declared}): {file} holds {name!r} of shape {list(found_shape)}, the "
                f"config implies {list(shape)}. The config and the weights come from different "
                "saves: save it again."
            )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
