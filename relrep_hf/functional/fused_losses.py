"""PARAM loss terms whose forward pass also returns their gradients in closed form.

Autograd through the losses would keep every [n, m] softmax and [B, B] logit matrix
until backward and then differentiate them op by op, several passes over each. Here
each forward computes the value and, on request, the gradient w.r.t. its inputs in a
few in-place passes; the autograd functions only scale the saved gradients by the
upstream one. `relrep_hf.functional.losses` builds the public losses and `param_loss` on them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor

_NORM_EPS = 1e-12  # torch.nn.functional.normalize's eps: shorter rows are divided by it


# ----------------------------------------------------------------------------- coverage


def distortion_pass(
    cross: Tensor,
    x_sq: Tensor,
    a_sq: Tensor,
    temperature: float,
    chunk_size: int,
    need_grad: bool,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Mean soft k-means distortion from cross products and, on request, its gradients
    w.r.t. ``cross`` and ``a_sq`` (the one w.r.t. ``x_sq`` is ``1 / n``).

    With D = ||x||^2 - 2 X A^T + ||a||^2, let t = (2 X A^T - ||a||^2) / tau: the row shift
    ||x||^2 leaves q = softmax_r(-D / tau) = softmax_r(t) unchanged. Then
    f_i = sum_r q_ir D_ir = ||x_i||^2 - tau phi_i with phi_i = sum_r q_ir t_ir, the value is
    sum_i f_i / n, and

        df_i / dD_ir = q_ir (1 - (D_ir - f_i) / tau) = q_ir (t_ir + 1 - phi_i) =: g_ir,

    so the gradient reaches ``cross`` as -2 g / n, ``a_sq`` as g.sum(0) / n and ``x_sq`` as
    g.sum(1) / n = 1 / n. Rows go ``chunk_size`` at a time: the [n, m] softmax never exists
    whole, and ``grad_cross`` is the only [n, m] matrix kept.
    """
    n = cross.shape[0]
    grad_cross = torch.empty_like(cross) if need_grad else None
    total = cross.new_zeros(())
    bias = a_sq / -temperature  # [m]
    for start in range(0, n, chunk_size):
        rows = slice(start, start + chunk_size)
        # D >= 0 (the expansion can dip below 0 by rounding when x_i ~ a_r) is t <= ||x||^2 / tau
        t = torch.add(bias, cross[rows], alpha=2.0 / temperature)  # [rows, m]
        t = t.clamp_(max=(x_sq[rows] / temperature)[:, None])
        q = torch.softmax(t, dim=1)
        phi = torch.einsum("ij,ij->i", q, t)  # [rows]
        total = total + (x_sq[rows].sum() - temperature * phi.sum())
        if need_grad:
            scale = -2.0 / n  # -2 g / n = q * (scale * t + scale * (1 - phi)), in place
            torch.add((scale * (1.0 - phi))[:, None], t, alpha=scale, out=t)
            torch.mul(t, q, out=grad_cross[rows])
    grad_a_sq = grad_cross.sum(dim=0).mul_(-0.5) if need_grad else None
    return total / n, grad_cross, grad_a_sq


class SoftDistortion(torch.autograd.Function):
    """`distortion_pass` as an autograd function: its gradients come from the forward.

    Autograd carries them on from ``cross`` and the squared norms to x and the anchors.
    """

    @staticmethod
    def forward(ctx, cross, x_sq, a_sq, temperature, chunk_size):  # type: ignore[override]
        value, grad_cross, grad_a_sq = distortion_pass(
            cross, x_sq, a_sq, temperature, chunk_size, need_grad=True
        )
        ctx.save_for_backward(grad_cross, grad_a_sq)
        ctx.rows = cross.shape[0]
        return value

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):  # type: ignore[override]
        grad_cross, grad_a_sq = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_x_sq = None
        if needs[1]:
            grad_x_sq = grad_output.expand(ctx.rows) / ctx.rows
        return (
            grad_cross * grad_output if needs[0] else None,
            grad_x_sq,
            grad_a_sq * grad_output if needs[2] else None,
            None,
            None,
        )


# ---------------------------------------------------------------------------- InfoNCE


def info_nce_pass(
    relatives: Sequence[Tensor], temperature: float, need_grad: bool
) -> tuple[Tensor, list[Tensor] | None]:
    """Symmetric InfoNCE of cosine logits averaged over all pairs of spaces and, on request,
    its gradients w.r.t. the relative features.

    For a pair with cosines C = U_a U_b^T (unit rows), S = C / tau, and the shift c = 1 / tau
    (no cosine exceeds 1), E = exp(S - c) holds every softmax: CE(a -> b) takes
    log-softmax over the rows of S and CE(b -> a) over its columns, so

        loss = (mean_i log sum_j E_ij + mean_j log sum_i E_ij) / 2 - mean_i (S_ii - c),
        d loss / d C = (E / row sums + E / column sums - 2 I) / (2 B tau):

    one exp pass and one [B, B] gradient, no logsumexp and no transposed copy. The unit
    rows' gradient reaches the relative features through the normalisation,
    dR = (dU - U (U . dU)) / ||R||.
    """
    count, (rows, width) = len(relatives), relatives[0].shape
    raw_norms = [torch.linalg.vector_norm(r, dim=1) for r in relatives]
    inverse = [norm.clamp_min(_NORM_EPS).reciprocal_() for norm in raw_norms]
    # E_ij >= exp(-2 / tau) must stay a normal number; else shift each row and column alone
    shared_shift = 2.0 / temperature < -math.log(torch.finfo(relatives[0].dtype).tiny)
    shift = 1.0 / temperature if shared_shift else 0.0
    # [U_a / tau, -shift] . [U_b, 1] = S - shift: one more column puts the shift in the GEMM
    left, right = [], []
    for i, (r, inv) in enumerate(zip(relatives, inverse, strict=True)):
        right.append(r.new_empty(rows, width + 1).fill_(1.0))
        torch.mul(r, inv[:, None], out=right[-1][:, :width])
        if i < count - 1:  # left operands of the pairs
            left.append(r.new_empty(rows, width + 1).fill_(-shift))
            torch.mul(right[-1][:, :width], 1.0 / temperature, out=left[-1][:, :width])
    units = [r[:, :width] for r in right]
    pairs = list(itertools.combinations(range(count), 2))
    grad_scale = 0.5 / (rows * temperature * len(pairs))
    grad_units = [torch.zeros_like(u) for u in units] if need_grad else None
    total = relatives[0].new_zeros(())
    for a, b in pairs:
        logits = left[a] @ right[b].T  # S - shift [B, B]
        if shared_shift:
            diagonal = logits.diagonal().clone()
            exp = logits.exp_()
            row_sums, col_sums = exp.sum(dim=1), exp.sum(dim=0)
            total = total + 0.5 * (row_sums.log().mean() + col_sums.log().mean())
            total = total - diagonal.mean()
            if need_grad:
                grad = exp.mul_((grad_scale / row_sums)[:, None] + (grad_scale / col_sums))
        else:
            diagonal = logits.diagonal().clone()
            lse_rows, lse_cols = torch.logsumexp(logits, dim=1), torch.logsumexp(logits, dim=0)
            total = total + 0.5 * ((lse_rows - diagonal).mean() + (lse_cols - diagonal).mean())
            if need_grad:
                grad = torch.exp(logits - lse_rows[:, None]).add_(logits.sub_(lse_cols).exp_())
                grad = grad.mul_(grad_scale)
        if need_grad:
            grad.diagonal().sub_(2.0 * grad_scale)  # w.r.t. C
            grad_units[a].addmm_(grad, units[b])
            grad_units[b].addmm_(grad.T, units[a])
    loss = total / len(pairs)
    if not need_grad:
        return loss, None
    grads = []
    for unit, grad_unit, norm, inv in zip(units, grad_units, raw_norms, inverse, strict=True):
        # rows shorter than the eps were divided by the eps: no projection for them
        along = torch.einsum("ij,ij->i", unit, grad_unit).masked_fill_(norm <= _NORM_EPS, 0.0)
        grads.append(grad_unit.sub_(unit * along[:, None]).mul_(inv[:, None]))
    return loss, grads


class MultiSpaceInfoNCE(torch.autograd.Function):
    """`info_nce_pass` as an autograd function: ``apply(temperature, *relatives)``."""

    @staticmethod
    def forward(ctx, temperature, *relatives):  # type: ignore[override]
        loss, grads = info_nce_pass(relatives, temperature, need_grad=True)
        ctx.save_for_backward(*grads)
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):  # type: ignore[override]
        needs = ctx.needs_input_grad[1:]
        grads = (
            g * grad_output if need else None
            for g, need in zip(ctx.saved_tensors, needs, strict=True)
        )
        return (None, *grads)


# ------------------------------------------------------------------- anchor regularisers


def regulariser_pass(anchors: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Orthogonality and length of ``anchors [m, d]``, and the pieces of their gradients.

    With unit rows U = A / ||A|| and G = U U^T, orthogonality is
    (||G||_F^2 - sum_r ||u_r||^4) / (m (m - 1)) and length is mean_r (||a_r|| - 1)^2. Through
    the normalisation, d orth / dA = (dU - U (U . dU)) / ||a|| with
    dU = 4 (G - diag ||u||^2) U / (m (m - 1)), and d length / dA = 2 (||a|| - 1) / (m ||a||) A.
    Returns ``(orthogonality, length, unit_grad, orth_rows, length_rows)`` such that
    d orth / dA = unit_grad + orth_rows[:, None] * A and d length / dA = length_rows[:, None] * A.
    """
    m, d = anchors.shape
    pairs = m * (m - 1)
    norms = torch.linalg.vector_norm(anchors, dim=1)  # [m]
    inverse = norms.clamp_min(_NORM_EPS).reciprocal_()
    unit = anchors * inverse[:, None]
    squared = (norms * inverse).square_()  # ||u_r||^2: 1, less for rows shorter than the eps
    diagonal = squared.square().sum()
    scale = (4.0 / pairs) * inverse[:, None]
    if d >= m:
        gram = unit @ unit.T  # [m, m]
        orthogonality = (torch.linalg.vector_norm(gram).square() - diagonal) / pairs
        gram.diagonal().sub_(squared)  # d/du_r of sum_r ||u_r||^4 is 4 ||u_r||^2 u_r
        unit_grad = (gram @ unit).mul_(scale)
    else:  # ||U U^T||_F = ||U^T U||_F: the smaller Gram matrix
        gram = unit.T @ unit  # [d, d]
        orthogonality = (torch.linalg.vector_norm(gram).square() - diagonal) / pairs
        unit_grad = (unit @ gram).sub_(unit * squared[:, None]).mul_(scale)
    # U (U . dU) / ||a|| = A (U . dU) / ||a||^2; rows shorter than the eps were divided by
    # the eps (as torch.nn.functional.normalize does): no projection for them
    orth_rows = torch.einsum("ij,ij->i", unit, unit_grad).mul_(inverse).neg_()
    orth_rows = orth_rows.masked_fill_(norms <= _NORM_EPS, 0.0)
    length = (norms - 1.0).square().mean()
    # 0 for a zero row, as autograd's norm gives
    length_rows = torch.where(norms > 0, (norms - 1.0) * (2.0 / m) / norms, 0.0)
    return orthogonality, length, unit_grad, orth_rows, length_rows


class AnchorRegularisers(torch.autograd.Function):
    """`regulariser_pass` as an autograd function: ``(orthogonality, length)`` of anchors,
    whose gradient is assembled from the saved pieces in two passes."""

    @staticmethod
    def forward(ctx, anchors):  # type: ignore[override]
        orthogonality, length, *pieces = regulariser_pass(anchors)
        ctx.save_for_backward(anchors, *pieces)
        return orthogonality, length

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_orthogonality, grad_length):  # type: ignore[override]
        anchors, unit_grad, orth_rows, length_rows = ctx.saved_tensors
        rows = orth_rows * grad_orthogonality + length_rows * grad_length
        return (unit_grad * grad_orthogonality).addcmul_(anchors, rows[:, None])
