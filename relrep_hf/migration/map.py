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
from relrep_hf.utils.file_checks import ArtifactFileError, safetensors_shapes
from relrep_hf.utils.io import atomic_directory
from relrep_hf.utils.publishing_hooks import publisher

__all__ = ["MIGRATION_MAP_FILE", "MigrationMap"]

MIGRATION_MAP_FILE = "migration_map.safetensors"
CARD_FILE = "README.md"
FORMAT = "relrep_hf.migration_map"
FORMAT_VERSION = "1"


class MigrationMap(AffineMap):
    """``x [..., d_old] -> x @ weight + bias [..., d_new]``: old-encoder vectors in the new
    encoder's space, with what the map is (``info``: source, target, rows, the chosen candidate,
    every candidate's cross-validated Recall@1, and any evaluation against re-embedding).

    Example:
        >>> new = MigrationMap.from_pretrained("me/minilm-to-e5")(old)  # doctest: +SKIP
    """

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
        """``(weight [d_old, d_new], bias [d_new])`` as C-contiguous NumPy arrays of ``dtype``."""
        weight = np.ascontiguousarray(self.weight.detach().cpu().numpy(), dtype=dtype)
        return weight, np.ascontiguousarray(self.bias.detach().cpu().numpy(), dtype=dtype)

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """NumPy ``[N, d_old] -> [N, d_new]``, computed and returned in the vectors' dtype."""
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[1] != self.in_features:
            raise ValueError(
                f"The map takes [N, {self.in_features}] vectors, got shape {vectors.shape}."
            )
        dtype = vectors.dtype if vectors.dtype.kind == "f" else np.dtype(np.float32)
        weight, bias = self.numpy_parameters(dtype)
        out = vectors.astype(dtype, copy=False) @ weight
        out += bias
        return out

    # -------------------------------------------------------------------------- files

    def save_pretrained(self, save_directory: str | os.PathLike) -> None:
        """Write ``migration_map.safetensors`` (with ``info`` in its metadata) and the model card
        ``README.md`` into ``save_directory``, atomically (a killed save leaves the old folder)."""
        from safetensors.torch import save_file

        with atomic_directory(save_directory) as staging:
            tensors = {"weight": self.weight.detach().cpu(), "bias": self.bias.detach().cpu()}
            metadata = {"format": FORMAT, "version": FORMAT_VERSION, "info": json.dumps(self.info)}
            save_file(tensors, str(staging / MIGRATION_MAP_FILE), metadata=metadata)
            (staging / CARD_FILE).write_text(migration_card(self))

    @classmethod
    def from_pretrained(
        cls, path_or_repo: str | os.PathLike, *, revision: str | None = None, **hub_kwargs: Any
    ) -> MigrationMap:
        """Load a map from a folder that `save_pretrained` wrote, or from a Hub repo id (the
        file is downloaded with ``huggingface_hub.hf_hub_download``; ``hub_kwargs`` go to it)."""
        folder = Path(path_or_repo)
        if folder.is_dir():
            path = folder / MIGRATION_MAP_FILE
        elif folder.is_file() and folder.name.endswith(".safetensors"):
            path = folder
        else:
            from huggingface_hub import hf_hub_download

            path = Path(
                hf_hub_download(
                    str(path_or_repo), MIGRATION_MAP_FILE, revision=revision, **hub_kwargs
                )
            )
        return cls._load_file(path)

    @classmethod
    def _load_file(cls, path: Path) -> MigrationMap:
        from safetensors import safe_open

        if not path.is_file():
            raise ArtifactFileError(
                f"{str(path)!r}: no migration map here (expected {MIGRATION_MAP_FILE}, written by "
                "MigrationMap.save_pretrained or relrep_hf.fit_migration)."
            )
        shapes = safetensors_shapes(path, what="migration map", source=str(path))
        if set(shapes) != {"weight", "bias"}:
            raise ArtifactFileError(
                f"{str(path)!r} holds tensors {sorted(shapes)}, not a migration map's weight and "
                "bias: save it again with MigrationMap.save_pretrained."
            )
        with safe_open(str(path), framework="pt") as file:
            metadata = file.metadata() or {}
            if metadata.get("format") != FORMAT:
                raise ArtifactFileError(
                    f"{str(path)!r} is not a relrep_hf migration map (its metadata says format "
                    f"{metadata.get('format')!r}): save it again with MigrationMap.save_pretrained."
                )
            weight, bias = file.get_tensor("weight"), file.get_tensor("bias")
        try:
            info = json.loads(metadata.get("info", "{}"))
            return cls(weight, bias, info)
        except ValueError as error:
            raise ArtifactFileError(f"{str(path)!r}: a broken migration map: {error}") from None

    def push_to_hub(self, repo_id: str, **kwargs: Any) -> str:
        """Push the saved map (file and card) to the Hub as one commit; returns the commit sha.
        ``kwargs``: ``private``, ``token``, ``revision``, ``commit_message``, ``create_pr``."""
        return publisher().push_folder(self.save_pretrained, repo_id, **kwargs)

    def extra_repr(self) -> str:
        chosen = self.info.get("chosen")
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, chosen={chosen!r}"
        )


def migration_card(migration_map: MigrationMap) -> str:
    """The model card: what the map moves, from which rows, and every candidate's recall."""
    from huggingface_hub import ModelCard

    info = migration_map.info
    source, target = (
        info.get("source") or "the old encoder",
        info.get("target") or "the new encoder",
    )
    lines = [
        "---",
        "library_name: relrep_hf",
        "tags:\n- relrep_hf\n- embedding-migration",
        "---",
        f"# Migration map: {source} -> {target}",
        "",
        f"One affine map from {source}'s {migration_map.in_features}-d space into {target}'s "
        f"{migration_map.out_features}-d space, so vectors stored with the old encoder join a "
        "corpus of the new one without re-embedding. Fitted with `relrep_hf.fit_migration` on "
        f"{info.get('rows', '?')} paired rows; the candidate chosen by {info.get('folds', '?')}-fold "
        f"cross-validated Recall@1: **{info.get('chosen', '?')}**.",
        "",
        "| candidate | cross-validated Recall@1 |",
        "| --- | --- |",
    ]
    for name, recall in info.get("cv_recall", {}).items():
        mark = " (chosen)" if name == info.get("chosen") else ""
        lines.append(f"| {name}{mark} | {recall:.4f} |")
    evaluation = info.get("evaluation")
    if evaluation:
        lines += [
            "",
            "Measured on held-out rows (Recall@1; the re-embedded corpus is the reference):",
            "",
        ]
        lines += ["| corpus | Recall@1 |", "| --- | --- |"]
        lines += [f"| {name} | {value:.4f} |" for name, value in evaluation.items()]
    lines += [
        "",
        "```python",
        "from relrep_hf.migration.map import MigrationMap",
        "",
        'migration_map = MigrationMap.from_pretrained("REPO_OR_FOLDER")',
        "new_vectors = migration_map.apply(old_vectors)  # NumPy [N, d_old] -> [N, d_new]",
        "```",
        "",
        "Or stream a whole store: `relrep-hf migrate MAP --vectors OLD_STORE --out NEW_STORE`.",
        "",
    ]
    return str(ModelCard("\n".join(lines)))
