"""Onboarding an encoder from a corpus no machine holds: its whitening statistics and its
embeddings of an anchor set's support inputs computed on Ray Data, then its projector built with
no training (`RelativeProjector.from_anchor_set`).

Each block of the `ray.data.Dataset` (the encoder's vectors, or texts that encoder actors embed:
`relrep_hf.migration.ray_engine.reembed_dataset`) gives one row: the float64 count, mean and
scatter of its vectors (`Statistics.update`) and the vectors of the support inputs it holds.
The driver merges the partial statistics with Chan's formula (`Statistics.merge`) and puts the
support vectors in the anchor set's order, so both equal the one-process
``Statistics.from_embeddings(all rows)`` and ``embeddings[support rows]`` to float64 round-off.
A support input is found by its key: the row's text (``key_column="text"``) for an anchor set of
texts, the row's id (``key_column="id"``) for one of ``{"index": i}`` references.
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Collection, Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from relrep_hf.migration.ray_engine import (
    DATASET,
    _names,
    named_failure,
    partial_statistics,
    require_ray,
)
from relrep_hf.migration.stores import VectorStoreError
from relrep_hf.migration.stores.arrow import _matrix, _pick_column
from relrep_hf.utils.defaults import DEFAULT_EMBED_BATCH_SIZE

if TYPE_CHECKING:
    import ray.data
    import torch

    from relrep_hf.functional.statistics import Statistics
    from relrep_hf.models.anchor_set import AnchorSet
    from relrep_hf.models.modeling_relative_projector import RelativeProjector

__all__ = [
    "onboard_dataset",
    "onboard_shards",
    "onboarding_from_dataset",
    "shard_paths",
    "support_keys",
]

SHOWN_KEYS = 5  # missing or ambiguous support keys named in an error


def support_keys(anchor_set: AnchorSet) -> tuple[str, list[Hashable]]:
    """``(key column, keys)`` that find the anchor set's support inputs among a dataset's rows:
    ``("text", texts)`` for texts, ``("id", indices)`` for ``{"index": i}`` references."""
    if all(isinstance(x, str) for x in anchor_set.support):
        return "text", list(anchor_set.support)
    if all(isinstance(x, dict) and set(x) == {"index"} for x in anchor_set.support):
        return "id", [x["index"] for x in anchor_set.support]
    raise ValueError(
        "The anchor set's support inputs are neither all texts nor all {'index': i} references: "
        "pass support_keys= (one value of key_column= per support input, in order)."
    )


def block_partials(
    table: pa.Table,
    *,
    column: str,
    key_column: str,
    positions: dict[Hashable, list[int]],
    statistics_keys: frozenset | None,
) -> pa.Table:
    """One row: the block's `partial_statistics` (of the rows whose key is in
    ``statistics_keys``, default every row) and its support rows (``positions`` in the anchor
    set's order, and their vectors, float64)."""
    keys = table.column(key_column).to_pylist()
    rows = table
    if statistics_keys is not None:
        rows = table.filter(pa.array([key in statistics_keys for key in keys], pa.bool_()))
    partial = partial_statistics(rows, column=column)
    found = [(p, i) for i, key in enumerate(keys) if key in positions for p in positions[key]]
    vectors = _matrix(table.column(column), DATASET, column)  # [n, d]
    support = [np.asarray(vectors[i], dtype=np.float64) for _, i in found]
    positions_found = pa.array([[p for p, _ in found]], pa.list_(pa.int64()))
    vectors_found = pa.array([support], pa.list_(pa.list_(pa.float64())))
    partial = partial.append_column("support_positions", positions_found)
    return partial.append_column("support_vectors", vectors_found)


def _merged(rows: Any, column: str, size: int, keys: Sequence) -> tuple[torch.Tensor, Statistics]:
    """The partial statistics merged (Chan) and the support vectors in order, checked: each
    support input found, with one vector."""
    import torch

    from relrep_hf.functional.statistics import Statistics

    merged: Statistics | None = None
    support: list[np.ndarray | None] = [None] * size
    ambiguous: list[Hashable] = []
    for row in rows:
        dim = int(row["dim"])
        for position, vector in zip(row["support_positions"], row["support_vectors"], strict=True):
            vector = np.asarray(vector, dtype=np.float64)
            if support[position] is not None and not np.array_equal(support[position], vector):
                ambiguous.append(keys[position])
            support[position] = vector
        if not row["count"]:
            continue
        mean = torch.as_tensor(np.asarray(row["mean"], dtype=np.float64))
        scatter = torch.as_tensor(np.asarray(row["scatter"], dtype=np.float64).reshape(dim, dim))
        part = Statistics(int(row["count"]), mean, scatter)
        if merged is not None and part.dim != merged.dim:
            raise VectorStoreError(
                f"{DATASET}: column {column!r} holds vectors of {merged.dim} and {part.dim} "
                "dimensions: every row must hold one vector of the same length."
            )
        merged = part if merged is None else merged.merge(part)
    missing = [keys[p] for p, vector in enumerate(support) if vector is None]
    _check_support(missing, ambiguous, size)
    if merged is None or merged.count < 2:
        raise ValueError(f"{DATASET} gives statistics of fewer than 2 rows: they need 2 at least.")
    return torch.from_numpy(np.stack(support)), merged  # [K, d] float64


def _check_support(missing: list, ambiguous: list, size: int) -> None:
    if missing:
        raise ValueError(
            f"{DATASET} lacks {len(missing)} of the anchor set's {size} support inputs (keys "
            f"{[str(k)[:60] for k in missing[:SHOWN_KEYS]]}...): the dataset must hold every "
            "support input, found by its key column (key_column=..., --key-column)."
        )
    if ambiguous:
        raise ValueError(
            f"{DATASET} holds support inputs more than once with different vectors (keys "
            f"{[str(k)[:60] for k in ambiguous[:SHOWN_KEYS]]}): make each key name one row."
        )


def onboarding_from_dataset(
    ds: ray.data.Dataset,
    keys: Sequence[Hashable],
    *,
    key_column: str = "text",
    column: str | None = None,
    encoder: str | None = None,
    text_column: str = "text",
    statistics_keys: Collection[Hashable] | None = None,
    **reembed: Any,
) -> tuple[torch.Tensor, Statistics]:
    """``(support embeddings [K, d] float64, Statistics)`` of one encoder from ``ds`` on Ray.

    ``ds`` holds the encoder's vectors in ``column`` (default ``embedding``/``vector``), or,
    with ``encoder`` (a spec), texts in ``text_column`` that encoder actors embed
    (`reembed_dataset`, which takes the further keyword arguments: ``batch_size``,
    ``num_gpus``, ``concurrency``). ``keys``: the ``key_column`` value of each support input,
    in the anchor set's order (`support_keys`). ``statistics_keys``: estimate the statistics
    on the rows with these keys only (default: every row). Equal to the one-process result to
    float64 round-off.

    Example:
        >>> column, keys = support_keys(anchor_set)  # doctest: +SKIP
        >>> support, stats = onboarding_from_dataset(ds, keys, key_column=column)  # doctest: +SKIP
    """
    require_ray()
    if not len(keys):
        raise ValueError("keys is empty: give one key per support input of the anchor set.")
    names, _ = _names(ds)
    if key_column not in names:
        raise VectorStoreError(
            f"{DATASET} has no key column {key_column!r}; its columns are {names}. Name the "
            "column that finds the support inputs (key_column=..., --key-column)."
        )
    if encoder is not None:
        from relrep_hf.migration.ray_engine import reembed_dataset

        column = column or "embedding"
        ds = reembed_dataset(ds, encoder, text_column=text_column, output_column=column, **reembed)
    else:
        column = _pick_column(names, column, DATASET)
    positions: dict[Hashable, list[int]] = {}
    for position, key in enumerate(keys):
        positions.setdefault(key, []).append(position)
    wanted = None if statistics_keys is None else frozenset(statistics_keys)
    function = functools.partial(
        block_partials,
        column=column,
        key_column=key_column,
        positions=positions,
        statistics_keys=wanted,
    )
    rows = ds.map_batches(function, batch_format="pyarrow", batch_size=None).iter_rows()
    ray = require_ray()
    try:
        return _merged(rows, column, len(keys), list(keys))
    except ray.exceptions.RayError as error:  # a worker that died: its batch named
        raise named_failure(error) from None


def onboard_dataset(
    anchor_set: AnchorSet,
    ds: ray.data.Dataset,
    *,
    key_column: str | None = None,
    keys: Sequence[Hashable] | None = None,
    column: str | None = None,
    encoder: str | None = None,
    text_column: str = "text",
    statistics_keys: Collection[Hashable] | None = None,
    reembed: dict[str, Any] | None = None,
    **projector_kwargs: Any,
) -> RelativeProjector:
    """An encoder's projector from ``anchor_set`` and a Ray dataset, with no training: the
    support embeddings and statistics of `onboarding_from_dataset` (its keys and key column
    from the anchor set unless given: `support_keys`) into
    `RelativeProjector.from_anchor_set`, which takes ``projector_kwargs`` (provenance, dtype)."""
    from relrep_hf.models.modeling_relative_projector import RelativeProjector

    if keys is None:
        default_column, keys = support_keys(anchor_set)
        key_column = key_column or default_column
    support, statistics = onboarding_from_dataset(
        ds,
        keys,
        key_column=key_column or "text",
        column=column,
        encoder=encoder,
        text_column=text_column,
        statistics_keys=statistics_keys,
        **(reembed or {}),
    )
    return RelativeProjector.from_anchor_set(anchor_set, support, statistics, **projector_kwargs)


def shard_paths(shards: str | os.PathLike) -> list[str]:
    """The parquet files a folder holds, or a glob names, sorted; a ValueError if none."""
    path = Path(shards)
    found = path.glob("*.parquet") if path.is_dir() else map(Path, glob.glob(str(shards)))
    files = sorted(str(p) for p in found if p.is_file() and p.suffix == ".parquet")
    if not files:
        raise ValueError(
            f"{str(shards)!r} names no .parquet shards: give a folder of parquet shards or a "
            "glob ('corpus/part-*.parquet')."
        )
    return files


def onboard_shards(
    anchor_set: str | os.PathLike | AnchorSet,
    shards: str | os.PathLike,
    encoder: str,
    out: str | os.PathLike,
    *,
    column: str | None = None,
    text_column: str = "text",
    key_column: str | None = None,
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
    num_workers: int | None = None,
    num_gpus: float | None = None,
) -> RelativeProjector:
    """`onboard_dataset` over parquet shards (a folder or a glob) read by Ray Data, the
    projector saved to ``out`` (`relrep-hf onboard --engine ray`): the vectors of ``column``
    when given (``encoder`` then names the encoder they come from), else the texts of
    ``text_column`` embedded by ``encoder`` (``num_workers`` encoder actors, default as many
    as the cluster holds; ``num_gpus`` each). Statistics from every row of the shards. Ray is
    started here (``RAY_ADDRESS`` or a local cluster) unless the caller started it."""
    from relrep_hf.encoding.encoder_kinds import encoder_kind
    from relrep_hf.migration.reembed import _parse
    from relrep_hf.models.anchor_set import AnchorSet

    spec = _parse(encoder)
    files = shard_paths(shards)
    if not isinstance(anchor_set, AnchorSet):
        anchor_set = AnchorSet.from_pretrained(anchor_set)
    ray = require_ray()
    if not ray.is_initialized():
        ray.init()
    provenance = dict(encoder_kind(spec.kind).describe(spec))
    provenance.update(
        {k: getattr(spec, k) for k in ("pooling", "layer") if getattr(spec, k, None) is not None}
    )
    import pyarrow.parquet as pq

    # each row's shard file (a ``path`` column), so that an error names the shard
    paths = "path" not in pq.read_schema(files[0]).names
    projector = onboard_dataset(
        anchor_set,
        ray.data.read_parquet(files, include_paths=paths),
        key_column=key_column,
        column=column,
        encoder=None if column else encoder,
        text_column=text_column,
        reembed={"batch_size": batch_size, "num_gpus": num_gpus, "concurrency": num_workers},
        **provenance,
    )
    projector.save_pretrained(out)
    return projector
