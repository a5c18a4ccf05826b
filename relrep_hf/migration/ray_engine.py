"""Store work on Ray Data, past one machine: a `ray.data.Dataset` migrated through a map
(`migrate_dataset`), re-embedded from its text column by encoder actors (`reembed_dataset`), and
its whitening statistics computed per block and merged in float64 (`statistics_from_dataset`).

Each is the single-process path applied per batch with ``map_batches``: the same affine apply as
`relrep_hf.migration.migrate_store` (`affine_chunks`: float32, float64 for float64 vectors),
the same encoder loading and pooling as the pipeline's embed step, the same mergeable
`Statistics`. Ray is an optional dependency (``pip install 'relrep-hf[ray]'``), imported when
one of these runs. Re-embedding runs `reembed_store`'s own embedding function per batch. A
sharded store on disk (a folder of parquet shards, a datasets folder) is
rewritten shard by shard, resumably, by `relrep_hf.migration.ray_shards.migrate_shards`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from relrep_hf.migration.stores.arrow import _column, _matrix, _pick_column, _vector_type
from relrep_hf.migration.stores.base import VectorStoreError
from relrep_hf.utils.defaults import DEFAULT_EMBED_BATCH_SIZE, DEFAULT_REEMBED_CHUNK_ROWS
from relrep_hf.utils.io import atomic_write_bytes

if TYPE_CHECKING:
    import ray.data

    from relrep_hf.functional.statistics import Statistics
    from relrep_hf.migration.map import MigrationMap

__all__ = [
    "migrate_dataset",
    "reembed_dataset",
    "require_ray",
    "statistics_from_dataset",
]

DATASET = "the Ray dataset"  # how errors name a `ray.data.Dataset` (it has no path)


def require_ray() -> Any:
    """The ``ray`` module, or an ImportError saying how to install it."""
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise ImportError(
            "The Ray engine needs Ray Data: pip install 'relrep-hf[ray]' (or pip install "
            f"'ray[data]'). ({error})"
        ) from None
    return ray


def _names(ds: ray.data.Dataset) -> tuple[list[str], pa.Schema | None]:
    schema = ds.schema()
    base = getattr(schema, "base_schema", None)
    return list(schema.names), base if isinstance(base, pa.Schema) else None


def _loaded_map(migration_map: MigrationMap | str | os.PathLike) -> Any:
    import torch

    from relrep_hf.migration.map import MigrationMap

    if isinstance(migration_map, torch.nn.Module):
        return migration_map
    return MigrationMap.from_pretrained(migration_map)


def migrate_batch(
    table: pa.Table | pa.RecordBatch,
    *,
    migration_map: Any,
    column: str,
    dtype: np.dtype | None,
    where: str = DATASET,
) -> pa.Table:
    """``table`` with its vector ``column`` mapped by ``migration_map`` (`affine_chunks`, in
    the vectors' dtype as `migrate_store` computes), checked finite as read and as written in
    the output's dtype (``dtype``, default the column's); errors name ``where``."""
    from relrep_hf.migration.migrate import affine_chunks

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    d_old = int(migration_map.weight.shape[0])
    vectors = _matrix(table.column(column), DATASET, column)  # [n, d_old]
    if len(vectors) and vectors.shape[1] != d_old:
        raise VectorStoreError(
            f"{where}: column {column!r} holds {vectors.shape[1]}-d vectors, the map takes "
            f"{d_old}-d vectors of the old encoder. Give the vectors of the map's source encoder."
        )
    wanted = vectors.dtype if dtype is None else dtype
    if not np.isfinite(vectors).all():
        raise VectorStoreError(
            f"{where}: column {column!r} holds NaN or infinite values. Re-embed or drop those "
            "rows first."
        )
    transform = affine_chunks(migration_map, wanted)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
        mapped = transform(vectors).astype(wanted, copy=False)  # [n, d_new]
    if not np.isfinite(mapped).all():
        raise VectorStoreError(
            f"{where}: migrated values overflow {mapped.dtype} although the vectors read are "
            "finite. Ask for a wider dtype (dtype='float32'), or check the map's weights."
        )
    index = table.schema.get_field_index(column)
    like = table.schema.field(index).type
    new = _column(mapped, like)
    return table.set_column(index, pa.field(column, new.type), new)


def migrate_dataset(
    migration_map: MigrationMap | str | os.PathLike,
    ds: ray.data.Dataset,
    *,
    column: str | None = None,
    dtype: str | np.dtype | None = None,
    batch_size: int | None = 4096,
) -> ray.data.Dataset:
    """``ds`` with its vector ``column`` moved into the new encoder's space, lazily (Ray Data).

    The map is applied per batch with ``map_batches``, as `relrep_hf.migration.migrate_store`
    applies it per chunk (one ``addmm`` in float32, float64 for float64 vectors), so the rows
    and numbers are the single-process path's; every other column is carried over.
    ``column``: the vector column (default ``embedding``, ``embeddings``, ``vector`` or
    ``vectors``, whichever exists). ``dtype``: the new vectors' dtype (default the column's).

    Example:
        >>> ds = ray.data.read_parquet("s3://bucket/vectors/")  # doctest: +SKIP
        >>> migrate_dataset("me/minilm-to-e5", ds).write_parquet("s3://bucket/new/")  # doctest: +SKIP
    """
    from relrep_hf.migration.migrate import _dtype

    require_ray()
    migration_map = _loaded_map(migration_map)
    names, schema = _names(ds)
    column = _pick_column(names, column, DATASET)
    d_old = int(migration_map.weight.shape[0])
    wanted = None if dtype is None else _dtype(dtype)
    if schema is not None:
        _, dim = _vector_type(schema.field(column), DATASET)
        if dim is not None and dim != d_old:
            raise VectorStoreError(
                f"{DATASET}: column {column!r} holds {dim}-d vectors, the map takes {d_old}-d "
                "vectors of the old encoder. Give the vectors of the map's source encoder."
            )
    function = functools.partial(
        migrate_batch, migration_map=migration_map, column=column, dtype=wanted
    )
    return ds.map_batches(function, batch_format="pyarrow", batch_size=batch_size)


class BatchTracker:
    """A Ray actor that keeps what each encoder actor is embedding (`describe_batch`) and how
    often the worker embedding it died, so that a restarted actor can name the batch."""

    def __init__(self) -> None:
        self.working: dict[str, str] = {}
        self.deaths: dict[str, int] = {}

    def start(self, actor_id: str, batch: str) -> None:
        self.working[actor_id] = batch

    def restarted(self, actor_id: str) -> tuple[str | None, int]:
        """The batch the actor's last life was embedding, and the deaths on it so far."""
        batch = self.working.get(actor_id)
        if batch is not None:
            self.deaths[batch] = self.deaths.get(batch, 0) + 1
        return batch, self.deaths.get(batch, 0)


def describe_batch(table: pa.Table, text_column: str) -> str:
    """A batch of rows as an error names it: its shard files (a ``path`` column, Ray Data's
    ``include_paths=True``), else its ids (an ``id`` column), else its first text."""
    if "path" in table.column_names:
        paths = list(dict.fromkeys(table.column("path").to_pylist()))
        return f"shard {', '.join(map(repr, paths))}"
    if "id" in table.column_names and table.num_rows:
        ids = table.column("id").to_pylist()
        return f"the rows of ids {ids[0]!r} to {ids[-1]!r} of {DATASET}"
    first = table.column(text_column)[0].as_py() if table.num_rows else ""
    return f"the batch of {table.num_rows} rows of {DATASET} from text {str(first)[:40]!r}"


def actor_device(spec: Any) -> str | None:
    """Where an encoder actor runs ``spec``'s model: ``cuda`` where the actor sees a GPU, else
    None (where it loads: the CPU); None without importing torch for a kind whose embedding
    reads no device (`EncoderKind.uses_device`: the array kinds). Importing torch only to ask
    for CUDA cost a re-embed actor of a callable 7.3 CPU-s a start instead of 4.1 (measured),
    and a restart as much."""
    from relrep_hf.encoding.encoder_kinds import encoder_kind

    if not encoder_kind(spec.kind).uses_device:
        return None
    import torch

    return "cuda" if torch.cuda.is_available() else None


class EncoderActor:
    """A Ray Data actor: each batch of texts embedded into ``output_column`` (fixed-size lists of
    float32) by `relrep_hf.migration.reembed.embed_texts`, the single-process re-embed's one
    embedding (the encoder kinds' registry: any kind `parse_encoder` reads), one encoder load
    per batch as `reembed_store` loads it once per chunk; on the GPU when the actor sees one.
    With a ``tracker`` (`BatchTracker`), a restart after the worker died on the same batch more
    than ``max_retries`` times raises an error naming that batch (its shard)."""

    def __init__(
        self,
        spec: str,
        text_column: str,
        output_column: str,
        batch_size: int,
        tracker: Any = None,
        max_retries: int = 2,
    ):
        import ray

        self.tracker, self.actor_id = tracker, ray.get_runtime_context().get_actor_id()
        context = ray.get_runtime_context()
        if tracker is not None and context.was_current_actor_reconstructed:
            batch, deaths = ray.get(tracker.restarted.remote(self.actor_id))
            if batch is not None and deaths > max_retries:
                raise VectorStoreError(
                    f"{batch[0].upper()}{batch[1:]}: the Ray worker re-embedding it died "
                    f"{deaths} time(s). Nothing was written in place of the input; fix the "
                    "cause (memory, a text the encoder cannot take, a lost node) and run again."
                )
        # only then the encoder kinds (and torch for a model's device: `actor_device`): a
        # restart that names the batch above needs neither
        from relrep_hf.encoding.encoder_kinds import parse_encoder

        self.spec, _ = parse_encoder(spec)
        self.text_column, self.output_column = text_column, output_column
        self.batch_size = batch_size
        self.device = actor_device(self.spec)  # an actor's own GPU(s)

    def __call__(self, table: pa.Table) -> pa.Table:
        import tempfile
        from pathlib import Path

        import ray

        from relrep_hf.migration.reembed import embed_texts

        if self.tracker is not None:  # waited for: the tracker knows before a crash can happen
            ray.get(
                self.tracker.start.remote(self.actor_id, describe_batch(table, self.text_column))
            )
        texts = table.column(self.text_column).to_pylist()
        with tempfile.TemporaryDirectory(prefix="relrep-ray-embed-") as cache:
            vectors, _ = embed_texts(self.spec, texts, Path(cache), self.batch_size, self.device)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)  # [n, d]
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
        if self.output_column in table.column_names:
            index = table.column_names.index(self.output_column)
            return table.set_column(index, self.output_column, column)
        return table.append_column(self.output_column, column)


def named_failure(error: Exception) -> Exception:
    """The error that names a dead worker's batch (raised by a restarted `EncoderActor` inside
    Ray's own ``ActorDiedError``), as a VectorStoreError; else ``error`` itself."""
    marker = "VectorStoreError: "
    lines = [line for line in str(error).splitlines() if marker in line]
    return VectorStoreError(lines[-1].split(marker, 1)[1]) if lines else error


def _concurrency(num_gpus: float | None) -> tuple[int, int]:
    """``(1, the actors the cluster holds)``: one per ``num_gpus`` GPUs, else one per CPU. A
    range, so Ray Data starts actors as CPUs are free: a fixed pool of every CPU would leave
    none to the tasks that read the blocks."""
    import ray

    resources = ray.cluster_resources()
    if num_gpus:
        return 1, max(1, int(resources.get("GPU", 0) // num_gpus))
    return 1, max(1, int(resources.get("CPU", 1)))


def reembed_dataset(
    ds: ray.data.Dataset,
    encoder_spec: str,
    *,
    text_column: str = "text",
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
    chunk_rows: int = DEFAULT_REEMBED_CHUNK_ROWS,
    num_gpus: float | None = None,
    concurrency: int | tuple[int, int] | None = None,
    output_column: str = "embedding",
    max_retries: int = 2,
) -> ray.data.Dataset:
    """``ds`` with ``output_column`` (float32 vectors) embedded from ``text_column`` by
    ``encoder_spec`` (any spec `parse_encoder` reads but precomputed), lazily (Ray Data).

    Encoder actors (`EncoderActor`) embed ``chunk_rows`` rows per call (one encoder load, as a
    chunk of `reembed_store`), ``batch_size`` texts per forward; ``num_gpus``: GPUs per actor
    (default: 1 where the cluster has GPUs, else none); ``concurrency``: actors, a number or a
    ``(min, max)`` range (default: from 1 up to as many as the cluster holds). Each row's
    embedding is the one `reembed_store` gives for its text (the same function). An actor whose
    worker dies is restarted and its batch retried ``max_retries`` times (Ray's ``max_restarts``
    and ``max_task_retries``; Ray Data's default is forever); then the error names the batch
    (its shard file where ``ds`` was read with ``include_paths=True``, else its ids).

    Example:
        >>> ds = ray.data.read_parquet("s3://bucket/docs/")  # doctest: +SKIP
        >>> reembed_dataset(ds, "BAAI/bge-small-en-v1.5:cls").write_parquet("s3://bucket/new/")  # doctest: +SKIP
    """
    ray = require_ray()
    names, _ = _names(ds)
    if text_column not in names:
        raise ValueError(
            f"{DATASET} has no text column {text_column!r}; its columns are {names}. Name the "
            "column holding the texts (text_column=..., --text-column)."
        )
    for name, value in (("batch_size", batch_size), ("chunk_rows", chunk_rows)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
    from relrep_hf.migration.reembed import _parse

    _parse(encoder_spec)  # on the driver first: a bad spec fails at once
    if num_gpus is None:
        num_gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else None
    # Ray 2.60 takes max_restarts / max_task_retries only as ``ray_remote_args`` (deprecated
    # there for 2.64, with no named parameter yet): its warning is Ray's to itself
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`ray_remote_args` is deprecated")
        return ds.map_batches(
            EncoderActor,
            fn_constructor_kwargs={
                "spec": encoder_spec,
                "text_column": text_column,
                "output_column": output_column,
                "batch_size": batch_size,
                "tracker": ray.remote(num_cpus=0)(BatchTracker).remote(),
                "max_retries": max_retries,
            },
            batch_format="pyarrow",
            batch_size=chunk_rows,
            num_gpus=num_gpus,
            concurrency=concurrency or _concurrency(num_gpus),
            max_restarts=max_retries + 1,  # the last restart names the batch (`EncoderActor`)
            max_task_retries=max_retries + 1,
        )


def partial_statistics(table: pa.Table, *, column: str) -> pa.Table:
    """One row: the ``count``, ``mean`` and ``scatter`` (flattened, float64) of the block's
    vectors (`Statistics.update`), for merging on the driver."""
    import torch

    from relrep_hf.functional.statistics import Statistics

    vectors = _matrix(table.column(column), DATASET, column)  # [n, d]
    stats = Statistics.empty(vectors.shape[1])
    if len(vectors):
        stats = stats.update(torch.from_numpy(np.array(vectors)))
    return pa.table(
        {
            "count": [stats.count],
            "dim": [stats.dim],
            "mean": [stats.mean.numpy()],
            "scatter": [stats.scatter.reshape(-1).numpy()],
        }
    )


def statistics_from_dataset(ds: ray.data.Dataset, column: str | None = None) -> Statistics:
    """The whitening `Statistics` (float64) of the vector ``column`` of ``ds``: each block's
    count, mean and scatter computed on the cluster (`partial_statistics`), merged on the
    driver with Chan's formula (`Statistics.merge`), so they equal
    ``Statistics.from_embeddings`` of all rows to float64 round-off."""
    import torch

    from relrep_hf.functional.statistics import Statistics

    require_ray()
    names, _ = _names(ds)
    column = _pick_column(names, column, DATASET)
    function = functools.partial(partial_statistics, column=column)
    merged: Statistics | None = None
    for row in ds.map_batches(function, batch_format="pyarrow", batch_size=None).iter_rows():
        dim = int(row["dim"])
        if not row["count"]:
            continue
        part = Statistics(
            int(row["count"]),
            torch.as_tensor(np.asarray(row["mean"], dtype=np.float64)),
            torch.as_tensor(np.asarray(row["scatter"], dtype=np.float64).reshape(dim, dim)),
        )
        if merged is not None and part.dim != merged.dim:
            raise VectorStoreError(
                f"{DATASET}: column {column!r} holds vectors of {merged.dim} and {part.dim} "
                "dimensions: every row must hold one vector of the same length."
            )
        merged = part if merged is None else merged.merge(part)
    if merged is None:
        raise ValueError(f"{DATASET} has no rows: statistics need at least 2 embeddings.")
    return merged


# ---------------------------------------------------------------------------------------------
# What the sharded runs share (`ray_shards`, `ray_lance`): the work folder and one task a shard
# ---------------------------------------------------------------------------------------------

PLAN_FILE = "plan.json"
DONE_FOLDER = ".done"


def _map_digest(migration_map: Any) -> str:
    digest = hashlib.sha256()
    for tensor in (migration_map.weight, migration_map.bias):
        array = tensor.detach().to("cpu").double().numpy()
        digest.update(str(array.shape).encode() + array.tobytes())
    return digest.hexdigest()


def _start_work(work: Path, plan: dict[str, Any], resume: bool, what: str = "migration") -> None:
    """Create the work folder with ``plan``; or, with ``resume``, check an existing one's plan.
    ``what``: the run, as errors name it (``migration``, ``re-embed``)."""
    plan_path = work / PLAN_FILE
    if work.exists():
        if not resume:
            raise VectorStoreError(
                f"{str(work)!r}: an earlier run of this {what} stopped before it finished and "
                "left its shards there. Pass resume=True (--resume) to keep the shards it "
                "finished, or remove that folder to start again. Nothing was written."
            )
        try:
            found = json.loads(plan_path.read_text("utf-8"))
        except (OSError, ValueError):
            found = None
        if found != plan:
            raise VectorStoreError(
                f"{str(work)!r} holds shards of another {what} (another map or encoder, input, "
                f"column or dtype: {found} against {plan}). Remove that folder to start again, "
                "or resume with the same arguments. Nothing was written."
            )
        return
    (work / DONE_FOLDER).mkdir(parents=True)
    atomic_write_bytes(plan_path, json.dumps(plan, sort_keys=True).encode())


def run_shard_tasks(
    function: Any, migration_map: Any, jobs: dict[str, tuple], work: Path, options: dict
) -> None:
    """One Ray task ``function(map, *args)`` per ``{shard name: args}`` of ``jobs``. The others
    still finish when one fails (their shards are kept for a resume); then the first failure is
    raised naming its shard (a worker that died ``max_retries + 1`` times included)."""
    ray = require_ray()
    if not ray.is_initialized():
        ray.init()  # RAY_ADDRESS, if set, names the cluster; else a local one
    task = ray.remote(max_retries=options["max_retries"])(function)
    shared_map = ray.put(migration_map)
    pending = {task.remote(shared_map, *args): shard for shard, args in jobs.items()}
    collect_shards(pending, len(jobs), work, options | {"work": "migrating"})


def collect_shards(
    pending: dict[Any, str], total: int, work: Path, options: dict, next_job: Any = None
) -> None:
    """Wait for every Ray call of ``pending`` (``{object ref: shard name}``), ``total`` shards
    in all; ``next_job(ref, died)`` may add the next call to ``pending`` (an actor freed, or
    dead when ``died``). The others still finish when one fails; then the first failure is
    raised naming its shard (a worker that died ``max_retries + 1`` times included).
    ``options``: ``max_retries``, ``show_progress``, ``work`` (what a worker does, for the
    bar and the error: ``migrating``, ``re-embedding``)."""
    import ray
    from tqdm.auto import tqdm

    failure: Exception | None = None
    disable = None if options["show_progress"] is None else not options["show_progress"]
    doing = options["work"]
    with tqdm(total=total, unit="shard", desc=f"{doing} on Ray", disable=disable) as bar:
        while pending:
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            shard, died = pending.pop(ready), False
            try:
                ray.get(ready)
                bar.update(1)
            except ray.exceptions.RayTaskError as error:
                failure = failure or _task_failure(error, shard)
            except ray.exceptions.RayError as error:  # the worker or its node died
                died = True
                failure = failure or VectorStoreError(
                    f"Shard {str(shard)!r}: the Ray worker {doing} it died "
                    f"{options['max_retries'] + 1} time(s) ({type(error).__name__}). The "
                    f"shards already written are kept in {str(work)!r}: run again with "
                    "resume=True (--resume) once the cause (memory, a lost node) is fixed. "
                    "The input was not modified."
                )
            if next_job is not None:
                next_job(ready, died)
    if failure is not None:
        raise failure


def _task_failure(error: Any, shard: str) -> Exception:
    """The error a shard's task raised, as the driver raises it (without Ray's wrapping)."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, VectorStoreError):
        return VectorStoreError(str(cause))
    return RuntimeError(f"Shard {str(shard)!r} failed: {cause or error}")
