"""The migration map as an artifact: one affine map from an old encoder's space to a new one's.

Like a PEFT adapter it is small and stands on its own: one safetensors file (``weight
[d_old, d_new]``, ``bias [d_new]``; what the map is and how it was chosen in the file's
metadata) and a model card, loadable with `MigrationMap.from_pretrained` from a folder or a Hub
repo and pushed with `MigrationMap.push_to_hub`. A vector-database pipeline applies it without
the run folder it came from: ``new = migration_map(old)`` (torch) or ``migration_map.apply(old)``
(NumPy, in the vectors' dtype).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from relrep_hf.functional.least_squares import AffineMap
from relrep_hf.models.artifact_types import MIGRATION_MAP_FILE, MIGRATION_MAP_TYPE
from relrep_hf.utils.artifacts import ArtifactMixin
from relrep_hf.utils.file_checks import ArtifactFileError, safetensors_shapes

__all__ = ["MIGRATION_MAP_FILE", "MigrationMap", "MigrationOverflowError"]

FORMAT = "relrep_hf.migration_map"
FORMAT_VERSION = "1"


class MigrationOverflowError(ValueError):
    """The migrated vectors are not finite in the dtype asked for (float16's range exceeded)."""


class MigrationMap(ArtifactMixin, AffineMap):
    """``x [..., d_old] -> x @ weight + bias [..., d_new]``: old-encoder vectors in the new
    encoder's space, with what the map is (``info``: source, target, rows, the chosen candidate,
    every candidate's cross-validated Recall@1, and any evaluation against re-embedding).

    Example:
        >>> new = MigrationMap.from_pretrained("me/minilm-to-e5")(old)  # doctest: +SKIP
    """

    artifact_kind = "migration_map"
    artifact_name = "migration map"
    artifact_type = MIGRATION_MAP_TYPE  # what a saved map holds (models/artifact_types.py)

    def __init__(self, weight: Tensor, bias: Tensor, info: dict[str, Any] | None = None):
        if weight.ndim != 2 or bias.shape != (weight.shape[1],):
            raise ValueError(
                f"A migration map needs weight [d_old, d_new] and bias [d_new], got "
                f"{tuple(weight.shape)} and {tuple(bias.shape)}."
            )
        if not (torch.isfinite(weight).all() and torch.isfinite(bias).all()):
            raise ValueError("The migration map's weight or bias holds NaN or infinite values.")
        super().__init__(weight.contiguous(), bias.contiguous())
        self.info: dict[str, Any] = dict(info or {})

    def forward(self, x: Tensor) -> Tensor:
        """``x [..., d_old] -> [..., d_new]`` in the map's dtype."""
        if x.shape[-1] != self.in_features:
            raise ValueError(
                f"The map takes {self.in_features}-d vectors of {self.info.get('source', 'the old encoder')}, "
                f"got {x.shape[-1]}-d."
            )
        rows = x.reshape(-1, self.in_features).to(self.weight.dtype)  # (N, d_old)
        return torch.addmm(self.bias, rows, self.weight).reshape(*x.shape[:-1], -1)

    def numpy_parameters(
        self, dtype: np.dtype | type = np.float32
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(weight [d_old, d_new], bias [d_new])`` as C-contiguous NumPy arrays of ``dtype``
        (read through float64: NumPy has no bfloat16, so a bfloat16 map converts too)."""
        weight = self.weight.detach().to("cpu", torch.float64).numpy()
        bias = self.bias.detach().to("cpu", torch.float64).numpy()
        return np.ascontiguousarray(weight, dtype=dtype), np.ascontiguousarray(bias, dtype=dtype)

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """NumPy ``[N, d_old] -> [N, d_new]``, returned in the vectors' dtype (computed in at
        least float32: a float16 product would round each term).

        Raises:
            MigrationOverflowError: rows of the input are not finite, or their migrated values
                do not fit the vectors' dtype (float16 above 65504): the rows are named.
        """
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[1] != self.in_features:
            raise ValueError(
                f"The map takes [N, {self.in_features}] vectors, got shape {vectors.shape}."
            )
        dtype = vectors.dtype if vectors.dtype.kind == "f" else np.dtype(np.float32)
        compute = np.promote_types(dtype, np.float32)
        _check_finite_rows(vectors, "hold NaN or infinite values", "fix or drop those rows")
        weight, bias = self.numpy_parameters(compute)
        out = vectors.astype(compute, copy=False) @ weight
        out += bias
        with np.errstate(over="ignore"):  # an overflow is reported below, with its rows
            out = out.astype(dtype, copy=False)
        _check_finite_rows(
            out,
            f"are not finite once migrated to {dtype.name} (the map's outputs exceed its range)",
            "migrate float32 vectors instead (vectors.astype(np.float32))",
        )
        return out

    # -------------------------------------------------------------------------- files

    def _save_files(self, folder: Path, **_: Any) -> None:
        """``migration_map.safetensors``: weight and bias, with ``info`` in its metadata (the
        card, from `relrep_hf.publishing.cards`, and the manifest come from the base)."""
        from safetensors.torch import save_file

        tensors = {"weight": self.weight.detach().cpu(), "bias": self.bias.detach().cpu()}
        metadata = {"format": FORMAT, "version": FORMAT_VERSION, "info": json.dumps(self.info)}
        save_file(tensors, str(folder / MIGRATION_MAP_FILE), metadata=metadata)

    @classmethod
    def from_pretrained(cls, path_or_repo_id: str | os.PathLike, **kwargs: Any) -> MigrationMap:
        """Load a map from a folder that `save_pretrained` wrote or a Hub repo id, as every
        artifact loads (`relrep_hf.utils.artifacts.ArtifactMixin.from_pretrained`: ``revision``,
        ``token``, ``cache_dir``, ``local_files_only``, ``force_download``, ``verify``; the
        manifest checked, maps saved before manifests with a warning), or a bare
        ``migration_map.safetensors`` file (no manifest to check)."""
        path = Path(path_or_repo_id)
        if path.is_file() and path.name.endswith(".safetensors"):
            return cls._load_file(path, source=str(path))
        return super().from_pretrained(path_or_repo_id, **kwargs)

    @classmethod
    def _load_files(cls, folder: Path, *, source: str, commit: str | None) -> MigrationMap:
        return cls._load_file(folder / MIGRATION_MAP_FILE, source=f"{source}/{MIGRATION_MAP_FILE}")

    @classmethod
    def _load_file(cls, path: Path, *, source: str) -> MigrationMap:
        from safetensors import safe_open

        shapes = safetensors_shapes(path, what="migration map", source=source)
        if set(shapes) != {"weight", "bias"}:
            raise ArtifactFileError(
                f"{source!r} holds tensors {sorted(shapes)}, not a migration map's weight and "
                "bias: save it again with MigrationMap.save_pretrained."
            )
        with safe_open(str(path), framework="pt") as file:
            metadata = file.metadata() or {}
            if metadata.get("format") != FORMAT:
                raise ArtifactFileError(
                    f"{source!r} is not a relrep_hf migration map (its metadata says format "
                    f"{metadata.get('format')!r}): save it again with MigrationMap.save_pretrained."
                )
            weight, bias = file.get_tensor("weight"), file.get_tensor("bias")
        try:
            info = json.loads(metadata.get("info", "{}"))
            return cls(weight, bias, info)
        except ValueError as error:
            raise ArtifactFileError(f"{source!r}: a broken migration map: {error}") from None

    def extra_repr(self) -> str:
        chosen = self.info.get("chosen")
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, chosen={chosen!r}"
        )


def _check_finite_rows(rows: np.ndarray, problem: str, fix: str) -> None:
    """Raise `MigrationOverflowError` naming the rows of ``rows`` that hold a non-finite value."""
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    if bad.size:
        shown = ", ".join(str(i) for i in bad[:10]) + (" ..." if bad.size > 10 else "")
        raise MigrationOverflowError(
            f"{bad.size} of {len(rows)} rows {problem}: rows {shown}. Nothing was returned: {fix}."
        )
