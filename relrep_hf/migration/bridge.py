"""The bridge: new-model queries mapped into an old index's space, so the index stays untouched.

A migration (`relrep_hf.migration.migrate`) rewrites the stored vectors into the new encoder's
space. The bridge is the opposite direction: the stored vectors stay as they are and every new
query crosses a `MigrationMap` fitted from the new encoder to the old one
(``fit_bridge(new_rows, old_rows)``), appended to the new model as a sentence-transformers
module::

    model = append_bridge(SentenceTransformer("new-model"), bridge_map)
    model.encode(["a query"])  # [1, d_old]: searches the old index as it is

It is stored the way sentence-transformers stores its own ``Dense``: in its folder of the saved
model (``N_Bridge/``), with a small JSON config (``bridge.json``: which feature it reads and
writes) beside the map's own ``migration_map.safetensors`` and card (written by
`MigrationMap.save_pretrained`, so the folder is also a migration map repo) and a
``manifest.json`` of sha256 digests over all of them, checked on load. ``modules.json`` names
the class by the import path ``relrep_hf.migration.bridge.Bridge``, which is kept stable for
saved models. ``model.save(path)``, ``model.push_to_hub(repo)`` and ``SentenceTransformer(path,
trust_remote_code=True)`` round-trip (sentence-transformers 6 imports a module class outside its
own namespace only with ``trust_remote_code=True``; relrep_hf must be installed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer
from torch import Tensor

from relrep_hf.migration.fit import fit_migration
from relrep_hf.migration.map import MIGRATION_MAP_FILE, MigrationMap
from relrep_hf.models.sentence_transformers_module import ArtifactModule
from relrep_hf.utils.io import atomic_directory
from relrep_hf.utils.manifest import verify_folder, write_manifest

__all__ = [
    "BRIDGE_CONFIG_FILE",
    "Bridge",
    "BridgeError",
    "append_bridge",
    "check_bridge_map",
    "check_bridge_out",
    "fit_bridge",
    "save_bridged_model",
]

BRIDGE_CONFIG_FILE = "bridge.json"


class BridgeError(ValueError):
    """A bridge that does not fit the model it is appended to, or that produced no finite
    vectors."""


def fit_bridge(new_rows: Any, old_rows: Any, **kwargs: Any) -> MigrationMap:
    """The bridge's map: `fit_migration` from the new encoder's rows to the old encoder's.

    The candidates are scored as the bridge is used (``direction="queries"``: mapped new-model
    rows search the old rows); ``kwargs`` go to `fit_migration` (``source_name`` is the new
    encoder, ``target_name`` the old one).

    Example:
        >>> bridge_map = fit_bridge(new_model.encode(texts), old_rows)  # doctest: +SKIP
    """
    kwargs.setdefault("direction", "queries")
    return fit_migration(new_rows, old_rows, **kwargs)


class Bridge(ArtifactModule):
    r"""The new model's embedding mapped into the old encoder's space, inside a
    `SentenceTransformer`.

    Args:
        migration_map (`MigrationMap`): from the new model's ``encode`` output (every module
            before this one, a ``Normalize`` included) to the old index's vectors.
        module_input_name (`str`, defaults to ``"sentence_embedding"``): the feature it reads.
        module_output_name (`str`, *optional*): the feature it writes (default: the input's, so
            ``encode`` returns old-space vectors; give another name to keep both).

    The map is applied in the embeddings' dtype (a float64 map on a float32 model computes in
    float32) on their device (the map's tensors are buffers: ``model.to("cuda")`` moves them).

    Example:
        >>> model = SentenceTransformer(modules=[*new_model, Bridge(bridge_map)])  # doctest: +SKIP
        >>> model.encode(["A query."]).shape  # doctest: +SKIP
        (1, 384)
    """

    config_file_name = BRIDGE_CONFIG_FILE

    def __init__(
        self,
        migration_map: MigrationMap,
        module_input_name: str = "sentence_embedding",
        module_output_name: str | None = None,
    ):
        super().__init__(module_input_name, module_output_name)
        if not isinstance(migration_map, MigrationMap):
            raise BridgeError(
                f"A Bridge holds a MigrationMap, got {type(migration_map).__name__}. Fit one with "
                "fit_bridge(new_rows, old_rows) or load one with MigrationMap.from_pretrained."
            )
        self.migration_map = migration_map.eval()

    def map_embeddings(self, embeddings: Tensor) -> Tensor:
        """``[B, d_old]`` from ``[B, d_new]`` embeddings."""
        return bridge_embeddings(self.migration_map, embeddings)

    def get_embedding_dimension(self) -> int:
        """The old encoder's dimension: the size of what ``encode`` returns."""
        return self.migration_map.out_features

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs) -> None:
        """The map (its safetensors file and card), this module's config, and a manifest of
        sha256 digests over the folder."""
        if not safe_serialization:
            raise BridgeError("A Bridge saves safetensors only: use safe_serialization=True.")
        self.migration_map.save_pretrained(output_path)  # atomic: replaces the folder's files
        self.save_config(output_path)
        write_manifest(output_path)

    @classmethod
    def load_module(
        cls, model_name_or_path: str, subfolder: str, hub_kwargs: dict[str, Any]
    ) -> Bridge:
        """The module's folder, after checking its files against the manifest."""
        folder = cls.load_dir_path(model_name_or_path, subfolder=subfolder, **hub_kwargs)
        source = f"{model_name_or_path}/{subfolder}" if subfolder else str(model_name_or_path)
        verify_folder(
            folder, required=(BRIDGE_CONFIG_FILE, MIGRATION_MAP_FILE), what="bridge", source=source
        )
        return cls(MigrationMap.from_pretrained(folder), **_read_config(Path(folder), source))


def bridge_embeddings(migration_map: MigrationMap, embeddings: Tensor) -> Tensor:
    """``embeddings [..., d_new] -> [..., d_old]`` in the embeddings' dtype; a `BridgeError` for
    embeddings of another size or for non-finite results."""
    if embeddings.shape[-1] != migration_map.in_features:
        raise BridgeError(
            f"The bridge takes {migration_map.in_features}-d embeddings of "
            f"{migration_map.info.get('source') or 'the new model'}, got "
            f"{embeddings.shape[-1]}-d ones: it was fitted on another model's encode output."
        )
    dtype = embeddings.dtype if embeddings.is_floating_point() else migration_map.weight.dtype
    weight = migration_map.weight.to(dtype)  # no copy when the map is already in this dtype
    rows = embeddings.reshape(-1, migration_map.in_features).to(dtype)  # (N, d_new)
    out = torch.addmm(migration_map.bias.to(dtype), rows, weight)  # (N, d_old)
    if not torch.isfinite(out).all():
        finite_inputs = bool(torch.isfinite(rows).all())
        raise BridgeError(
            "The bridge gave NaN or infinite vectors "
            + (
                f"from finite embeddings: {dtype} is too narrow for the map; run the model in "
                "float32."
                if finite_inputs
                else "because the model's embeddings already hold NaN or infinite values."
            )
        )
    return out.reshape(*embeddings.shape[:-1], migration_map.out_features)


def _read_config(folder: Path, source: str) -> dict[str, Any]:
    """``bridge.json``, with its keys checked against `Bridge.config_keys`."""
    where = repr(source)
    try:
        config = json.loads((folder / BRIDGE_CONFIG_FILE).read_text())
    except (OSError, ValueError) as error:
        raise BridgeError(
            f"{BRIDGE_CONFIG_FILE} of {where} cannot be read ({error}): save the model again."
        ) from None
    unknown = sorted(set(config) - set(Bridge.config_keys)) if isinstance(config, dict) else None
    if unknown is None or unknown:
        raise BridgeError(
            f"{BRIDGE_CONFIG_FILE} of {where} has unknown keys {unknown}; valid: "
            f"{Bridge.config_keys}. It was written by another version: upgrade relrep_hf."
        )
    return config


def append_bridge(
    model: SentenceTransformer,
    migration_map: MigrationMap | str | os.PathLike,
    **hub_kwargs: Any,
) -> SentenceTransformer:
    """Append a `Bridge` of ``migration_map`` (loaded, or a folder / Hub id of one) to
    ``model``, on the model's device and in its dtype; the model is changed in place and
    returned. Its ``encode`` then gives vectors in the old index's space.

    Raises:
        BridgeError: the model already ends in a bridge, or its ``encode`` gives embeddings of
            another size than the map takes.
    """
    if isinstance(migration_map, (str, os.PathLike)):
        migration_map = MigrationMap.from_pretrained(migration_map, **hub_kwargs)
    if any(isinstance(module, Bridge) for module in model):
        raise BridgeError(
            "The model already has a Bridge: its encode already gives old-space vectors. "
            "Start from the model without it (SentenceTransformer(modules=list(model)[:-1]))."
        )
    dimension = model.get_embedding_dimension()
    if dimension is not None and dimension != migration_map.in_features:
        raise BridgeError(
            f"The map takes {migration_map.in_features}-d embeddings but the model's encode "
            f"gives {dimension}-d ones: the map was fitted on another model. Fit the bridge on "
            "this model's encode output with fit_bridge(new_rows, old_rows)."
        )
    parameter = next(model.parameters(), None)
    dtype = parameter.dtype if parameter is not None else migration_map.weight.dtype
    weight, bias = (
        t.detach().to(model.device, dtype) for t in (migration_map.weight, migration_map.bias)
    )
    model.append(Bridge(MigrationMap(weight, bias, migration_map.info)))  # the caller's map kept
    return model


def check_bridge_map(migration_map: MigrationMap, model: str, names: Iterable[str]) -> None:
    """Refuse a map that does not start from the model it is appended to (``model``: how the
    user named it; ``names``: every name it answers to), by the source and target the map
    records: one whose target is the model (an old -> new migration map, the opposite of a
    bridge) or whose source is another model. A map that records no source passes (its width is
    checked by `append_bridge`)."""
    info = migration_map.info or {}
    source, target = info.get("source"), info.get("target")
    names = {str(name) for name in names if name}
    if not source or source in names:
        return
    recorded = (
        f"The map records source {source!r} and target {target!r} (direction "
        f"{info.get('direction', 'unrecorded')!r}, {migration_map.in_features}-d -> "
        f"{migration_map.out_features}-d)"
    )
    if target in names:
        raise BridgeError(
            f"{recorded}: it maps {source!r} vectors into the space of --model {model} "
            f"({target!r}), the opposite of a bridge, which maps {target!r} queries into the old "
            f"index's space ({target!r} -> {source!r}); nothing was saved. Fit the bridge the "
            f"other way: relrep-hf bridge RUN --source {source} --target {target}, or "
            "fit_bridge(new_rows, old_rows)."
        )
    raise BridgeError(
        f"{recorded}, but --model {model} is not {source!r} (it answers to {sorted(names)}): "
        f"the map was fitted on another model's encode output, so its queries would land in the "
        f"wrong place of the old index; nothing was saved. Give --model the model {source!r}, "
        f"or, if --model is {source!r} under another name, say so with --model-name {source}."
    )


def check_bridge_out(out: str | os.PathLike) -> None:
    """Refuse an ``out`` that holds anything but a sentence-transformers model (no
    ``modules.json``): saving replaces the folder whole, and user files are never deleted."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BridgeError(f"{str(out)!r} is a file, not a folder: save the model to a folder.")
    if out.is_dir() and any(out.iterdir()) and not (out / "modules.json").is_file():
        raise BridgeError(
            f"{str(out)!r} holds files but no sentence-transformers model (no modules.json): "
            "saving there would replace them. Choose a new or empty folder."
        )


def save_bridged_model(model: SentenceTransformer, out: str | os.PathLike) -> Path:
    """``model.save`` into ``out`` atomically (a complete folder or the previous one, never a
    mix of both), after `check_bridge_out`; returns ``out``."""
    check_bridge_out(out)
    with atomic_directory(out) as staging:
        model.save(str(staging))
    return Path(out)
