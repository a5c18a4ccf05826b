"""A PARAM epoch against a direct implementation of the paper's formulas.

The direct version whitens the anchors with a d x d product at every step
(``((P @ X_sub) - mu) @ L``), whitens every batch, computes full distance matrices
with ``torch.cdist`` and lets autograd differentiate all of it. Ours whitens the
support once (``P @ whitened(X_sub)`` is exact because P's rows sum to one), shares one
GEMM across encoders and uses the chunked coverage with its hand-written backward.
Both start from the same logits and see the same batches; the losses of the first
step are compared.
"""

from __future__ import annotations

import itertools
import tempfile
import time

import torch
import torch.nn.functional as F

from benchmarks.common import row
from relrep_hf import ParamTrainer, ParamTrainingArguments
from relrep_hf.statistics import Statistics, whitening_matrix


def _spaces(n: int, d: int, encoders: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    latent = torch.randn(n, d, generator=generator)
    return {
        f"enc{i}": latent @ torch.randn(d, d, generator=generator) + torch.randn(d, generator=generator)
        for i in range(encoders)
    }


def _direct_losses(logits, support, means, whitenings, batches, args) -> dict[str, torch.Tensor]:
    mixture = torch.softmax(logits / args.mixture_temperature, dim=1)
    coverage, orthogonality, length, relatives = [], [], [], []
    for x_sub, mu, w, x in zip(support, means, whitenings, batches, strict=True):
        whitened_anchors = (mixture @ x_sub - mu) @ w
        whitened_x = (x - mu) @ w
        distance = torch.cdist(whitened_x, whitened_anchors).square()
        q = torch.softmax(-distance / args.coverage_temperature, dim=1)
        coverage.append((q * distance).sum(dim=1).mean() / x.shape[1])
        unit = F.normalize(whitened_anchors, dim=1)
        m = unit.shape[0]
        orthogonality.append(((unit @ unit.T).square().sum() - m) / (m * (m - 1)))
        length.append((whitened_anchors.norm(dim=1) - 1).square().mean())
        relatives.append(whitened_x @ whitened_anchors.T)
    nce = []
    for a, b in itertools.combinations(relatives, 2):
        logits_ab = F.normalize(a, dim=1) @ F.normalize(b, dim=1).T / args.info_nce_temperature
        target = torch.arange(len(a))
        nce.append(0.5 * (F.cross_entropy(logits_ab, target) + F.cross_entropy(logits_ab.T, target)))
    terms = {
        "coverage": torch.stack(coverage).mean(),
        "orthogonality": torch.stack(orthogonality).mean(),
        "length": torch.stack(length).mean(),
        "info_nce": torch.stack(nce).mean(),
    }
    terms["loss"] = (
        args.coverage_weight * terms["coverage"]
        + args.orthogonality_weight * terms["orthogonality"]
        + args.length_weight * terms["length"]
        + args.info_nce_weight * terms["info_nce"]
    )
    return terms


def _direct_epoch(spaces, args, support_indices, epoch: int = 0) -> tuple[float, dict]:
    names = list(spaces)
    stats = [Statistics.from_embeddings(spaces[n]) for n in names]
    means = [s.mean.float() for s in stats]
    whitenings = [whitening_matrix(s).float() for s in stats]
    support = [spaces[n][support_indices] for n in names]
    generator = torch.Generator().manual_seed(args.seed)
    logits = torch.nn.Parameter(torch.randn(args.num_anchors, len(support_indices), generator=generator))
    optimizer = torch.optim.AdamW([logits], lr=args.learning_rate, weight_decay=args.weight_decay)
    n = len(next(iter(spaces.values())))
    order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed + epoch))
    first = None
    start = time.perf_counter()  # like ours: setup (statistics, whitening) excluded
    for s in range(0, n, args.train_batch_size):
        rows = order[s : s + args.train_batch_size]
        terms = _direct_losses(logits, support, means, whitenings, [spaces[k][rows] for k in names], args)
        first = first or {k: float(v.detach()) for k, v in terms.items()}
        optimizer.zero_grad()
        terms["loss"].backward()
        optimizer.step()
    return time.perf_counter() - start, first


def run(quick: bool = False) -> list[dict]:
    n, d, k, m, encoders = (4000, 256, 1000, 100, 3) if quick else (20000, 768, 5000, 300, 3)
    spaces = _spaces(n, d, encoders)

    with tempfile.TemporaryDirectory() as out:
        args = ParamTrainingArguments(
            out, num_anchors=m, support_size=k, num_train_epochs=2,
            save_strategy="no", disable_tqdm=True, logging_steps=1,
        )
        trainer = ParamTrainer(args, spaces)
        trainer.train()
    # the training loop alone: statistics and the whitened support are set up once, before it
    ours_epoch = trainer.train_runtime["epoch_seconds"]
    direct_epoch, direct_first = _direct_epoch(spaces, trainer.args, trainer.support_indices)
    ours_first = trainer.log_history[0]
    difference = max(abs(ours_first[key] - direct_first[key]) / max(1.0, abs(direct_first[key])) for key in direct_first)
    return [
        row(
            f"PARAM epoch (N={n}, d={d}, K={k}, m={m}, {encoders} encoders)",
            "direct formulas",
            direct_epoch,
            ours_epoch,
            "s",
            first_step_max_relative_loss_difference=difference,
        )
    ]
