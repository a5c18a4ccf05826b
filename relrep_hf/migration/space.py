"""The space a store's vectors are in, as the store records it: a `StoreSpace`.

A store rewritten by ``migrate`` or ``reembed`` records, in its own metadata (a parquet file's
schema metadata, a safetensors file's ``__metadata__``, a file in a datasets folder, a sidecar
beside a .npy file), one small JSON record: the encoder that produced the vectors (its id,
revision, pooling, layer, whether they are unit-length, their dimension), or the map that did
(its fingerprint, source and target). Before a map rewrites a store, `check_map_source` compares
the map with the store's record and refuses a map whose source is not the store's space, or one
already applied. A store written before records existed reads as unrecorded (``None``) and is
migrated as before, unchecked. Pure: JSON and the map's bytes, no store is opened here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "SPACE_FORMAT",
    "SPACE_KEY",
    "StoreSpace",
    "StoreSpaceError",
    "check_map_source",
    "encoder_space",
    "map_fingerprint",
    "map_space",
]

SPACE_KEY = "relrep_hf.space"  # the metadata key (parquet, safetensors) the record is kept under
SPACE_FORMAT = 1


class StoreSpaceError(ValueError):
    """A map or encoder does not fit the space a store records, or its record is unreadable."""


@dataclass(frozen=True)
class StoreSpace:
    """The space of a store's vectors.

    Attributes:
        name: what the space is called: the encoder spec that embedded the vectors
            (``"minilm:mean:-1"``), or the target named by the map that migrated them.
        dim: the vectors' dimension.
        encoder: for re-embedded vectors: ``id``, ``revision``, ``kind``, ``pooling``,
            ``layer``, ``normalized`` (every vector unit-length), ``spec``.
        map: for migrated vectors: the map's ``fingerprint``, ``source`` and ``target`` names.
        aliases: other names the space answers to (the encoder's Hub id, its run name).
    """

    name: str
    dim: int
    encoder: dict[str, Any] | None = None
    map: dict[str, Any] | None = None
    aliases: tuple[str, ...] = field(default=())

    def names(self) -> set[str]:
        """Every name of this space a map's ``source`` or ``target`` may give."""
        return {n for n in (self.name, *self.aliases) if n}

    def to_json(self) -> str:
        """The record as the store keeps it (keys sorted: the same space, the same bytes)."""
        record = {"format": SPACE_FORMAT, **asdict(self), "aliases": list(self.aliases)}
        return json.dumps(record, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str) -> StoreSpace:
        """The record ``text`` read back; a StoreSpaceError names ``where`` if it is broken."""
        try:
            record = json.loads(text)
            if record.pop("format") != SPACE_FORMAT:
                raise ValueError("a record of another format version")
            record["aliases"] = tuple(record.get("aliases", ()))
            return cls(**record)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise StoreSpaceError(
                f"{where}: its record of the space its vectors are in ({SPACE_KEY}) is "
                f"unreadable ({error}). Remove that record (the store then reads as "
                "unrecorded) or re-embed the store."
            ) from None

    def describe(self) -> str:
        """``'minilm:mean:-1' (384-d)`` or ``'new' (384-d, migrated from 'old' by map 1a2b...)``."""
        if self.map is not None:
            return (
                f"{self.name!r} ({self.dim}-d, migrated from {self.map.get('source')!r} by map "
                f"{self.map.get('fingerprint')})"
            )
        return f"{self.name!r} ({self.dim}-d)"


def encoder_space(
    spec: Any, provenance: dict[str, str], vectors_dim: int, normalized: bool
) -> StoreSpace:
    """The space of vectors embedded by the encoder ``spec`` (pooling decided) with
    ``provenance`` (``encoder_id``, ``encoder_revision``, ``encoder_kind``)."""
    encoder = {
        "spec": str(spec),
        "kind": provenance.get("encoder_kind", getattr(spec, "kind", "")),
        "id": provenance.get("encoder_id", ""),
        "revision": provenance.get("encoder_revision", ""),
        "pooling": getattr(spec, "pooling", None),
        "layer": getattr(spec, "layer", None),
        "normalized": bool(normalized),
    }
    aliases = tuple(dict.fromkeys(a for a in (getattr(spec, "name", ""), encoder["id"]) if a))
    return StoreSpace(str(spec), int(vectors_dim), encoder=encoder, aliases=aliases)


def map_fingerprint(migration_map: Any) -> str:
    """sha256 (first 16 hex digits) of the map's weight and bias, as float64 bytes."""
    digest = hashlib.sha256()
    for tensor in (migration_map.weight, migration_map.bias):
        values = tensor.detach().to("cpu").double().numpy()
        digest.update(str(values.shape).encode())
        digest.update(np.ascontiguousarray(values).tobytes())
    return digest.hexdigest()[:16]


def map_space(migration_map: Any) -> StoreSpace:
    """The space of vectors migrated by ``migration_map``: its target, with the map recorded."""
    info = getattr(migration_map, "info", {}) or {}
    source, target = info.get("source"), info.get("target")
    record = {"fingerprint": map_fingerprint(migration_map), "source": source, "target": target}
    dim = int(migration_map.weight.shape[1])
    return StoreSpace(target or f"map {record['fingerprint']}", dim, map=record)


def check_map_source(recorded: StoreSpace | None, migration_map: Any, store: str) -> None:
    """Refuse ``migration_map`` for a store (``store``: its description) in the ``recorded``
    space: a map applied to it already, a store already in the map's target space, or a map
    from another space. An unrecorded store (``None``) and a map that names no source pass."""
    if recorded is None:
        return
    new = map_space(migration_map)
    source = (migration_map.info or {}).get("source")
    if recorded.map is not None and recorded.map.get("fingerprint") == new.map["fingerprint"]:
        raise StoreSpaceError(
            f"{store}: this map ({new.map['fingerprint']}) was applied to it already: its vectors "
            f"are in {recorded.describe()}. A second pass would map them twice; nothing was "
            "written. Migrate the original vectors, or re-embed the store from its text."
        )
    target = new.map["target"]
    if target and target in recorded.names() and source not in recorded.names():
        raise StoreSpaceError(
            f"{store}: its vectors are in {recorded.describe()} already, the map's target. "
            "Nothing was written; the store needs no migration."
        )
    if source and source not in recorded.names():
        raise StoreSpaceError(
            f"{store}: its vectors are in {recorded.describe()}, but the map takes vectors of "
            f"{source!r}. Nothing was written. Give the map fitted from {recorded.name!r}, or "
            "re-embed the store from its text (relrep-hf reembed)."
        )
