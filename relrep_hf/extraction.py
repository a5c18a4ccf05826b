"""Embedding extraction: the one encoding path of the library, and whole datasets to Arrow.

`encode_in_order` is what `RelativeWrapper.encode` and `extract_embeddings` both run: it checks
the inputs, sorts texts by token length so that a batch holds texts of similar length (little
padding), tokenizes each batch at the model's real input limit (never a config's generation
``max_length``), runs a forward under ``torch.inference_mode()`` with the model in eval mode,
and puts every output row back at its input's position.

`extract_embeddings` runs that path over a `datasets.Dataset`, shards it across the processes of
an `accelerate.Accelerator`, and writes the pooled embeddings incrementally to an Arrow file, so
the number of rows can exceed memory. The file is keyed by what determines its content (encoder,
revision, pooling, layer, dataset fingerprint, column): a second call with the same key reads it
back without running the encoder.

Read top to bottom: inputs and modality, the encoding core, provenance and cache keys, dataset
extraction.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import datasets
import numpy as np
import pyarrow as pa
import torch
from datasets.arrow_writer import ArrowWriter
from torch import Tensor, nn
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from relrep_hf.hub_files import is_commit_hash, loaded_provenance
from relrep_hf.pooling import max_input_length, pool_model_outputs, tokenize, validate_pooling

__all__ = [
    "embeddings_tensor",
    "encode_in_order",
    "encoder_provenance",
    "extract_embedding_views",
    "extract_embeddings",
    "extraction_cache_key",
    "input_modality",
    "warn_truncated",
]

InputModality = Literal["text", "image"]

# Inputs at or above this count get a progress bar unless `show_progress` says otherwise.
PROGRESS_MIN_INPUTS = 1024
# Rows of a dataset encoded (and length-sorted) together; each process holds one window at a time.
DEFAULT_WINDOW_BATCHES = 64
# Bumped when the layout of the extraction cache changes, so old files are never read back.
_CACHE_FORMAT = 1


# ---------------------------------------------------------------------------------------------
# Inputs and modality
# ---------------------------------------------------------------------------------------------


def input_modality(encoder: nn.Module) -> InputModality:
    """``"image"`` for models that read ``pixel_values`` (ViT, DINOv2, ...), else ``"text"``."""
    return "image" if getattr(encoder, "main_input_name", None) == "pixel_values" else "text"


def _check_inputs(inputs: Iterable[Any], modality: InputModality) -> list[Any]:
    """``inputs`` as a list, or a ValueError naming the first input that cannot be encoded."""
    kind = "strings" if modality == "text" else "PIL images"
    if isinstance(inputs, (str, bytes, Mapping, Tensor)) or not isinstance(inputs, Iterable):
        raise ValueError(
            f"Expected a list of {kind}, got {type(inputs).__name__}. Wrap a single input in a "
            f"list: encode([x])."
        )
    items = list(inputs)
    if not items:
        raise ValueError(f"Expected a non-empty list of {kind}, got an empty list.")
    if modality == "text":
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise ValueError(
                    f"Input {i} is a {type(item).__name__}, not a string: a text model encodes "
                    f"lists of strings. Convert or drop it ({item!r:.60})."
                )
    else:
        from PIL import Image

        for i, item in enumerate(items):
            if not isinstance(item, Image.Image):
                raise ValueError(
                    f"Input {i} is a {type(item).__name__}, not a PIL image: an image model "
                    f"encodes lists of PIL images (open files with PIL.Image.open)."
                )
    return items


# ---------------------------------------------------------------------------------------------
# The encoding core
# ---------------------------------------------------------------------------------------------


def encode_in_order(
    encoder: nn.Module,
    preprocessor: Any,
    inputs: Iterable[Any],
    forward: Callable[[Mapping[str, Tensor]], tuple[Tensor, ...]],
    *,
    batch_size: int = 32,
    max_length: int | None = None,
    eval_modules: Sequence[nn.Module] = (),
    progress: Any = None,
    output_device: torch.device | str | None = None,
    output_dtype: torch.dtype | None = None,
) -> tuple[tuple[Tensor, ...], list[int]]:
    """Run ``forward`` over ``inputs`` in length-sorted batches; outputs in input order.

    Args:
        encoder: the model; it sets the modality (texts or images), the device the batches are
            moved to, and the dtype of floating inputs (``pixel_values``).
        preprocessor: the encoder's tokenizer, or its image processor for image models.
        inputs: a non-empty list (or other iterable) of strings, or of PIL images.
        forward: called on each tokenized batch (on the encoder's device), returns a tuple of
            tensors whose first dimension is the batch.
        batch_size: inputs per forward.
        max_length: tokens to truncate texts at; default `pooling.max_input_length`.
        eval_modules: modules besides ``encoder`` to hold in eval mode during the run.
        progress: an object with ``update(n)`` (a tqdm bar), told of every finished batch.
        output_device, output_dtype: where the returned tensors live (default: as ``forward``
            returns them).

    Returns:
        The outputs ``[N, ...]`` in the order of ``inputs``, and the (sorted) indices of the
        inputs that were truncated (see `warn_truncated`).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    modality = input_modality(encoder)
    items = _check_inputs(inputs, modality)
    if modality == "text":
        if not isinstance(preprocessor, PreTrainedTokenizerBase):
            raise ValueError(
                f"{type(encoder).__name__} reads text, but the preprocessor is a "
                f"{type(preprocessor).__name__}. Pass the model's tokenizer "
                f"(AutoTokenizer.from_pretrained(...))."
            )
        if max_length is None:
            max_length = max_input_length(preprocessor, encoder)
        lengths = _token_lengths(preprocessor, items)
        # Longest first: a batch that does not fit in memory fails at once, not at the end.
        order = sorted(range(len(items)), key=lambda i: -lengths[i])
    else:
        order = list(range(len(items)))

    device, dtype = _device_and_dtype(encoder)
    outputs: list[Tensor] = []
    truncated: list[int] = []
    with torch.inference_mode(), _eval_mode(encoder, *eval_modules):
        for start in range(0, len(order), batch_size):
            positions = order[start : start + batch_size]
            batch_items = [items[i] for i in positions]
            if modality == "text":
                batch, cut = tokenize(preprocessor, batch_items, max_length)
                truncated.extend(positions[i] for i in cut)
            else:
                batch = preprocessor(images=batch_items, return_tensors="pt")
            batch = {key: _to_model(value, device, dtype) for key, value in batch.items()}
            results = forward(batch)
            if not outputs:
                outputs = [
                    torch.empty(
                        (len(items), *r.shape[1:]),
                        dtype=output_dtype or r.dtype,
                        device=output_device or r.device,
                    )
                    for r in results
                ]
            for output, result in zip(outputs, results, strict=True):
                index = torch.tensor(positions, device=output.device)
                output[index] = result.to(device=output.device, dtype=output.dtype)
            if progress is not None:
                progress.update(len(positions))
    return tuple(outputs), sorted(truncated)


def warn_truncated(
    truncated: Sequence[int], total: int, max_length: int, stacklevel: int = 3
) -> None:
    """One warning for all the inputs that were truncated, e.g. "3 of 100 inputs were ..."."""
    if not truncated:
        return
    shown = ", ".join(str(i) for i in list(truncated)[:5])
    more = ", ..." if len(truncated) > 5 else ""
    warnings.warn(
        f"{len(truncated)} of {total} inputs were longer than {max_length} tokens and were "
        f"truncated (inputs {shown}{more}). Their embeddings describe the first {max_length} "
        f"tokens only; split long texts to embed all of them.",
        UserWarning,
        stacklevel=stacklevel,
    )


def _token_lengths(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[int]:
    """Tokens per text, special tokens included, before truncation; empty results are errors."""
    ids = tokenizer(texts, padding=False, truncation=False, verbose=False)["input_ids"]
    lengths = [len(row) for row in ids]
    empty = [i for i, n in enumerate(lengths) if n == 0]
    if empty:
        raise ValueError(
            f"Inputs {empty[:5]} tokenize to no tokens at all (empty strings?), so there is "
            f"nothing to pool. Drop them before encoding."
        )
    return lengths


def _device_and_dtype(model: nn.Module) -> tuple[torch.device, torch.dtype | None]:
    """The device inputs go to and the floating dtype of the model's first parameter."""
    for parameter in model.parameters():
        return parameter.device, parameter.dtype if parameter.is_floating_point() else None
    return torch.device("cpu"), None


def _to_model(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    """A batch tensor on the model's device; floating ones (pixels) in the model's dtype."""
    if not isinstance(value, Tensor):
        return value
    if value.is_floating_point() and dtype is not None:
        return value.to(device=device, dtype=dtype)
    return value.to(device)


@contextmanager
def _eval_mode(*modules: nn.Module) -> Iterator[None]:
    """Every submodule in eval mode (no dropout) for the block; each one's mode restored after."""
    modes = [(module, module.training) for root in modules for module in root.modules()]
    for module, _ in modes:
        module.training = False
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


# ---------------------------------------------------------------------------------------------
# Provenance and cache keys
# ---------------------------------------------------------------------------------------------


def encoder_provenance(encoder: nn.Module) -> tuple[str, str]:
    """The encoder's Hub id and commit as far as the loaded model tells, ``""`` when unknown.

    A model loaded from a Hub id carries that id (``config.name_or_path``) and the commit
    transformers loaded (``config._commit_hash``); one loaded from the Hub cache's snapshot
    folder carries both in its path. A local folder is not an id: it gives ``("", "")``, so
    local paths are never recorded as base-model ids (`relrep_hf.hub_files.loaded_provenance`).
    """
    config = getattr(encoder, "config", None)
    name = str(getattr(config, "name_or_path", "") or "")
    return loaded_provenance(name, getattr(config, "_commit_hash", None))


def extraction_cache_key(
    encoder: nn.Module,
    dataset: datasets.Dataset,
    *,
    column: str,
    pooling: str,
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
        "dtype": str(_device_and_dtype(encoder)[1]),
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


def extract_embeddings(
    encoder: nn.Module,
    tokenizer: Any,
    dataset: datasets.Dataset,
    *,
    column: str = "text",
    pooling: str,
    layer: int = -1,
    batch_size: int = 64,
    cache_dir: str | os.PathLike | None = None,
    accelerator: Any = None,
    encoder_id: str | None = None,
    encoder_revision: str | None = None,
    max_length: int | None = None,
    window_size: int | None = None,
    show_progress: bool | None = None,
) -> datasets.Dataset:
    """Pooled embeddings of a dataset column, as an Arrow-backed dataset cached on disk.

    One view (pooling, layer) of `extract_embedding_views`, which reads several from one pass.

    The rows are encoded exactly as `RelativeWrapper.encode` encodes them (same batching,
    tokenization and pooling). With an `accelerate.Accelerator`, windows of rows go round-robin
    to its processes; each step gathers one window per process in input order and only the main
    process writes, batch by batch, so memory holds one window per process whatever the dataset
    size. ``cache_dir`` must be visible to every process.

    Args:
        encoder: any transformers model (`pooling.pool_model_output` picks the part to run).
        tokenizer: its tokenizer (or image processor, for an image column).
        dataset: the rows; ``dataset[column]`` holds strings (or PIL images).
        column: the column to encode.
        pooling: ``"mean"``, ``"cls"`` or ``"last"``.
        layer: the hidden layer to pool (transformers' ``hidden_states`` index; -1 is the last).
        batch_size: inputs per forward.
        cache_dir: where the embeddings are written (default: the `datasets` cache, under
            ``relrep_hf``); a folder ``relrep-embeddings-<key>`` per cache key.
        accelerator: shards the work across its processes; ``None`` runs in this process.
        encoder_id, encoder_revision: the encoder's Hub id and commit for the cache key, when
            the loaded model does not tell them (see `encoder_provenance`).
        max_length: tokens to truncate at; default `pooling.max_input_length`.
        window_size: rows sorted and encoded together (default ``64 * batch_size``).
        show_progress: a progress bar on the main process; default for 1024 rows or more.

    Returns:
        ``dataset`` with an ``embedding`` column (float32, fixed length d) appended, rows in
        input order; `embeddings_tensor` gives them as one ``[N, d]`` tensor.

    Example:
        >>> from relrep_hf.corpora import load_sentences
        >>> sentences = load_sentences(256)
        >>> embedded = extract_embeddings(model, tokenizer, sentences, pooling="mean")  # doctest: +SKIP
        >>> embeddings_tensor(embedded).shape  # doctest: +SKIP
        torch.Size([256, 384])
    """
    return extract_embedding_views(
        encoder,
        tokenizer,
        dataset,
        views=[(pooling, layer)],
        column=column,
        batch_size=batch_size,
        cache_dir=cache_dir,
        accelerator=accelerator,
        encoder_id=encoder_id,
        encoder_revision=encoder_revision,
        max_length=max_length,
        window_size=window_size,
        show_progress=show_progress,
    )[0]


def extract_embedding_views(
    encoder: nn.Module,
    tokenizer: Any,
    dataset: datasets.Dataset,
    *,
    views: Sequence[tuple[str, int]],
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
    """`extract_embeddings` for several ``(pooling, layer)`` views of one encoder, in one pass.

    Each view has its own cache folder (the same one `extract_embeddings` uses); the views not
    cached yet are extracted together, one forward per batch serving all of them. The progress
    bar moves per batch and names the encoder and the views.
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
    views: list[tuple[str, int]],
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
