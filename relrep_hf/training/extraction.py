"""Embedding extraction: whole datasets to Arrow files, cached on disk, sharded with accelerate.

`extract_embedding_views` runs the library's one encoding loop (`encoding.encode_in_order`, the
one `RelativeWrapper.encode` runs) over a `datasets.Dataset`, shards it across the processes of
an `accelerate.Accelerator`, and writes the pooled embeddings incrementally to an Arrow file per
``(pooling, layer)`` view, so the number of rows can exceed memory. Each file is keyed by what
determines its content (encoder, revision, pooling, layer, dataset fingerprint, column): a
second call with the same key reads it back without running the encoder. `extract_embeddings`
is the one-view case.

Read top to bottom: cache keys, dataset extraction, reading embeddings back.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import datasets
import numpy as np
import pyarrow as pa
import torch
from datasets.arrow_writer import ArrowWriter
from torch import Tensor, nn
from tqdm.auto import tqdm

from relrep_hf.encoding import (
    PROGRESS_MIN_INPUTS,
    Pooling,
    device_and_dtype,
    encode_in_order,
    input_modality,
    max_input_length,
    pool_model_outputs,
    validate_pooling,
    warn_truncated,
)
from relrep_hf.encoding.encoders import encoder_provenance
from relrep_hf.utils.hub_files import is_commit_hash

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ExtractionOptions",
    "embeddings_tensor",
    "extract_embedding_views",
    "extract_embeddings",
    "extraction_cache_key",
]

# Rows of a dataset encoded (and length-sorted) together; each process holds one window at a time.
DEFAULT_WINDOW_BATCHES = 64
# Bumped when the layout of the extraction cache changes, so old files are never read back.
_CACHE_FORMAT = 1


def extraction_cache_key(
    encoder: nn.Module,
    dataset: datasets.Dataset,
    *,
    column: str,
    pooling: Pooling,
    layer: int,
    max_length: int | None,
    encoder_id: str | None = None,
    encoder_revision: str | None = None,
) -> str:
    """Hash of everything that determines the extracted embeddings.

    That is the encoder (id + revision; when no commit is known, a hash of its weights), its
    dtype, the pooling, the layer, the truncation length, the dataset's fingerprint and the
    column. A known commit is trusted: pass ``encoder_revision`` to name a model whose weights
    were changed in memory.
    """
    known_id, known_revision = encoder_provenance(encoder)
    encoder_id = encoder_id or known_id or str(getattr(encoder.config, "name_or_path", ""))
    encoder_revision = encoder_revision or known_revision
    parts = {
        "format": _CACHE_FORMAT,
        "encoder_id": encoder_id,
        "encoder_revision": encoder_revision,
        "encoder_class": type(encoder).__name__,
        "dtype": str(device_and_dtype(encoder)[1]),
        "pooling": pooling,
        "layer": layer,
        "max_length": max_length,
        "dataset": dataset._fingerprint,
        "column": column,
    }
    if not is_commit_hash(encoder_revision):
        parts["weights"] = _weights_hash(encoder)
    payload = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()[:32]


def _weights_hash(model: nn.Module) -> str:
    """blake2b of every parameter and buffer, by name, shape and bytes."""
    digest = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for name, tensor in sorted(model.state_dict().items()):
            flat = tensor.detach().contiguous().reshape(-1)
            digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
            digest.update(flat.view(torch.uint8).cpu().numpy().tobytes())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Dataset extraction
# ---------------------------------------------------------------------------------------------


class ExtractionOptions(TypedDict, total=False):
    """The options of `extract_embedding_views` besides the views (see its Args)."""

    column: str
    batch_size: int
    cache_dir: str | os.PathLike | None
    accelerator: Any
    encoder_id: str | None
    encoder_revision: str | None
    max_length: int | None
    window_size: int | None
    show_progress: bool | None


def extract_embeddings(
    encoder: nn.Module,
    tokenizer: Any,
    dataset: datasets.Dataset,
    *,
    pooling: Pooling,
    layer: int = -1,
    **options: Unpack[ExtractionOptions],
) -> datasets.Dataset:
    """Pooled embeddings of a dataset column, as an Arrow-backed dataset cached on disk.

    The one-view case of `extract_embedding_views`, which documents the options.

    Returns:
        ``dataset`` with an ``embedding`` column (float32, fixed length d), rows in input order;
        `embeddings_tensor` gives them as one ``[N, d]`` tensor.

    Example:
        >>> from relrep_hf.encoding.corpora import load_sentences
        >>> sentences = load_sentences(256)
        >>> embedded = extract_embeddings(model, tokenizer, sentences, pooling="mean")  # doctest: +SKIP
        >>> embeddings_tensor(embedded).shape  # doctest: +SKIP
        torch.Size([256, 384])
    """
    return extract_embedding_views(
        encoder, tokenizer, dataset, views=[(pooling, layer)], **options
    )[0]


def extract_embedding_views(
    encoder: nn.Module,
    tokenizer: Any,
    dataset: datasets.Dataset,
    *,
    views: Sequence[tuple[Pooling, int]],
    column: str = "text",
    batch_size: int = 64,
    cache_dir: str | os.PathLike | None = None,
    accelerator: Any = None,
    encoder_id: str | None = None,
    encoder_revision: str | None = None,
    max_length: int | None = None,
    window_size: int | None = None,
    show_progress: bool | None = None,
) -> list[datasets.Dataset]:
    """Pooled embeddings of a dataset column for each ``(pooling, layer)`` view, in one pass.

    The rows are encoded exactly as `RelativeWrapper.encode` encodes them (same batching,
    tokenization and pooling). Each view has its own cache folder; the views not cached yet are
    extracted together, one forward per batch serving all of them. With an
    `accelerate.Accelerator`, windows of rows go round-robin to its processes; each step gathers
    one window per process in input order and only the main process writes, batch by batch, so
    memory holds one window per process whatever the dataset size.

    Args:
        encoder: any transformers model (`encoding.pool_model_output` picks the part to run).
        tokenizer: its tokenizer (or image processor, for an image column).
        dataset: the rows; ``dataset[column]`` holds strings (or PIL images).
        views: ``(pooling, layer)`` pairs: ``"mean"``, ``"cls"`` or ``"last"``, and the hidden
            layer to pool (transformers' ``hidden_states`` index; -1 is the last).
        column: the column to encode.
        batch_size: inputs per forward.
        cache_dir: where the embeddings are written (default: the `datasets` cache, under
            ``relrep_hf``), a folder ``relrep-embeddings-<key>`` per view; visible to every
            process.
        accelerator: shards the work across its processes; ``None`` runs in this process.
        encoder_id, encoder_revision: the encoder's Hub id and commit for the cache key, when
            the loaded model does not tell them (see `encoders.encoder_provenance`).
        max_length: tokens to truncate at; default `encoding.max_input_length`.
        window_size: rows sorted and encoded together (default ``64 * batch_size``).
        show_progress: a progress bar (per batch, naming the encoder and the views) on the
            main process; default for 1024 rows or more.

    Returns:
        Per view, ``dataset`` with an ``embedding`` column (float32, fixed length d) appended.
    """
    views = [(pooling, layer) for pooling, layer in views]
    if not views:
        raise ValueError("views is empty: give at least one (pooling, layer).")
    for pooling, _ in views:
        validate_pooling(pooling)
    if not isinstance(dataset, datasets.Dataset):
        raise ValueError(
            f"Expected a datasets.Dataset, got {type(dataset).__name__}. Wrap lists with "
            f"datasets.Dataset.from_dict({{'text': texts}})."
        )
    if column not in dataset.column_names:
        raise ValueError(
            f"Column {column!r} is not in the dataset, whose columns are {dataset.column_names}."
        )
    if "embedding" in dataset.column_names:
        raise ValueError(
            "The dataset already has an 'embedding' column; remove or rename it first "
            "(dataset.remove_columns('embedding'))."
        )
    if len(dataset) == 0:
        raise ValueError("The dataset is empty: there is nothing to encode.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    window_size = DEFAULT_WINDOW_BATCHES * batch_size if window_size is None else window_size
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
        raise ValueError(f"window_size must be a positive int, got {window_size!r}.")
    if input_modality(encoder) == "text" and max_length is None:
        max_length = max_input_length(tokenizer, encoder)

    root = (
        Path(cache_dir)
        if cache_dir is not None
        else Path(datasets.config.HF_DATASETS_CACHE) / "relrep_hf"
    )
    folders = [
        root
        / "relrep-embeddings-{}".format(
            extraction_cache_key(
                encoder,
                dataset,
                column=column,
                pooling=pooling,
                layer=layer,
                max_length=max_length,
                encoder_id=encoder_id,
                encoder_revision=encoder_revision,
            )
        )
        for pooling, layer in views
    ]
    known_id, known_revision = encoder_provenance(encoder)
    world = accelerator.num_processes if accelerator is not None else 1
    is_main = accelerator is None or accelerator.is_main_process

    # The main process decides, so that every process takes the same branch.
    missing = [i for i, folder in enumerate(folders) if not folder.is_dir()]
    if world > 1:
        from accelerate.utils import broadcast_object_list

        missing = broadcast_object_list([missing], from_process=0)[0]
    missing = list(dict.fromkeys(missing))  # a view given twice is extracted once
    if missing:
        rank = accelerator.process_index if accelerator is not None else 0
        show = len(dataset) >= PROGRESS_MIN_INPUTS if show_progress is None else show_progress
        name = encoder_id or known_id or type(encoder).__name__
        shown = ", ".join(f"{views[i][0]} L{views[i][1]}" for i in missing)
        progress = tqdm(
            total=len(dataset),
            desc=f"Embedding with {name} ({shown})",
            unit="row",
            disable=not (show and is_main),
        )
        info = {
            "encoder_id": encoder_id or known_id,
            "encoder_revision": encoder_revision or known_revision,
            "column": column,
            "max_length": max_length,
            "dataset_fingerprint": dataset._fingerprint,
            "num_rows": len(dataset),
        }
        try:
            _extract_to_folders(
                encoder,
                tokenizer,
                dataset.with_format(None),
                outputs=[
                    (folders[i], {**info, "pooling": views[i][0], "layer": views[i][1]})
                    for i in missing
                ],
                column=column,
                views=[views[i] for i in missing],
                batch_size=batch_size,
                max_length=max_length,
                window_size=window_size,
                world=world,
                rank=rank,
                is_main=is_main,
                progress=progress,
            )
        finally:
            progress.close()
    if accelerator is not None:
        accelerator.wait_for_everyone()
    results = []
    for folder in folders:
        embeddings = datasets.Dataset.from_file(str(folder / "embeddings.arrow"))
        if len(embeddings) != len(dataset):
            raise OSError(
                f"The cached embeddings at {folder} have {len(embeddings)} rows, the dataset "
                f"{len(dataset)}. Delete that folder and extract again."
            )
        results.append(datasets.concatenate_datasets([dataset, embeddings], axis=1))
    return results


def _extract_to_folders(
    encoder: nn.Module,
    tokenizer: Any,
    dataset: datasets.Dataset,
    *,
    outputs: list[tuple[Path, dict[str, Any]]],
    column: str,
    views: list[tuple[Pooling, int]],
    batch_size: int,
    max_length: int | None,
    window_size: int,
    world: int,
    rank: int,
    is_main: bool,
    progress: Any,
) -> None:
    """Encode every window once for all ``views``; the main process writes each view's rows in
    order into its own folder (``outputs``, one per view), then renames the folders."""
    windows = [(s, min(s + window_size, len(dataset))) for s in range(0, len(dataset), window_size)]
    stagings: list[Path] = []
    writers: list[Any] = [None] * len(views)
    if is_main:
        for folder, _ in outputs:
            folder.parent.mkdir(parents=True, exist_ok=True)
            stagings.append(
                Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
            )
    truncated: list[int] = []
    dims: list[int] = [0] * len(views)
    try:
        for step in range(math.ceil(len(windows) / world)):
            index = step * world + rank
            local = None
            if index < len(windows):
                start, end = windows[index]
                pooled, cut = encode_in_order(
                    encoder,
                    tokenizer,
                    dataset[start:end][column],
                    lambda batch: pool_model_outputs(encoder, batch, views),
                    batch_size=batch_size,
                    max_length=max_length,
                    output_device="cpu",
                    output_dtype=torch.float32,
                    progress=progress if is_main else None,  # moves per batch
                    show_progress=False,
                    warn=False,  # one warning for the whole dataset, below
                )
                local = (index, [p.numpy() for p in pooled], [start + i for i in cut])
            if world > 1:
                from accelerate.utils import gather_object

                gathered = gather_object([local])
            else:
                gathered = [local]
            if not is_main:
                continue
            for g_index, arrays, cut in sorted(
                (g for g in gathered if g is not None), key=lambda g: g[0]
            ):
                for v, array in enumerate(arrays):
                    if writers[v] is None:
                        dims[v] = array.shape[1]
                        features = datasets.Features(
                            {"embedding": datasets.List(datasets.Value("float32"), length=dims[v])}
                        )
                        writers[v] = ArrowWriter(
                            features=features, path=str(stagings[v] / "embeddings.arrow")
                        )
                    values = pa.array(np.ascontiguousarray(array, dtype=np.float32).reshape(-1))
                    column_array = pa.FixedSizeListArray.from_arrays(values, dims[v])
                    writers[v].write_table(pa.table({"embedding": column_array}))
                truncated.extend(cut)
                if g_index != index:  # another process's rows (ours moved the bar per batch)
                    progress.update(len(arrays[0]))
        if not is_main:
            return
        for v, ((folder, info), staging) in enumerate(zip(outputs, stagings, strict=True)):
            writers[v].finalize()
            writers[v].close()
            writers[v] = None
            (staging / "extraction.json").write_text(
                json.dumps({**info, "dim": dims[v]}, indent=2) + "\n"
            )
            try:
                os.rename(staging, folder)
            except OSError:
                if not folder.is_dir():
                    raise  # another process wrote the same key meanwhile otherwise: keep theirs
        warn_truncated(truncated, len(dataset), max_length or 0, stacklevel=5)
    finally:
        for writer in writers:
            if writer is not None:
                writer.close()
        for staging in stagings:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)


def embeddings_tensor(dataset: datasets.Dataset, column: str = "embedding") -> Tensor:
    """The ``column`` of an extracted dataset as one float32 tensor ``[N, d]`` in memory.

    For datasets larger than memory, iterate instead:
    ``dataset.with_format("torch").iter(batch_size=4096)``.
    """
    if column not in dataset.column_names:
        raise ValueError(
            f"Column {column!r} is not in the dataset, whose columns are {dataset.column_names}."
        )
    array = dataset.with_format("numpy", columns=[column])[:][column]  # [N, d] for fixed-size rows
    if array.dtype == object:  # rows of varying length cannot form one tensor
        raise ValueError(f"The rows of {column!r} differ in length; expected one embedding size.")
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
