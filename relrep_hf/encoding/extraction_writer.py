"""Writing extracted embeddings: one encoder pass over a dataset, sharded, into Arrow files.

`extraction.extract_embedding_views` decides what to extract and where (the cache keys, the
folders); this module does the work for the views not cached yet. The dataset is cut into
windows that go round-robin to the processes of an `accelerate.Accelerator`; each window is
encoded once for every view (`encoding.encode_in_order`), the windows are gathered in input
order and only the main process writes them, batch by batch, to a staging folder per view that
is renamed into place at the end. Memory holds one window per process whatever the dataset size.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import torch
from datasets.arrow_writer import ArrowWriter
from torch import nn

from relrep_hf.encoding import Pooling, encode_in_order, pool_model_outputs, warn_truncated

__all__ = ["extract_to_folders"]


def extract_to_folders(
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
