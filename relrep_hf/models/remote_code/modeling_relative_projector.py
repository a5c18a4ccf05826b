"""A relative projector that runs with transformers alone (``trust_remote_code=True``).

This file travels inside every projector repo pushed by relrep_hf. It imports only torch and
transformers. The projector's fused ``weight [d, m]`` and ``bias [m]`` were prepared by relrep_hf
when the projector was built (in float64, from the encoder's statistics and anchors), so the
forward only applies them; the ``apply`` functions below are those of ``relrep_hf.functional.similarities``,
and relrep_hf's test suite checks that both give bit-identical outputs for every similarity.

Example:
    >>> from transformers import AutoModel  # doctest: +SKIP
    >>> projector = AutoModel.from_pretrained(  # doctest: +SKIP
    ...     "user/minilm-projector", trust_remote_code=True
    ... )
    >>> relative = projector(embeddings)  # [..., d] -> [..., m]  # doctest: +SKIP
"""

import torch
from torch import Tensor, nn
from transformers import PreTrainedModel

from .configuration_relative_projector import RelativeProjectorConfig


def _affine(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    # wip: (x - mu) L L (a - mu)^T = x @ W + b; inner: x @ A^T + 0
    return torch.addmm(bias, x, weight)


def _cosine(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    # weight holds the normalised anchors; divide the (smaller) [n, m] output by |x|
    return torch.mm(x, weight) / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _distance(p: float):
    def apply(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        return torch.cdist(x, weight.T.contiguous(), p=p)  # weight holds the anchors^T

    return apply


APPLY = {
    "wip": _affine,
    "inner": _affine,
    "cosine": _cosine,
    "euclidean": _distance(2.0),
    "l1": _distance(1.0),
    "linf": _distance(float("inf")),
}


def declare_tensors(module: nn.Module, hidden_size: int, num_anchors: int) -> None:
    """The checkpoint's tensors, zero until it loads: the statistics and anchors as buffers, the
    fused ``weight [d, m]`` and ``bias [m]`` as frozen parameters. relrep_hf's own projector
    declares them with this function too, so the two read the same checkpoints."""
    d, m = hidden_size, num_anchors
    module.register_buffer("mean", torch.zeros(d))
    module.register_buffer("whitening", torch.eye(d))
    module.register_buffer("anchors", torch.zeros(m, d))
    module.weight = nn.Parameter(torch.zeros(d, m), requires_grad=False)
    module.bias = nn.Parameter(torch.zeros(m), requires_grad=False)


class RelativeProjector(PreTrainedModel):
    r"""Relative features ``[..., m]`` of an encoder's embeddings ``[..., d]``.

    The buffers ``mean``, ``whitening`` and ``anchors`` are the encoder's statistics and anchors
    (kept so that the checkpoint loads whole); ``weight`` and ``bias`` are what the forward uses.
    """

    config_class = RelativeProjectorConfig
    base_model_prefix = "relative_projector"
    main_input_name = "embeddings"

    def __init__(self, config: RelativeProjectorConfig):
        super().__init__(config)
        if config.similarity not in APPLY:
            raise ValueError(
                f"Invalid similarity {config.similarity!r}. Valid: {', '.join(map(repr, APPLY))}."
            )
        declare_tensors(self, config.hidden_size, config.num_anchors)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Nothing to initialise: every tensor comes from the checkpoint."""

    def forward(self, embeddings: Tensor) -> Tensor:
        """Relative features ``[..., m]`` of ``embeddings [..., d]``."""
        d = self.config.hidden_size
        if embeddings.shape[-1] != d:
            raise ValueError(
                f"Expected embeddings [..., {d}] (the projector's hidden_size), got "
                f"{tuple(embeddings.shape)}: was the projector built for another encoder?"
            )
        rows = embeddings.to(self.weight.dtype).reshape(-1, d)  # (N, d)
        relative = APPLY[self.config.similarity](rows, self.weight, self.bias)  # (N, m)
        return relative.reshape(*embeddings.shape[:-1], self.config.num_anchors)
