"""Embedding extraction: whole datasets to Arrow files, cached on disk, sharded with accelerate.

`extract_embedding_views` runs the library's one encoding loop (`encoding.encode_in_order`, the
one `RelativeWrapper.encode` runs) over a `datasets.Dataset`, shards it across the processes of
an `accelerate.Accelerator`, and writes the pooled embeddings incrementally to an Arrow file per
``(pooling, layer)`` view, so the number of rows can exceed memory. Each file is keyed by what
determines its content (encoder, revision, pooling, layer, dataset fingerprint, column): a
second call with the same key reads it back without running the encoder. `extract_embeddings`
is the one-view case. The encoding and writing themselves are `extraction_writer`'s.

Read top to bottom: cache keys, dataset extraction, reading embeddings back.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import datasets
import numpy as np
import torch
from torch import Tensor, nn

from relrep_hf.encoding.batches import max_input_length
from relrep_hf.encoding.encoders import encoder_provenance
from relrep_hf.encoding.extraction_writer import (
    ExtractionRun,
    cache_root,
    check_column,
    extract_to_folders,
)
from relrep_hf.encoding.models import device_and_dtype, input_modality
from relrep_hf.encoding.pooling import Pooling, validate_pooling
from relrep_hf.encoding.progress import progress_bar
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
CACHE_FORMAT = 1


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
    keys = CacheKeyParts(column, max_length, encoder_id, encoder_revision)
    return _view_keys(encoder, dataset, keys, [(pooling, layer)])[0]


def _view_keys(
    encoder: nn.Module,
    dataset: datasets.Dataset,
    keys: CacheKeyParts,
    views: Sequence[tuple[Pooling, int]],
) -> list[str]:
    """`extraction_cache_key` of each view; what the views share (the weights' hash, read
    from every parameter of the encoder) is computed once."""
    known_id, known_revision = encoder_provenance(encoder)
    encoder_revision = keys.encoder_revision or known_revision
    parts = {
        "format": CACHE_FORMAT,
        "encoder_id": keys.encoder_id
        or known_id
        or str(getattr(encoder.config, "name_or_path", "")),
        "encoder_revision": encoder_revision,
        "encoder_class": type(encoder).__name__,
        "dtype": str(device_and_dtype(encoder)[1]),
        "max_length": keys.max_length,
        "dataset": dataset._fingerprint,
        "column": keys.column,
    }
    if not is_commit_hash(encoder_revision):
        parts["weights"] = _weights_hash(encoder)
    hashes = []
    for pooling, layer in views:
        payload = json.dumps({**parts, "pooling": pooling, "layer": layer}, sort_keys=True)
        hashes.append(hashlib.sha256(payload.encode()).hexdigest()[:32])
    return hashes


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
            main process; default: once the work has taken a few seconds
            (`progress.PROGRESS_DELAY_SECONDS`).

    Returns:
        Per view, ``dataset`` with an ``embedding`` column (float32, fixed length d) appended.
    """
    views = [(pooling, layer) for pooling, layer in views]
    window_size = _check_options(dataset, views, column, batch_size, window_size)
    if input_modality(encoder) == "text" and max_length is None:
        max_length = max_input_length(tokenizer, encoder)
    keys = CacheKeyParts(column, max_length, encoder_id, encoder_revision)
    folders = [
        cache_root(cache_dir) / f"relrep-embeddings-{key}"
        for key in _view_keys(encoder, dataset, keys, views)
    ]
    missing = _missing(folders, accelerator)
    if missing:
        run = ExtractionRun(
            column,
            [views[i] for i in missing],
            batch_size,
            max_length,
            window_size,
            world=accelerator.num_processes if accelerator is not None else 1,
            rank=accelerator.process_index if accelerator is not None else 0,
            is_main=accelerator is None or accelerator.is_main_process,
        )
        progress = _progress_bar(encoder, dataset, run, encoder_id, show_progress)
        try:
            outputs = [(folders[i], _info(encoder, dataset, keys, views[i])) for i in missing]
            extract_to_folders(
                encoder, tokenizer, dataset.with_format(None), run, outputs, progress
            )
        finally:
            progress.close()
    if accelerator is not None:
        accelerator.wait_for_everyone()
    return [read_extracted(folder, dataset) for folder in folders]


@dataclass(frozen=True)
class CacheKeyParts:
    """What besides the encoder, rows and view determines an extraction: the column, the
    truncation and the encoder's id and revision as given (``None``: as the model tells)."""

    column: str
    max_length: int | None
    encoder_id: str | None
    encoder_revision: str | None


def _check_options(
    dataset: datasets.Dataset,
    views: list[tuple[Pooling, int]],
    column: str,
    batch_size: int,
    window_size: int | None,
) -> int:
    """A ValueError for options that cannot be extracted; the window size decided."""
    if not views:
        raise ValueError("views is empty: give at least one (pooling, layer).")
    for pooling, _ in views:
        validate_pooling(pooling)
    if not isinstance(dataset, datasets.Dataset):
        raise ValueError(
            f"Expected a datasets.Dataset, got {type(dataset).__name__}. Wrap lists with "
            f"datasets.Dataset.from_dict({{'text': texts}})."
        )
    check_column(dataset, column)
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
    return window_size


def _missing(folders: list[Path], accelerator: Any) -> list[int]:
    """The views whose folder is not written yet, each once, as the main process sees them (so
    that every process takes the same branch)."""
    missing = [i for i, folder in enumerate(folders) if not folder.is_dir()]
    if accelerator is not None and accelerator.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        missing = broadcast_object_list([missing], from_process=0)[0]
    return list(dict.fromkeys(missing))  # a view given twice is extracted once


def _progress_bar(
    encoder: nn.Module,
    dataset: datasets.Dataset,
    run: ExtractionRun,
    encoder_id: str | None,
    show_progress: bool | None,
) -> Any:
    """A bar on the main process naming the encoder and the views extracted."""
    name = encoder_id or encoder_provenance(encoder)[0] or type(encoder).__name__
    shown = ", ".join(f"{pooling} L{layer}" for pooling, layer in run.views)
    return progress_bar(
        len(dataset),
        show_progress,
        main=run.is_main,
        desc=f"Embedding with {name} ({shown})",
        unit="row",
    )


def _info(
    encoder: nn.Module, dataset: datasets.Dataset, keys: CacheKeyParts, view: tuple[Pooling, int]
) -> dict[str, Any]:
    """A view's ``extraction.json``: what it was extracted from and how."""
    known_id, known_revision = encoder_provenance(encoder)
    return {
        "encoder_id": keys.encoder_id or known_id,
        "encoder_revision": keys.encoder_revision or known_revision,
        "column": keys.column,
        "max_length": keys.max_length,
        "dataset_fingerprint": dataset._fingerprint,
        "num_rows": len(dataset),
        "pooling": view[0],
        "layer": view[1],
    }


def read_extracted(folder: Path, dataset: datasets.Dataset) -> datasets.Dataset:
    """``dataset`` with the ``embedding`` column of the cache folder ``folder`` (one view
    extracted from it), checked row for row."""
    embeddings = datasets.Dataset.from_file(str(folder / "embeddings.arrow"))
    if len(embeddings) != len(dataset):
        raise OSError(
            f"The cached embeddings at {folder} have {len(embeddings)} rows, the dataset "
            f"{len(dataset)}. Delete that folder and extract again."
        )
    return datasets.concatenate_datasets([dataset, embeddings], axis=1)


def embeddings_tensor(dataset: datasets.Dataset, column: str = "embedding") -> Tensor:
    """The ``column`` of an extracted dataset as one float32 tensor ``[N, d]`` in memory.

    For datasets larger than memory, iterate instead:
    ``dataset.with_format("torch").iter(batch_size=4096)``.
    """
    check_column(dataset, column)
    array = dataset.with_format("numpy", columns=[column])[:][column]  # [N, d] for fixed-size rows
    if array.dtype == object:  # rows of varying length cannot form one tensor
        raise ValueError(f"The rows of {column!r} differ in length; expected one embedding size.")
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
