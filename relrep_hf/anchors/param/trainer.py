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
from its forward pass (`relrep_hf.functional.fused_losses`), and AdamW is fused. ``bf16=True`` runs
the two products with the support in bfloat16. Under ``torchrun``
each process takes a contiguous shard of every global batch, gradients are averaged
by DDP, and InfoNCE sees the whole global batch through a differentiable gather, so
two processes train the same anchors as one.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import Tensor, nn
from tqdm.auto import tqdm

from relrep_hf.anchors.param.arguments import ParamTrainingArguments
from relrep_hf.anchors.param.checkpoints import (
    STATE_NAME,
    load_checkpoint,
    project_configuration,
    save_checkpoint,
)
from relrep_hf.anchors.param.data import ParallelEmbeddings, gather_rows, shard
from relrep_hf.functional.anchor_strategies import sample_support_rows
from relrep_hf.functional.losses import param_loss
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.functional.statistics import Statistics, whiten, whitening_matrix
from relrep_hf.models.anchor_set import AnchorSet

if TYPE_CHECKING:
    import datasets

__all__ = ["STATE_NAME", "ParamTrainer", "ParamTrainingArguments", "default_accelerator"]

logger = logging.getLogger(__name__)


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
        >>> import tempfile, torch
        >>> from relrep_hf import ParamTrainer, ParamTrainingArguments
        >>> x = torch.randn(256, 8)
        >>> output_dir = tempfile.mkdtemp()  # where the anchor set is saved
        >>> args = ParamTrainingArguments(output_dir, num_anchors=4, num_train_epochs=1,
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
        self.data = ParallelEmbeddings(embeddings, columns)
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
        self.accelerator = accelerator or default_accelerator(
            log_with=args.report_to or None, project_config=project_configuration(args)
        )
        self.statistics: dict[str, Statistics] = {}
        self.log_history: list[dict[str, float]] = []
        self.train_runtime: dict[str, float] = {}

    # ---- the loop ------------------------------------------------------------------------

    def train(
        self, resume_from_checkpoint: bool | str | None = None, *, save: bool = True
    ) -> AnchorSet:
        """Run training; returns the `AnchorSet`, also saved to ``args.output_dir`` (its files,
        card and heatmap) unless ``save=False`` (a fit used in memory only, as an evaluation's:
        the save was most of a small fit's cost)."""
        args, accelerator = self.args, self.accelerator
        set_seed(args.seed)
        device = accelerator.device

        stats = self.data.statistics(
            args.statistics_batch_size, accelerator.process_index, accelerator.num_processes
        )
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

        model, optimizer = self._prepared_model()
        start_step = 0
        if resume_from_checkpoint:
            start_step, self.log_history = load_checkpoint(
                accelerator, args, resume_from_checkpoint
            )
        global_step = self._run_steps(model, optimizer, whitened_rows, support_operand, start_step)
        runtime = time.perf_counter() - start_time
        self.train_runtime = {
            "train_runtime": runtime,
            "train_steps_per_second": (global_step - start_step) / runtime if runtime else 0.0,
            "epoch_seconds": runtime * self._steps_per_epoch() / max(1, global_step - start_step),
            "setup_seconds": setup_seconds,  # the one-off whitening, included in the runtime
        }

        mixture = accelerator.unwrap_model(model).mixture().detach().cpu()
        anchor_set = self._anchor_set(mixture, whitened_support.cpu(), means, whitenings)
        if save and accelerator.is_main_process:
            anchor_set.save_pretrained(args.output_dir, keep=("checkpoint-*",))
        accelerator.wait_for_everyone()
        if args.report_to:
            accelerator.end_training()
        return anchor_set

    def _prepared_model(self) -> tuple[nn.Module, torch.optim.Optimizer]:
        """The mixture ``P`` (seeded logits) and its optimizer, prepared by the accelerator."""
        args, accelerator = self.args, self.accelerator
        generator = torch.Generator().manual_seed(args.seed)
        logits = torch.randn(args.num_anchors, len(self.support_indices), generator=generator)
        model = _Mixture(logits * args.init_scale, args.mixture_temperature, self.data.dims)
        optimizer_class = torch.optim.AdamW if args.optimizer == "adamw" else torch.optim.Adam
        optimizer = optimizer_class(  # fused: one pass over P's logits and moments
            model.parameters(),
            lr=args.learning_rate,
            weight_decay=args.weight_decay,
            fused=accelerator.device.type in ("cpu", "cuda"),
        )
        model, optimizer = accelerator.prepare(model, optimizer)
        if args.report_to:
            accelerator.init_trackers("relrep_hf_param", config=args.to_dict())
        return model, optimizer

    def _steps_per_epoch(self) -> int:
        return math.ceil(self.data.length / self.args.train_batch_size)

    def _run_steps(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        whitened_rows: Callable[[Tensor], list[Tensor]],
        support_operand: Tensor,
        global_step: int,
    ) -> int:
        """The optimisation steps from ``global_step`` to the last, logging and saving
        checkpoints on the way; returns the step reached."""
        args, accelerator = self.args, self.accelerator
        rank, world = accelerator.process_index, accelerator.num_processes
        n, batch_size = self.data.length, args.train_batch_size
        steps_per_epoch = self._steps_per_epoch()
        total_steps = steps_per_epoch * args.num_train_epochs
        weights = args.loss_weights
        progress = tqdm(
            total=total_steps,
            initial=global_step,
            desc="PARAM",
            disable=args.disable_tqdm or not accelerator.is_local_main_process,
        )
        running: dict[str, Tensor | float] = {}
        while global_step < total_steps:
            epoch, step_in_epoch = divmod(global_step, steps_per_epoch)
            # The order of an epoch depends only on (seed, epoch): resuming needs no RNG state.
            order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed + epoch))
            global_batch = order[step_in_epoch * batch_size : (step_in_epoch + 1) * batch_size]
            local, sizes = shard(global_batch, rank, world)
            terms = param_loss(
                whitened_rows(local),
                model(support_operand),
                weights,
                coverage_chunk_size=args.coverage_chunk_size,
                gather=lambda r, sizes=sizes: gather_rows(r, sizes),
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
            for key, value in terms.items():  # on the device: no host sync until a log
                running[key] = running.get(key, 0.0) + value.detach()
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
                save_checkpoint(accelerator, args, global_step, self.log_history)
        progress.close()
        return global_step

    # ---- pieces --------------------------------------------------------------------------

    def _log(
        self, running: dict[str, Tensor | float], *, epoch: float, step: int, progress: tqdm
    ) -> None:
        steps = running.pop("steps")
        entry = {key: float(value) / steps for key, value in running.items()}
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
            name: whiten(x.float().cpu(), mean=mu.cpu(), whitening=w.cpu()) @ a.T
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
