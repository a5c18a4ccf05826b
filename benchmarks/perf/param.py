"""A PARAM epoch against a direct implementation of the paper's formulas.

The direct version (tests/fixtures/param_reference.py, the reference the tests check a PARAM
epoch against) whitens the anchors with a d x d product at every step
(``((P @ X_sub) - mu) @ L``), whitens every batch, computes full distance matrices
with ``torch.cdist`` and lets autograd differentiate all of it. Ours whitens the
support once (``P @ whitened(X_sub)`` is exact because P's rows sum to one), shares one
GEMM across encoders, whitens rows held in memory once, computes each encoder's
cross products once for both the coverage and the relative features, and computes every
loss term's gradient in its forward pass (`relrep_hf.functional.fused_losses`); AdamW is fused.
Both start from the same logits and see the same batches; every step's losses of the
first epoch are compared.

A second row times only the float32 matrix products the objective needs (a floor for
any exact implementation on this machine), against the same direct epoch; the third
measures our epoch loop against that floor (the one-off whitening of the rows left out,
and spread over 3 epochs as an extra figure). The fourth runs the loop with
``bf16=True`` (the products with the support in bfloat16) against the same float32
floor, and prints how far its losses move from the float32 run's, step by step.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time

import torch

from benchmarks.common import row
from relrep_hf import ParamTrainer, ParamTrainingArguments
from tests.fixtures.param_reference import direct_epoch, random_spaces


def _gemm_floor(n: int, dims: list[int], k: int, m: int, batch: int) -> float:
    """Seconds of one epoch of only the matrix products the objective cannot do without:
    the anchors P @ X_sub and dL/dP, each encoder's relative features x_w a_w^T and their
    backward, and each pair's [B, B] contrastive logits and their two backward products."""
    generator = torch.Generator().manual_seed(1)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    mixture, support, grad_anchors = rand(m, k), rand(k, sum(dims)), rand(m, sum(dims))
    anchors = [rand(m, d) for d in dims]
    sizes = [min(batch, n - first) for first in range(0, n, batch)]
    operands = {  # values do not change a product's time: one set per batch size
        b: ([rand(b, d) for d in dims], rand(b, m), rand(b, b)) for b in set(sizes)
    }
    start = time.perf_counter()
    for b in sizes:
        xs, grad_relative, grad_logits = operands[b]
        mixture @ support
        grad_anchors @ support.T
        units = []
        for x, a in zip(xs, anchors, strict=True):
            units.append(x @ a.T)
            grad_relative.T @ x
        for unit_a, unit_b in itertools.combinations(units, 2):
            unit_a @ unit_b.T
            grad_logits @ unit_b
            grad_logits.T @ unit_a
    return time.perf_counter() - start


def _train(spaces: dict[str, torch.Tensor], m: int, k: int, bf16: bool) -> ParamTrainer:
    with tempfile.TemporaryDirectory() as out:
        args = ParamTrainingArguments(
            out,
            num_anchors=m,
            support_size=k,
            num_train_epochs=EPOCHS,
            save_strategy="no",
            disable_tqdm=True,
            logging_steps=1,
            bf16=bf16,
        )
        trainer = ParamTrainer(args, spaces)
        trainer.train()
    return trainer


def _loop_epoch(trainer: ParamTrainer) -> float:
    """Seconds per epoch of the loop alone: the one-off whitening of the rows left out."""
    runtime = trainer.train_runtime
    return (runtime["train_runtime"] - runtime["setup_seconds"]) / EPOCHS


def loss_deviation(history: list[dict], reference: list[dict]) -> float:
    """The largest relative difference of any loss between two runs' logs, step by step."""
    return max(
        abs(step[key] - ref[key]) / max(1.0, abs(ref[key]))
        for step, ref in zip(history, reference, strict=True)
        for key in ref
        if key not in ("epoch", "step")
    )


EPOCHS = 3


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads: none (the core install runs it)."""
    return {}


def run(quick: bool = False, repeats: int | None = None) -> list[dict]:
    """The four rows; ``quick``: smaller sizes, one repeat (a crash check, not a figure)."""
    n, d, k, m, encoders = (1000, 64, 250, 25, 3) if quick else (20000, 768, 5000, 300, 3)
    repeats = repeats or (1 if quick else 3)
    spaces = random_spaces(n, d, encoders)
    ours, ours_loop, low_loop, direct, floor = [], [], [], [], []
    for _ in range(repeats):  # interleaved, so that drift of a shared machine hits all alike
        trainer = _train(spaces, m, k, bf16=False)
        # with the one-off whitening of the rows spread over the 3 epochs; statistics are set
        # up before it, as for the direct version
        ours.append(trainer.train_runtime["epoch_seconds"])
        ours_loop.append(_loop_epoch(trainer))
        low = _train(spaces, m, k, bf16=True)
        low_loop.append(_loop_epoch(low))
        seconds, direct_history = direct_epoch(spaces, trainer.args, trainer.support_indices)
        direct.append(seconds)
        floor.append(_gemm_floor(n, [d] * encoders, k, m, trainer.args.train_batch_size))
    steps = len(direct_history)
    size = f"N={n}, d={d}, K={k}, m={m}, {encoders} encoders"
    floor_seconds = statistics.median(floor)
    return [
        row(
            f"PARAM epoch ({size})",
            "direct formulas",
            statistics.median(direct),
            statistics.median(ours),
            "s",
            max_relative_loss_difference_over_the_epoch=loss_deviation(
                trainer.log_history[:steps], direct_history
            ),
            steps_compared=steps,
        ),
        row(
            f"float32 GEMMs the objective needs, alone ({size})",
            "direct formulas",
            statistics.median(direct),
            floor_seconds,
            "s",
        ),
        row(
            f"PARAM epoch loop, float32 ({size})",
            "its float32 GEMMs alone",
            floor_seconds,
            statistics.median(ours_loop),
            "s",
            ratio_with_the_one_off_whitening_over_3_epochs=statistics.median(ours) / floor_seconds,
        ),
        row(
            f"PARAM epoch loop, bf16=True ({size})",
            "its float32 GEMMs alone",
            floor_seconds,
            statistics.median(low_loop),
            "s",
            relative_loss_deviation_from_float32_first_step=loss_deviation(
                low.log_history[:1], trainer.log_history[:1]
            ),
            max_relative_loss_deviation_from_float32_over_3_epochs=loss_deviation(
                low.log_history, trainer.log_history
            ),
        ),
    ]
