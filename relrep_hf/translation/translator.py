"""Latent space translation: one encoder's embeddings into another's, through shared anchors.

Translation between two encoders that share one anchor set (row r of both projectors'
anchors is the same input) is projection with the source, inversion with the target
(`relrep_hf.translation.inverse`): ``translate(x) = invert(target, source(x))``. For wip/inner this
composite is itself an affine map, as are the two baselines fitted on a parallel support set
(orthogonal Procrustes with scaling, affine least squares; `relrep_hf.functional.least_squares`): all are
:class:`AffineMap` s, and :func:`evaluate_translation` scores any of them the same way.

Read top to bottom: translation, evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from relrep_hf.functional.least_squares import AffineMap
from relrep_hf.functional.metrics import accuracy, normalized_mse, retrieval_metrics
from relrep_hf.functional.mixing import check_same_anchor_set
from relrep_hf.functional.statistics import Statistics
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.translation.inverse import RelativeInverse, relative_inverse
from relrep_hf.utils.validation import check_embeddings, check_same_device

__all__ = ["LatentTranslator", "evaluate_translation", "translate", "translation_map"]


def translate(
    x: Tensor,
    source: RelativeProjector,
    target: RelativeProjector | RelativeInverse,
    *,
    ridge: float = 0.0,
    target_norm: float | Statistics | None = None,
) -> Tensor:
    """Source embeddings ``x [..., d_s]`` mapped into the target space ``[..., d_t]``.

    ``target(inverse)(source(x))``: project onto the shared anchors with the source
    projector, invert with the target's. ``target`` may be a prebuilt inverse. ``x`` and both
    projectors must be on one device, where the result is computed.
    """
    check_same_anchor_set(source, target, names=("source projector", "target"))
    check_same_device(embeddings=x, source_projector=source.weight, target=target.weight)
    if isinstance(target, RelativeProjector):
        target = relative_inverse(target, ridge=ridge, target_norm=target_norm)
    return target(source(x))


def translation_map(
    source: RelativeProjector, target: RelativeProjector | RelativeInverse, *, ridge: float = 0.0
) -> AffineMap:
    """:func:`translate` for ``wip``/``inner`` fused into one ``[d_s, d_t]`` affine map:
    ``x -> x (W_src W_inv) + (b_src W_inv + b_inv)``, on the projectors' (one) device."""
    check_same_anchor_set(source, target, names=("source projector", "target"))
    check_same_device(source_projector=source.weight, target=target.weight)
    if isinstance(target, RelativeProjector):
        target = relative_inverse(target, ridge=ridge)
    return AffineMap(source.weight, source.bias).then(target.as_affine_map())


class LatentTranslator(nn.Module):
    """Source encoder embeddings -> target encoder embeddings, through the shared anchors.

    Put it between a source encoder's pooled output and a head trained on the target
    encoder's absolute embeddings: ``nn.Sequential(LatentTranslator(src, tgt), head)``.
    """

    def __init__(
        self,
        source: RelativeProjector,
        target: RelativeProjector | RelativeInverse,
        *,
        ridge: float = 0.0,
        target_norm: float | Statistics | None = None,
    ):
        super().__init__()
        check_same_anchor_set(source, target, names=("source projector", "target"))
        check_same_device(source_projector=source.weight, target=target.weight)
        if isinstance(target, RelativeProjector):
            target = relative_inverse(target, ridge=ridge, target_norm=target_norm)
        self.source = source
        self.inverse = target

    def forward(self, x: Tensor) -> Tensor:
        """``x [..., d_s] -> [..., d_t]``."""
        return self.inverse(self.source(x))

    def fused(self) -> AffineMap:
        """The same translation as one affine map (``wip``/``inner``)."""
        return AffineMap(self.source.weight, self.source.bias).then(self.inverse.as_affine_map())


# ------------------------------------------------------------------------- evaluation


def _predict(head: Callable[[Tensor], Any], embeddings: Tensor) -> np.ndarray:
    logits = head(embeddings)
    logits = np.asarray(logits.detach().cpu() if isinstance(logits, Tensor) else logits)
    if logits.ndim == 1:  # a binary decision score
        return (logits > 0).astype(np.int64)
    if logits.ndim != 2 or logits.shape[0] != embeddings.shape[0]:
        raise ValueError(
            f"target_head must return logits [n, classes] for n={embeddings.shape[0]} rows, got "
            f"shape {logits.shape}."
        )
    return logits.argmax(axis=1)


def evaluate_translation(
    translated: Tensor,
    target: Tensor,
    *,
    target_head: Callable[[Tensor], Any] | None = None,
    labels: Sequence[int] | Tensor | np.ndarray | None = None,
    ks: Sequence[int] = (1, 5),
) -> dict[str, float]:
    """How close ``translated [n, d_t]`` is to the true target embeddings ``target [n, d_t]``.

    Returns ``cosine`` (mean row-wise cosine), ``mse`` (mean squared error per entry),
    ``normalized_mse`` (MSE over the target's per-dimension variance: 0 perfect, 1 no better
    than the target mean), ``recall@k`` and ``mrr`` of cosine retrieval of row i among all
    true target rows; with ``target_head`` (a callable giving logits ``[n, classes]``, trained
    on the target's absolute embeddings) and ``labels`` (class indices into those logits),
    also ``head_accuracy`` on the translated rows and ``head_accuracy_target`` on the true ones.
    Both tables on one device, where the scores are computed.
    """
    check_same_device(translated=translated, target=target)
    check_embeddings(translated, name="translated", min_rows=2)
    check_embeddings(target, name="target", min_rows=2)
    if translated.shape != target.shape or translated.ndim != 2:
        raise ValueError(
            f"translated {tuple(translated.shape)} and target {tuple(target.shape)} must both be "
            "[n, d_t], row i the same input."
        )
    if (target_head is None) != (labels is None):
        raise ValueError("Pass target_head and labels together to score the head, or neither.")
    a, b = translated.detach().double(), target.detach().double()
    scores = {
        "cosine": F.cosine_similarity(a, b, dim=-1).mean().item(),
        "mse": (a - b).square().mean().item(),
        "normalized_mse": normalized_mse(a, b),
        **retrieval_metrics(a, b, ks=ks),
    }
    if target_head is not None:
        dtype = target.dtype
        with torch.no_grad():
            scores["head_accuracy"] = accuracy(_predict(target_head, translated.to(dtype)), labels)
            scores["head_accuracy_target"] = accuracy(_predict(target_head, target), labels)
    return scores
