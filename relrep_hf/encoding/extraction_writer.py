"""Writing extracted embeddings: one encoder pass over a dataset, sharded, into Arrow files.

`extraction.extract_embedding_views` decides what to extract and where (the cache keys, the
folders); this module does the work for the views not cached yet. The dataset is cut into
windows that go round-robin to the processes of an `accelerate.Accelerator`; each window is
encoded once for every view (`encoding.encode_in_order`), the windows are gathered in input
order and only the main process writes them, batch by batch, to a staging folder per view that
is renamed into place at the end. Memory holds one window per process whatever the dataset size
(two on an accelerator, where a window is written in a thread while the next one is encoded:
the device does not wait for the disk).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import datasets
import numpy as np
import pyarrow as pa
from datasets.arrow_writer import ArrowWriter

if TYPE_CHECKING:  # torch loads with the first model encoded here, not with the cache's folders:
    # a callable encoder's rows are written without it (a Ray actor, a re-embed child)
    from torch import nn

    from relrep_hf.encoding.pooling import Pooling

__all__ = [
    "EmbeddingsFolder",
    "ExtractionRun",
    "cache_root",
    "check_column",
    "extract_to_folders",
    "write_embeddings",
]


def cache_root(cache_dir: str | os.PathLike | None) -> Path:
    """Where embedding cache folders go: ``cache_dir``, else the `datasets` cache's ``relrep_hf``."""
    if cache_dir is not None:
        return Path(cache_dir)
    return Path(datasets.config.HF_DATASETS_CACHE) / "relrep_hf"


def check_column(dataset: datasets.Dataset, column: str) -> None:
    """A ValueError naming the dataset's columns unless it has ``column``."""
    if column not in dataset.column_names:
        raise ValueError(
            f"Column {column!r} is not in the dataset, whose columns are {dataset.column_names}."
        )


class EmbeddingsFolder:
    """One cache folder written atomically: ``[n, d]`` arrays appended in row order to
    ``embeddings.arrow`` in a staging folder beside it, then ``extraction.json``, then the
    staging folder renamed into place (`finish`); `close` removes what is left of it."""

    def __init__(self, folder: Path) -> None:
        folder.parent.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        self.writer: ArrowWriter | None = None
        self.dim = 0

    def write(self, array: np.ndarray) -> None:
        if self.writer is None:
            self.dim = array.shape[1]
            features = datasets.Features(
                {"embedding": datasets.List(datasets.Value("float32"), length=self.dim)}
            )
            self.writer = ArrowWriter(
                features=features, path=str(self.staging / "embeddings.arrow")
            )
        values = pa.array(np.ascontiguousarray(array, dtype=np.float32).reshape(-1))
        rows = pa.FixedSizeListArray.from_arrays(values, self.dim)
        self.writer.write_table(pa.table({"embedding": rows}))

    def finish(self, info: dict[str, Any]) -> None:
        self.writer.finalize()
        self.writer.close()
        self.writer = None
        (self.staging / "extraction.json").write_text(
            json.dumps({**info, "dim": self.dim}, indent=2) + "\n"
        )
        try:
            os.rename(self.staging, self.folder)
        except OSError:
            if not self.folder.is_dir():
                raise  # another process wrote the same key meanwhile otherwise: keep theirs

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        shutil.rmtree(self.staging, ignore_errors=True)


def write_embeddings(folder: Path, batches: Any, info: dict[str, Any]) -> None:
    """Write ``[n, d]`` arrays, in order, to ``folder/embeddings.arrow`` with
    ``extraction.json`` beside it (atomically: a staging folder renamed at the end)."""
    output = EmbeddingsFolder(folder)
    try:
        for array in batches:
            output.write(array)
        output.finish(info)
    finally:
        output.close()


@dataclass(frozen=True)
class ExtractionRun:
    """How one extraction runs: the column and views, the batching, truncation and windows,
    and this process's place among ``world`` (only the main process writes)."""

    column: str
    views: list[tuple[Pooling, int]]
    batch_size: int
    max_length: int | None
    window_size: int
    world: int = 1
    rank: int = 0
    is_main: bool = True
    # a window written in a thread while the next one is encoded; None: on an accelerator (the
    # device should not wait for the disk), not on the CPU (the forward wants every core)
    write_behind: bool | None = None


def extract_to_folders(
    encoder: nn.Module,
    tokenizer: Any,
    dataset: datasets.Dataset,
    run: ExtractionRun,
    outputs: list[tuple[Path, dict[str, Any]]],
    progress: Any,
) -> None:
    """Encode every window once for all ``run.views``; the main process writes each view's rows
    in order into its own folder (``outputs``: one folder and its info per view)."""
    from relrep_hf.encoding.batches import warn_truncated
    from relrep_hf.encoding.models import device_and_dtype

    size = run.window_size
    windows = [(s, min(s + size, len(dataset))) for s in range(0, len(dataset), size)]
    folders = [EmbeddingsFolder(folder) for folder, _ in outputs] if run.is_main else []
    writes: list[Future[list[int]]] = []
    write_behind = run.write_behind
    if write_behind is None:
        write_behind = device_and_dtype(encoder)[0].type != "cpu"
    behind = ThreadPoolExecutor(1, "relrep-write") if write_behind else nullcontext()
    try:
        with behind as writer:
            for step in range(math.ceil(len(windows) / run.world)):
                index = step * run.world + run.rank
                local = None
                if index < len(windows):
                    local = _encode_window(
                        encoder, tokenizer, dataset, run, windows[index], progress
                    )
                gathered = _gather((index, *local) if local else None, run.world)
                if run.is_main:
                    if writes and writer is not None:
                        writes[-1].result()  # one window written behind at a time (memory)
                    writes.append(_write(writer, gathered, folders, index, progress))
        truncated = [i for write in writes for i in write.result()]  # a write's error here
        if not run.is_main:
            return
        for folder, (_, info) in zip(folders, outputs, strict=True):
            folder.finish(info)
        warn_truncated(truncated, len(dataset), run.max_length or 0, stacklevel=5)
    finally:
        for folder in folders:
            folder.close()


def _write(
    writer: ThreadPoolExecutor | None,
    gathered: list[Any],
    folders: list[EmbeddingsFolder],
    index: int,
    progress: Any,
) -> Future[list[int]]:
    """`_write_gathered` in ``writer``'s thread (windows in order), or here and now."""
    if writer is not None:
        return writer.submit(_write_gathered, gathered, folders, index, progress)
    done: Future[list[int]] = Future()
    done.set_result(_write_gathered(gathered, folders, index, progress))
    return done


def _encode_window(
    encoder: nn.Module,
    tokenizer: Any,
    dataset: datasets.Dataset,
    run: ExtractionRun,
    window: tuple[int, int],
    progress: Any,
) -> tuple[list[np.ndarray], list[int]]:
    """The pooled rows of one window for every view, and the truncated rows (dataset indices)."""
    import torch

    from relrep_hf.encoding.batches import encode_in_order
    from relrep_hf.encoding.pooling import pool_model_outputs

    start, end = window
    pooled, cut = encode_in_order(
        encoder,
        tokenizer,
        dataset[start:end][run.column],
        lambda batch: pool_model_outputs(encoder, batch, run.views),
        batch_size=run.batch_size,
        max_length=run.max_length,
        output_device="cpu",
        output_dtype=torch.float32,
        progress=progress if run.is_main else None,  # moves per batch
        show_progress=False,
        warn=False,  # one warning for the whole dataset, at the end
    )
    return [p.numpy() for p in pooled], [start + i for i in cut]


def _gather(local: Any, world: int) -> list[Any]:
    """Every process's ``local``, in process order."""
    if world == 1:
        return [local]
    from accelerate.utils import gather_object

    return gather_object([local])


def _write_gathered(
    gathered: list[Any], folders: list[EmbeddingsFolder], index: int, progress: Any
) -> list[int]:
    """Write the gathered windows in input order; their truncated rows."""
    truncated: list[int] = []
    for g_index, arrays, cut in sorted((g for g in gathered if g is not None), key=lambda g: g[0]):
        for folder, array in zip(folders, arrays, strict=True):
            folder.write(array)
        truncated.extend(cut)
        if g_index != index:  # another process's rows (ours moved the bar per batch)
            progress.update(len(arrays[0]))
    return truncated
