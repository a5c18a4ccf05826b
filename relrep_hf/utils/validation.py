"""Checks on user-supplied tensors, with errors that say what is wrong and what to do."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

EmbeddingsLike = Tensor | np.ndarray | list  # what every function taking embeddings accepts


def as_embeddings(embeddings: Any, *, name: str = "embeddings") -> Tensor:
    """``embeddings`` as a tensor: tensors as they are, NumPy arrays shared without a copy (their
    dtype kept), lists of floats (or of rows, or of 1-d arrays/tensors) as float64.

    sentence-transformers' ``encode`` returns NumPy by default, so every function that takes
    embeddings goes through here; anything else gets a `TypeError` that says what is accepted.
    """
    if isinstance(embeddings, Tensor):
        return embeddings
    if isinstance(embeddings, np.ndarray):
        if not np.issubdtype(embeddings.dtype, np.floating):
            raise TypeError(
                f"{name} must hold floats, got a NumPy array of dtype {embeddings.dtype}. "
                "Convert it with array.astype(numpy.float32)."
            )
        return torch.from_numpy(np.ascontiguousarray(embeddings))
    if isinstance(embeddings, (list, tuple)):
        if embeddings and all(isinstance(row, Tensor) for row in embeddings):
            return torch.stack(list(embeddings))
        try:
            array = np.asarray(embeddings, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{name}: the list is not a rectangular table of floats (rows of different "
                "lengths, or items that are not numbers). Pass rows of one length, or a tensor / "
                "NumPy array [N, d]."
            ) from error
        return torch.from_numpy(array)
    raise TypeError(
        f"{name} must be a torch.Tensor, a NumPy array or a list of floats, got "
        f"{type(embeddings).__name__}."
    )


def check_embeddings(
    embeddings: Tensor,
    *,
    dim: int | None = None,
    name: str = "embeddings",
    min_rows: int = 0,
    dim_hint: str = "",
) -> None:
    """Raise ``ValueError`` unless ``embeddings`` is a finite float tensor ``[..., dim]``."""
    if not isinstance(embeddings, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(embeddings).__name__}.")
    if not embeddings.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {embeddings.dtype}.")
    if embeddings.ndim < 1:
        raise ValueError(f"{name} must have shape [..., d], got a 0-d tensor.")
    if embeddings.shape[-1] == 0:
        raise ValueError(
            f"{name} has shape {tuple(embeddings.shape)}: rows of 0 values. Pass embeddings "
            "[N, d] with d >= 1 (one row per input)."
        )
    if dim is not None and embeddings.shape[-1] != dim:
        raise ValueError(
            f"{name}: last dimension is {embeddings.shape[-1]}, expected {dim}{dim_hint}."
        )
    rows = embeddings.reshape(-1, embeddings.shape[-1]) if embeddings.ndim > 1 else embeddings[None]
    if rows.shape[0] < min_rows:
        raise ValueError(f"{name}: {rows.shape[0]} rows, at least {min_rows} are needed.")
    check_finite(rows, name=name)


def check_finite(rows: Tensor, *, name: str = "embeddings") -> None:
    """Raise ``ValueError`` naming the rows of ``rows [n, d]`` that hold NaN or Inf."""
    finite_rows = torch.isfinite(rows).all(dim=-1)
    if not bool(finite_rows.all()):
        bad = (~finite_rows).nonzero().flatten()
        shown = ", ".join(str(i) for i in bad[:5].tolist())
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise ValueError(
            f"{name}: NaN or Inf in {len(bad)} row(s) (row {shown}{more}). "
            "Drop or repair those rows before computing statistics or projecting; "
            "in half precision, check the encoder for overflow."
        )


# Calls a `DeferredFiniteCheck` records before it reads them (one wait per this many calls).
DEFERRED_CHECK_CAPACITY = 1024


class DeferredFiniteCheck:
    """NaN / Inf in a device's outputs, recorded without making the host wait, read later.

    Reading a value off a GPU (``.item()``, ``bool()``) waits for every kernel queued before
    it: with a check per call an 8-row projection took 2.9-3.5x its one ``addmm`` on an H200
    (issue #48).
    `record` queues one reduction instead (the largest absolute value, NaN kept) into the next
    slot of a buffer on the values' device; `check` reads the slots with one copy and raises
    naming the calls that held NaN or Inf. A full buffer is checked before it is reused, so an
    error comes at most `DEFERRED_CHECK_CAPACITY` calls late. A device-side assert
    (``torch._assert_async``) would stop the GPU at once, but it leaves the CUDA context unusable
    until the process restarts: a Python error a little later is the better trade.
    """

    def __init__(self, what: str, capacity: int = DEFERRED_CHECK_CAPACITY) -> None:
        self.what, self.capacity = what, capacity
        self._slots: Tensor | None = None
        self._count = 0

    @property
    def pending(self) -> int:
        """Calls recorded since the last `check`."""
        return self._count

    def record(self, values: Tensor) -> None:
        """Queue the check of ``values`` on their device (no host sync; no allocation but the
        buffer's, on the first call or when the device or dtype changes)."""
        if values.numel() == 0:
            return
        slots = self._slots
        if slots is None or slots.device != values.device or slots.dtype != values.dtype:
            self.check()  # what another device or dtype left, before the buffer is replaced
            with torch.inference_mode(False):  # usable inside and outside inference mode
                slots = torch.zeros(self.capacity, dtype=values.dtype, device=values.device)
            self._slots = slots
        elif self._count == self.capacity:
            self.check()
        torch.linalg.vector_norm(values.detach(), ord=float("inf"), out=slots[self._count])
        self._count += 1

    def check(self) -> None:
        """Read what was recorded (one wait for the device) and raise if any call gave NaN or
        Inf; the record is emptied either way."""
        count, self._count = self._count, 0
        if not count or self._slots is None:
            return
        bad = (~torch.isfinite(self._slots[:count])).nonzero().flatten().tolist()
        if bad:
            shown = ", ".join(str(i + 1) for i in bad[:5]) + (", ..." if len(bad) > 5 else "")
            raise ValueError(
                f"{self.what}: NaN or Inf in the output of {len(bad)} of the {count} calls since "
                f"the last check on {self._slots.device} (call {shown}): the embeddings held NaN "
                "or Inf, or overflowed the dtype. On an accelerator the output is checked "
                "without waiting for the device, so this error comes at the next point that "
                "waits (encode, check_finite()). To stop at the call and name the rows, set "
                "finite_check='immediate'."
            )

    def discard(self) -> None:
        """Forget what was recorded (after an error that ended the work it belonged to)."""
        self._count = 0


def check_row_indices(rows: Any, n: int, *, name: str = "rows", of: str = "rows") -> Tensor:
    """``rows`` as a 1-d long tensor of valid row numbers of a table of ``n`` rows.

    Refuses (with ``ValueError`` / ``TypeError``) what indexing would silently accept or fail
    on deep inside: negative numbers (which wrap to the end), floats (which truncate), numbers
    ``>= n``, booleans, and an empty list.
    """
    if isinstance(rows, range):
        rows = list(rows)
    if isinstance(rows, np.ndarray):
        rows = torch.from_numpy(np.ascontiguousarray(rows))
    if isinstance(rows, Tensor):
        indices = rows.flatten()
        if indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
            raise TypeError(
                f"{name} must hold integer row numbers, got a tensor of dtype {indices.dtype}. "
                "Pass integers 0..N-1 (e.g. torch.arange(N) or a list of ints)."
            )
        if rows.ndim != 1:
            raise ValueError(
                f"{name} must be a 1-d list of row numbers, got shape {tuple(rows.shape)}."
            )
        indices = indices.long()
    else:
        try:
            values = list(rows)
        except TypeError:
            raise TypeError(
                f"{name} must be a sequence of integer row numbers, got {type(rows).__name__}."
            ) from None
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, np.integer))]
        if bad:
            raise TypeError(
                f"{name} must hold integer row numbers, got {bad[0]!r} "
                f"({type(bad[0]).__name__}). Pass integers 0..N-1; floats are not rounded."
            )
        indices = torch.tensor([int(v) for v in values], dtype=torch.long)
    if indices.numel() == 0:
        raise ValueError(f"{name} is empty: give at least one row number (0..{n - 1}).")
    low, high = int(indices.min()), int(indices.max())
    if low < 0 or high >= n:
        wrong = low if low < 0 else high
        raise ValueError(
            f"{name} holds row {wrong}, outside the {n} {of} (valid: 0..{n - 1}). Negative "
            "numbers are not counted from the end: give each row's position from the start."
        )
    return indices


def check_same_rows(spaces: dict[str, Tensor], *, what: str = "embeddings") -> int:
    """The common number of rows of every encoder's ``[N, d_i]`` embeddings; ``ValueError``
    when they differ (the rows must be the same inputs, in the same order, in every encoder)."""
    for name, space in spaces.items():
        if space.ndim != 2:
            raise ValueError(
                f"{name!r} {what} must be a table [N, d], got shape {tuple(space.shape)}."
            )
    counts = {name: int(space.shape[0]) for name, space in spaces.items()}
    if len(set(counts.values())) > 1:
        raise ValueError(
            f"The encoders' {what} must be row-aligned (row i is the same input in every "
            f"encoder), but their numbers of rows differ: {counts}. Embed the same inputs, in "
            "the same order, with every encoder."
        )
    return next(iter(counts.values()), 0)


def check_paired_rows(first: Tensor, second: Tensor, *, names: tuple[str, str], need: str) -> None:
    """Two tables of the same inputs (row i of each is one input), at least 2 rows each;
    ``ValueError`` saying ``"Need {need}, got <shapes>."`` when their rows differ."""
    check_embeddings(first, name=names[0], min_rows=2)
    check_embeddings(second, name=names[1], min_rows=2)
    if first.ndim != 2 or second.ndim != 2 or first.shape[0] != second.shape[0]:
        raise ValueError(f"Need {need}, got {tuple(first.shape)} and {tuple(second.shape)}.")


class DeviceMismatchError(ValueError):
    """Tensors that one computation combines live on different devices."""


def check_same_device(**tensors: Tensor | None) -> torch.device | None:
    """The one device of ``tensors`` (``None`` values skipped; ``None`` when none is given).

    Every entry point computes where its inputs are, so they must all be on one device:
    otherwise a `DeviceMismatchError` names each input's device and how to fix it, instead of
    torch's "Expected all tensors to be on the same device" from deep inside the math. Called
    before any value is read (so a tensor on another device is never touched). Names are
    keyword names with ``_`` read as a space (``support_embeddings=x``).
    """
    devices = {name: t.device for name, t in tensors.items() if isinstance(t, Tensor)}
    if len(set(devices.values())) <= 1:
        return next(iter(devices.values()), None)
    listed = ", ".join(f"{name.replace('_', ' ')} on {device}" for name, device in devices.items())
    first, second = list(dict.fromkeys(devices.values()))[:2]
    raise DeviceMismatchError(
        f"Tensors on different devices: {listed}. Every input of one call must be on one "
        f"device (computations run where the inputs are): move them with .to({str(first)!r}) "
        f"or .to({str(second)!r}) first."
    )


def check_distinct_names(mapping: Any, *, what: str = "encoders") -> None:
    """Refuse ``{encoder: tensor}`` keys that are the same once written as text (``1`` and
    ``"1"``): names are stored and compared as strings, so one encoder would silently replace
    the other."""
    seen: dict[str, Any] = {}
    for key in mapping:
        if str(key) in seen:
            raise ValueError(
                f"The {what} {seen[str(key)]!r} and {key!r} have the same name once written as "
                f"text ({str(key)!r}): one would silently replace the other. Give every encoder "
                "a distinct name (e.g. all str)."
            )
        seen[str(key)] = key
