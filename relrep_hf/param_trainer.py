"""`ParamTrainer`: learn PARAM anchors across encoders, driven by accelerate.

Embeddings of several encoders for the same N inputs go in; an `AnchorSet` comes
out. The loop follows the paper (Appendix A, Table 5) and HF Trainer conventions:
an arguments dataclass, ``train()``, a progress bar with the loss terms, a log
history, checkpoints that ``train(resume_from_checkpoint=True)`` picks up.

What makes it cheap: whitening statistics are estimated once (float64, streamed,
reduced across processes); whitening is affine and the rows of P sum to one, so the
whitened anchors are ``P @ whitened(X_sub)`` with the whitened support computed once;
embeddings held in memory are whitened once, not every epoch (a float32 copy: pass a
`datasets.Dataset` to keep memory bounded); each encoder's cross products ``x_w a_w^T``
serve both the coverage and the relative features; every loss term returns its gradient
from its forward pass (`relrep_hf.fused_losses`), and AdamW is fused. ``bf16=True`` runs
the two products with the support in bfloat16. Under ``torchrun``
each process takes a contiguous shard of every global batch, gradients are averaged
by DDP, and InfoNCE sees the whole global batch through a differentiable gather, so
two processes train the same anchors as one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.distributed.nn.functional as distributed_functional
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import Tensor, nn
from tqdm.auto import tqdm

from relrep_hf.anchor_set import AnchorSet
from relrep_hf.anchor_strategies import sample_support_rows
from relrep_hf.io import fsync_directory, make_durable
from relrep_hf.losses import param_loss
from relrep_hf.metrics import retrieval_metrics
from relrep_hf.param_arguments import ParamTrainingArguments
from relrep_hf.statistics import Statistics, all_reduce, whiten, whitening_matrix
from relrep_hf.validation import as_embeddings

logger = logging.getLogger(__name__)

STATE_NAME = "trainer_state.json"
# Arguments that do not change the result: a resumed run may change them.
_RESUMABLE_CHANGES = {
    "output_dir",
    "num_train_epochs",
    "logging_steps",
    "save_strategy",
    "save_steps",
    "save_total_limit",
    "disable_tqdm",
    "report_to",
    "statistics_batch_size",
}


class _Mixture(nn.Module):
    """The learned logits; forward gives every encoder's whitened anchors ``P @ W_sub``."""

    def __init__(self, logits: Tensor, temperature: float, dims: list[int]):
        super().__init__()
        self.logits = nn.Parameter(logits)
        self.temperature = temperature
        self.dims = dims

    def mixture(self) -> Tensor:
        return torch.softmax(self.logits / self.temperature, dim=1)  # [m, K]

    def forward(self, whitened_support: Tensor) -> list[Tensor]:
        # One GEMM for all encoders: whitened_support is [K, sum d_i]. A bfloat16 support
        # (``bf16=True``) makes it and its backward bfloat16 GEMMs; the anchors come back float32.
        mixture = self.mixture()
        anchors = (mixture.to(whitened_support.dtype) @ whitened_support).to(mixture.dtype)
        return list(anchors.split(self.dims, dim=1))


class _Embeddings:
    """Row access to parallel embeddings held as tensors or as `datasets` columns."""

    def __init__(
        self, embeddings: Mapping[str, Tensor] | datasets.Dataset, columns: Sequence[str] | None
    ):
        if isinstance(embeddings, datasets.Dataset):
            self.names = list(
                columns or [c for c in embeddings.column_names if c not in ("text", "label")]
            )
            missing = [c for c in self.names if c not in embeddings.column_names]
            if missing:
                raise ValueError(
                    f"The dataset has no columns {missing}; it has {embeddings.column_names}."
                )
            # Arrow batches viewed as numpy: several times faster than the torch formatter.
            self.dataset = embeddings.with_format("arrow", columns=self.names)
            self.tensors = None
            self.length = len(embeddings)
            first = self.dataset[0:1]
            self.dims = [_matrix(first, name).shape[1] for name in self.names]
        else:
            if not isinstance(embeddings, Mapping) or not embeddings:
                raise ValueError(
                    "embeddings must be a non-empty mapping {encoder name: Tensor [N, d]} or a datasets.Dataset."
                )
            self.names = list(embeddings)
            # NumPy arrays and lists of floats as tensors (NumPy shared without a copy)
            embeddings = {
                n: as_embeddings(e, name=f"embeddings of {n!r}") for n, e in embeddings.items()
            }
            self.tensors = embeddings
            self.dataset = None
            counts = {name: t.shape[0] for name, t in embeddings.items()}
            if len(set(counts.values())) != 1:
                raise ValueError(
                    f"Every encoder must embed the same N inputs (parallel rows), got {counts}."
                )
            for name, t in embeddings.items():
                if t.ndim != 2:
                    raise ValueError(
                        f"Embeddings of {name!r} must be [N, d], got {tuple(t.shape)}."
                    )
            self.length = next(iter(counts.values()))
            self.dims = [embeddings[name].shape[1] for name in self.names]

    def rows(self, indices: Tensor) -> list[Tensor]:
        if self.tensors is not None:
            return [self.tensors[name][indices] for name in self.names]
        batch = self.dataset[indices.tolist()]
        return [_matrix(batch, name) for name in self.names]

    def whitened(
        self, means: list[Tensor], whitenings: list[Tensor], device: torch.device, chunk: int
    ) -> Callable[[Tensor], list[Tensor]]:
        """Row access in whitened float32 coordinates. Every epoch reads every row, so
        embeddings held in memory are whitened once, ``chunk`` rows at a time; a dataset's
        rows are whitened batch by batch as they are read."""
        if self.tensors is None:
            return lambda indices: [
                whiten(rows.to(device, torch.float32), mean=mu, whitening=w)
                for rows, mu, w in zip(self.rows(indices), means, whitenings, strict=True)
            ]
        whitened = []
        for name, mu, w in zip(self.names, means, whitenings, strict=True):
            source = self.tensors[name]
            # on the embeddings' own device: only batches travel to the training device
            mu, w = mu.to(source.device), w.to(source.device)
            out = torch.empty(source.shape, dtype=torch.float32, device=source.device)
            for start in range(0, self.length, chunk):
                rows = source[start : start + chunk].float() - mu
                torch.matmul(rows, w, out=out[start : start + chunk])  # whiten(), in place
            whitened.append(out)
        return lambda indices: [t.index_select(0, indices).to(device) for t in whitened]

    def statistics(self, batch_size: int, rank: int, world: int) -> list[Statistics]:
        """Each encoder's statistics over all rows; each process reads a contiguous shard."""
        per_rank = math.ceil(self.length / world)
        start, stop = rank * per_rank, min(self.length, (rank + 1) * per_rank)
        stats = [Statistics.empty(d) for d in self.dims]
        for chunk_start in range(start, stop, batch_size):
            indices = torch.arange(chunk_start, min(stop, chunk_start + batch_size))
            for i, (name, rows) in enumerate(zip(self.names, self.rows(indices), strict=True)):
                try:
                    stats[i] = stats[i].update(rows)
                except ValueError as error:
                    raise ValueError(
                        f"Encoder {name!r}, rows {chunk_start}..{indices[-1].item()}: {error}"
                    ) from error
        return [all_reduce(s) for s in stats]


def _matrix(table: pa.Table, column: str) -> Tensor:
    """A list-of-floats Arrow column as a float32 tensor [rows, d]."""
    array = table.column(column).combine_chunks()
    lengths = pc.min_max(pc.list_value_length(array))
    if array.null_count or lengths["min"] != lengths["max"]:
        raise ValueError(
            f"The rows of column {column!r} differ in length or are missing; every row must be "
            "one embedding of the same size."
        )
    values = array.flatten().to_numpy(zero_copy_only=False)
    return torch.from_numpy(np.array(values, dtype=np.float32).reshape(table.num_rows, -1))


def _shard(global_indices: Tensor, rank: int, world: int) -> tuple[Tensor, list[int]]:
    """This process's contiguous slice of a global batch, and every slice's size."""
    sizes = [len(part) for part in torch.tensor_split(torch.arange(len(global_indices)), world)]
    start = sum(sizes[:rank])
    return global_indices[start : start + sizes[rank]], sizes


def _gather_rows(tensor: Tensor, sizes: list[int]) -> Tensor:
    """Differentiable all-gather of row blocks of unequal sizes, in rank order."""
    if len(sizes) == 1:
        return tensor
    padded = torch.nn.functional.pad(tensor, (0, 0, 0, max(sizes) - tensor.shape[0]))
    parts = distributed_functional.all_gather(padded)
    return torch.cat([part[:size] for part, size in zip(parts, sizes, strict=True)])


class ParamTrainer:
    r"""Learn a PARAM anchor set from parallel embeddings of one or more encoders.

    Args:
        args: `ParamTrainingArguments`.
        embeddings: ``{encoder name: Tensor [N, d_i]}`` (the same N inputs, row for row), or a
            `datasets.Dataset` whose ``columns`` hold the embeddings (read batch by batch, so N
            may exceed memory).
        inputs: the N inputs (texts) the rows embed; the support points are taken from them.
            Without it, support inputs are recorded as ``{"index": i}``.
        support_indices: which K rows form the support set (default: ``args.support_size`` rows
            drawn with ``args.seed``; all rows when ``support_size`` is None).
        encoders: provenance per encoder name (Hub id, revision, pooling, layer).
        accelerator: an `accelerate.Accelerator` (one is created if not given).

    Example:
        >>> import torch
        >>> from relrep_hf import ParamTrainer, ParamTrainingArguments
        >>> x = torch.randn(256, 8)
        >>> args = ParamTrainingArguments("out", num_anchors=4, num_train_epochs=1,
        ...                               save_strategy="no", disable_tqdm=True)
        >>> anchor_set = ParamTrainer(args, {"a": x, "b": x @ torch.randn(8, 8)}).train()
        >>> anchor_set.mixture.shape
        torch.Size([4, 256])
    """

    def __init__(
        self,
        args: ParamTrainingArguments,
        embeddings: Mapping[str, Tensor] | datasets.Dataset,
        *,
        columns: Sequence[str] | None = None,
        inputs: Sequence[Any] | None = None,
        support_indices: Sequence[int] | Tensor | None = None,
        support_reference: dict[str, Any] | None = None,
        encoders: Mapping[str, Mapping[str, Any]] | None = None,
        accelerator: Accelerator | None = None,
    ):
        self.args = args
        self.data = _Embeddings(embeddings, columns)
        n = self.data.length
        if inputs is not None and len(inputs) != n:
            raise ValueError(
                f"Got {len(inputs)} inputs for {n} embedding rows: they must be parallel."
            )
        if support_indices is None:
            size = n if args.support_size is None else args.support_size
            if size > n:
                raise ValueError(f"support_size={size} exceeds the {n} embedded inputs.")
            support_indices = sample_support_rows(n, size, args.seed)
        self.support_indices = torch.as_tensor(support_indices, dtype=torch.long)
        if len(self.support_indices) < args.num_anchors:
            raise ValueError(
                f"The support set has {len(self.support_indices)} points, fewer than "
                f"num_anchors={args.num_anchors}: each anchor is a mixture of support points, and "
                "PARAM needs K >= m. Use more support points or fewer anchors."
            )
        if len(self.support_indices) and (
            self.support_indices.min() < 0 or self.support_indices.max() >= n
        ):
            raise ValueError(f"support_indices must lie in [0, {n}).")
        self.inputs = inputs
        self.support_reference = support_reference
        self.encoders = {name: dict((encoders or {}).get(name, {})) for name in self.data.names}
        self.accelerator = accelerator or default_accelerator(log_with=args.report_to or None)
        self.statistics: dict[str, Statistics] = {}
        self.log_history: list[dict[str, float]] = []
        self.train_runtime: dict[str, float] = {}

    # ---- the loop ------------------------------------------------------------------------

    def train(self, resume_from_checkpoint: bool | str | None = None) -> AnchorSet:
        """Run training; returns the `AnchorSet` (also saved to ``args.output_dir``)."""
        args, accelerator = self.args, self.accelerator
        set_seed(args.seed)
        rank, world = accelerator.process_index, accelerator.num_processes
        device = accelerator.device

        stats = self.data.statistics(args.statistics_batch_size, rank, world)
        self.statistics = dict(zip(self.data.names, stats, strict=True))
        means = [s.mean.to(device, torch.float32) for s in stats]
        whitenings = [
            whitening_matrix(s, shrinkage=args.shrinkage, eps=args.eps).to(device, torch.float32)
            for s in stats
        ]
        start_time = time.perf_counter()  # the runtime counts the one-off whitening below
        whitened_rows = self.data.whitened(means, whitenings, device, args.statistics_batch_size)
        whitened_support = torch.cat(whitened_rows(self.support_indices), dim=1)  # [K, sum d_i]
        support_operand = whitened_support.bfloat16() if args.bf16 else whitened_support
        setup_seconds = time.perf_counter() - start_time

        generator = torch.Generator().manual_seed(args.seed)
        logits = torch.randn(args.num_anchors, len(self.support_indices), generator=generator)
        model = _Mixture(logits * args.init_scale, args.mixture_temperature, self.data.dims)
        optimizer_class = torch.optim.AdamW if args.optimizer == "adamw" else torch.optim.Adam
        optimizer = optimizer_class(  # fused: one pass over P's logits and moments
            model.parameters(),
            lr=args.learning_rate,
            weight_decay=args.weight_decay,
            fused=device.type in ("cpu", "cuda"),
        )
        model, optimizer = accelerator.prepare(model, optimizer)
        if args.report_to:
            accelerator.init_trackers("relrep_hf_param", config=args.to_dict())

        n, batch_size = self.data.length, args.train_batch_size
        steps_per_epoch = math.ceil(n / batch_size)
        total_steps = steps_per_epoch * args.num_train_epochs
        global_step = self._resume(resume_from_checkpoint) if resume_from_checkpoint else 0
        weights = args.loss_weights
        progress = tqdm(
            total=total_steps,
            initial=global_step,
            desc="PARAM",
            disable=args.disable_tqdm or not accelerator.is_local_main_process,
        )
        running: dict[str, float] = {}
        start_step = global_step
        while global_step < total_steps:
            epoch, step_in_epoch = divmod(global_step, steps_per_epoch)
            # The order of an epoch depends only on (seed, epoch): resuming needs no RNG state.
            order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed + epoch))
            global_batch = order[step_in_epoch * batch_size : (step_in_epoch + 1) * batch_size]
            local, sizes = _shard(global_batch, rank, world)
            terms = param_loss(
                whitened_rows(local),
                model(support_operand),
                weights,
                coverage_chunk_size=args.coverage_chunk_size,
                gather=lambda r, sizes=sizes: _gather_rows(r, sizes),
            )
            # DDP averages gradients over processes; weighting coverage by this shard's share
            # makes that average the coverage of the whole global batch.
            share = len(local) * world / len(global_batch)
            loss = terms["loss"] + weights.coverage * (share - 1.0) * terms["coverage"]
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            global_step += 1
            progress.update(1)
            for key, value in terms.items():
                running[key] = running.get(key, 0.0) + float(value.detach())
            running["steps"] = running.get("steps", 0.0) + 1
            if global_step % args.logging_steps == 0 or global_step == total_steps:
                self._log(
                    running,
                    epoch=global_step / steps_per_epoch,
                    step=global_step,
                    progress=progress,
                )
                running = {}
            if self._should_save(global_step, steps_per_epoch, total_steps):
                self._save_checkpoint(model, global_step)
        progress.close()
        runtime = time.perf_counter() - start_time
        self.train_runtime = {
            "train_runtime": runtime,
            "train_steps_per_second": (global_step - start_step) / runtime if runtime else 0.0,
            "epoch_seconds": runtime * steps_per_epoch / max(1, global_step - start_step),
            "setup_seconds": setup_seconds,  # the one-off whitening, included in the runtime
        }

        mixture = accelerator.unwrap_model(model).mixture().detach().cpu()
        anchor_set = self._anchor_set(mixture, whitened_support.cpu(), means, whitenings)
        if accelerator.is_main_process:
            anchor_set.save_pretrained(args.output_dir, keep=("checkpoint-*",))
        accelerator.wait_for_everyone()
        if args.report_to:
            accelerator.end_training()
        return anchor_set

    # ---- pieces --------------------------------------------------------------------------

    def _log(self, running: dict[str, float], *, epoch: float, step: int, progress: tqdm) -> None:
        steps = running.pop("steps")
        entry = {key: value / steps for key, value in running.items()}
        entry.update(epoch=round(epoch, 4), step=step)
        self.log_history.append(entry)
        progress.set_postfix(
            {k: f"{v:.4f}" for k, v in entry.items() if k not in ("epoch", "step")}
        )
        self.accelerator.log({f"train/{k}": v for k, v in entry.items() if k != "step"}, step=step)
        logger.info("step %d: %s", step, entry)

    def _should_save(self, step: int, steps_per_epoch: int, total_steps: int) -> bool:
        if self.args.save_strategy == "no":
            return False
        if step == total_steps:  # the final state is always checkpointed
            return True
        if self.args.save_strategy == "epoch":
            return step % steps_per_epoch == 0
        return step % self.args.save_steps == 0

    def _save_checkpoint(self, model: nn.Module, step: int) -> None:
        """accelerate state + trainer state, renamed into place only when complete."""
        accelerator, output = self.accelerator, self.args.checkpoint_dir
        staging = output / f".checkpoint-{step}.tmp"
        final = output / f"checkpoint-{step}"
        if accelerator.is_main_process:
            shutil.rmtree(staging, ignore_errors=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(staging))
        if accelerator.is_main_process:
            state = {
                "global_step": step,
                "args": self.args.to_dict(),
                "log_history": self.log_history,
            }
            (staging / STATE_NAME).write_text(json.dumps(state, indent=2))
            make_durable(staging)  # every file, then the folder, before it is renamed
            shutil.rmtree(final, ignore_errors=True)
            os.replace(staging, final)
            fsync_directory(output)
            self._prune_checkpoints(output)
        accelerator.wait_for_everyone()

    def _prune_checkpoints(self, output: Path) -> None:
        limit = self.args.save_total_limit
        if limit is None:
            return
        for old in _checkpoints(output)[:-limit]:
            shutil.rmtree(old, ignore_errors=True)

    def _resume(self, resume_from_checkpoint: bool | str) -> int:
        if resume_from_checkpoint is True:
            found = _checkpoints(self.args.checkpoint_dir)
            if not found:
                raise ValueError(
                    f"resume_from_checkpoint=True but {str(self.args.checkpoint_dir)!r} holds no "
                    "complete checkpoint-* folder. Start without resuming."
                )
            checkpoint = found[-1]
        else:
            checkpoint = Path(resume_from_checkpoint)
        state_file = checkpoint / STATE_NAME
        if not state_file.is_file():
            raise ValueError(f"{str(checkpoint)!r} is not a complete checkpoint (no {STATE_NAME}).")
        state = json.loads(state_file.read_text())
        current = self.args.to_dict()
        defaults = {  # fields added since the checkpoint was written keep their default
            f.name: f.default
            for f in dataclasses.fields(self.args)
            if f.default is not dataclasses.MISSING
        }
        saved = {**{k: v for k, v in defaults.items() if k in current}, **state["args"]}
        changed = sorted(
            key
            for key in set(saved) | set(current)
            if key not in _RESUMABLE_CHANGES and saved.get(key) != current.get(key)
        )
        if changed:
            details = ", ".join(f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in changed)
            raise ValueError(
                f"Cannot resume from {str(checkpoint)!r}: arguments that change the result differ "
                f"({details}). Resume with the original arguments, or start a new run."
            )
        self.accelerator.load_state(str(checkpoint))
        self.log_history = state["log_history"]
        logger.info("Resumed from %s at step %d", checkpoint, state["global_step"])
        return int(state["global_step"])

    def _anchor_set(
        self,
        mixture: Tensor,
        whitened_support: Tensor,
        means: list[Tensor],
        whitenings: list[Tensor],
    ) -> AnchorSet:
        args = self.args
        if self.inputs is not None:
            support = [self.inputs[i] for i in self.support_indices.tolist()]
        else:
            support = [{"index": i} for i in self.support_indices.tolist()]
        encoders = [
            {"name": name, "dim": d, **self.encoders[name]}
            for name, d in zip(self.data.names, self.data.dims, strict=True)
        ]
        training = {
            key: value
            for key, value in args.to_dict().items()
            if key not in ("output_dir", "disable_tqdm", "report_to", "logging_steps")
        }
        training["num_processes"] = self.accelerator.num_processes
        return AnchorSet(
            mixture=mixture,
            support=support,
            support_reference=self.support_reference,
            strategy="param",
            shrinkage=args.shrinkage,  # the similarity settings the anchors were fitted with
            eps=args.eps,
            encoders=encoders,
            training=training,
            metrics=self._final_metrics(mixture, whitened_support, means, whitenings),
        )

    @torch.no_grad()
    def _final_metrics(
        self,
        mixture: Tensor,
        whitened_support: Tensor,
        means: list[Tensor],
        whitenings: list[Tensor],
    ) -> dict[str, Any]:
        """The last logged loss terms, and retrieval between the training encoders'
        relative spaces on up to 2,000 rows."""
        metrics: dict[str, Any] = {}
        if self.log_history:
            metrics["train"] = {k: v for k, v in self.log_history[-1].items() if k != "step"}
            metrics["train"].update(self.train_runtime)
        if len(self.data.names) < 2:
            return metrics
        n = min(2000, self.data.length)
        rows = torch.randperm(
            self.data.length, generator=torch.Generator().manual_seed(self.args.seed)
        )[:n]
        anchors = (mixture @ whitened_support).split(self.data.dims, dim=1)
        relatives = {
            name: whiten(x.float(), mean=mu.cpu(), whitening=w.cpu()) @ a.T
            for name, x, mu, w, a in zip(
                self.data.names, self.data.rows(rows), means, whitenings, anchors, strict=True
            )
        }
        metrics["retrieval"] = {
            f"{a}->{b}": retrieval_metrics(relatives[a], relatives[b], ks=(1, 5))
            for a in relatives
            for b in relatives
            if a != b
        }
        metrics["retrieval_rows"] = n
        return metrics


def default_accelerator(**kwargs: Any) -> Accelerator:
    """An `Accelerator` that also goes multi-process on CPU-only machines under ``torchrun``
    (accelerate only does so when told ``cpu=True``)."""
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    return Accelerator(cpu=distributed and not torch.cuda.is_available(), **kwargs)


def _checkpoints(output: Path) -> list[Path]:
    """Complete checkpoints under ``output``, oldest first."""
    found = [
        p
        for p in output.glob("checkpoint-*")
        if re.fullmatch(r"checkpoint-\d+", p.name) and (p / STATE_NAME).is_file()
    ]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))
