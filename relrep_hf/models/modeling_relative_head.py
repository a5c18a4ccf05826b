"""`RelativeHeadForClassification`: a classifier on relative features, encoder-agnostic.

A head trained on the relative features of one encoder reads those of every encoder whose
projector uses the same anchor set and similarity ("zero-shot stitching"). The head is a small
artifact of its own (config.json + model.safetensors): the anchor set it speaks is recorded in
its config and checked against a projector by `check_head_matches_projector`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import PreTrainedConfig, initialization as init
from transformers.activations import ACT2FN
from transformers.modeling_outputs import SequenceClassifierOutput

from relrep_hf.functional.mixing import check_same_anchor_set
from relrep_hf.models.artifact_types import HEAD_METRICS_NAME
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_utils import RelrepPreTrainedModel
from relrep_hf.models.remote_code import write_remote_code
from relrep_hf.utils.io import atomic_write_bytes
from relrep_hf.utils.manifest import MANIFEST_NAME, manifest_bytes
from relrep_hf.utils.publishing_hooks import publisher
from relrep_hf.utils.validation import (
    EmbeddingsLike,
    as_embeddings,
    check_finite,
    check_same_device,
)

__all__ = [
    "HEAD_METRICS_NAME",
    "RelativeHeadForClassification",
    "check_head_matches_projector",
    "write_head_metrics",
]


class RelativeHeadForClassification(RelrepPreTrainedModel):
    r"""A linear probe or MLP on relative features ``[..., m]``, with a classification loss.

    The layers are: LayerNorm over the features it reads (the first ``num_directions`` of the m,
    else all m; ``normalize_input``), then for each width in
    ``hidden_sizes`` a Linear, the activation and dropout, then the Linear classifier.

    Args:
        config (`RelativeHeadConfig`): sizes, labels and the anchor set of the features.

    Example:
        >>> import torch
        >>> from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
        >>> from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
        >>> head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=16, num_labels=3))
        >>> out = head(torch.randn(4, 16), labels=torch.tensor([0, 2, 1, 0]))
        >>> out.logits.shape, out.loss.ndim
        (torch.Size([4, 3]), 0)
    """

    config_class = RelativeHeadConfig
    artifact_kind = "head"  # its names follow from it and the config (RelrepPreTrainedModel)
    main_input_name = "relative"

    def __init__(self, config: RelativeHeadConfig):
        super().__init__(config)
        self._build_layers()
        self.post_init()

    def _build_layers(self) -> None:
        config = self.config
        width = config.input_width  # the first num_directions features, else all m
        if config.normalize_input:
            self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        else:
            self.norm = nn.Identity()
        layers: list[nn.Module] = []
        for hidden in config.hidden_sizes:
            layers += [
                nn.Linear(width, hidden),
                ACT2FN[config.activation],
                nn.Dropout(config.dropout),
            ]
            width = hidden
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, config.num_labels)

    def read_directions(self, num_directions: int | None, selection: dict | None = None) -> None:
        """Read the first ``num_directions`` features (``None``: all m) from now on: the layers
        are built again, freshly initialised (`HeadTrainer` calls it before training)."""
        config = RelativeHeadConfig(
            num_anchors=self.config.num_anchors, num_directions=num_directions, num_labels=2
        )  # validates the number as the config does
        self.config.num_directions = config.num_directions
        self.config.direction_selection = dict(selection) if selection else None
        weight = self.classifier.weight
        self._build_layers()
        self.apply(self._init_weights)
        self.to(device=weight.device, dtype=weight.dtype)

    def _init_weights(self, module: nn.Module) -> None:
        """PyTorch's fan-in init for the linear layers, ones and zeros for the LayerNorm.

        transformers' usual normal(0, 0.02) suits deep stacks with residual connections; a small
        head on features of unit scale learns much faster from the fan-in-scaled init.
        """
        if isinstance(module, nn.Linear):
            init.kaiming_uniform_(module.weight, a=math.sqrt(5))
            bound = 1.0 / math.sqrt(module.in_features)
            init.uniform_(module.bias, -bound, bound)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)

    def forward(
        self, relative: EmbeddingsLike, labels: Tensor | None = None
    ) -> SequenceClassifierOutput:
        """Logits ``[..., num_labels]`` of ``relative [..., m]`` (a tensor, a NumPy array or a
        list of floats); the loss when ``labels`` are given.

        The loss follows transformers' ``problem_type``: cross-entropy on class indices
        (``single_label_classification``, the default for integer labels), MSE for
        ``regression`` (the default when ``num_labels == 1``), and binary cross-entropy on
        multi-hot float labels (``multi_label_classification``). Tensors must be on the
        head's device (NumPy arrays and lists go there).
        """
        if isinstance(relative, Tensor):
            check_same_device(relative_features=relative, head=self.classifier.weight)
        relative = as_embeddings(relative, name="relative").to(self.classifier.weight.device)
        if relative.ndim == 0 or relative.shape[-1] != self.config.num_anchors:
            raise ValueError(
                f"Expected relative features with {self.config.num_anchors} columns (the head's "
                f"num_anchors), got shape {tuple(relative.shape)}. Was the projector built with "
                f"another anchor set?"
            )
        # NaN / Inf features would give NaN logits with no word: name the rows instead
        check_finite(relative.detach().reshape(-1, relative.shape[-1]), name="relative features")
        logits = self.logits_of(relative)
        loss = None if labels is None else self._loss(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)

    def logits_of(self, relative: Tensor) -> Tensor:
        """The logits of checked features ``[..., m]`` (forward's layers, without its checks)."""
        read = relative[..., : self.config.input_width]  # the directions the head reads
        hidden = self.layers(self.norm(read.to(self.classifier.weight.dtype)))
        return self.classifier(hidden)

    def _loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        labels = labels.to(logits.device)
        problem = self.config.problem_type
        if problem is None:  # inferred here, never written back to the config
            if self.config.num_labels == 1:
                problem = "regression"
            elif labels.dtype in (torch.long, torch.int):
                problem = "single_label_classification"
            else:
                problem = "multi_label_classification"
        if problem == "regression":
            return nn.functional.mse_loss(
                logits.squeeze(-1), labels.to(logits.dtype).reshape(logits.shape[:-1])
            )
        if problem == "single_label_classification":
            return nn.functional.cross_entropy(
                logits.reshape(-1, self.config.num_labels), labels.reshape(-1).long()
            )
        return nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))

    def _write_extras(self, folder: Path) -> None:
        """The standalone code that ``trust_remote_code=True`` loads (`models.remote_code`)."""
        write_remote_code(folder)

    @classmethod
    def for_projector(cls, projector_config: Any, **config_kwargs) -> RelativeHeadForClassification:
        """A freshly initialised head for the features of a projector (or of its config).

        See `RelativeHeadConfig.for_projector`; ``config_kwargs`` set the labels and layers.
        """
        return cls(RelativeHeadConfig.for_projector(projector_config, **config_kwargs))


def check_head_matches_projector(
    head_config: PreTrainedConfig, projector_config: PreTrainedConfig
) -> None:
    """Raise a ValueError unless the head can read the projector's relative features: the one
    rule of `relrep_hf.functional.mixing.check_same_anchor_set` (anchor count, similarity, fingerprint)."""
    check_same_anchor_set(head_config, projector_config, names=("head", "projector"))


def write_head_metrics(
    folder: str | os.PathLike,
    results: Mapping[str, Mapping[str, float]],
    *,
    dataset: Mapping[str, Any] | None = None,
    source_encoder: str | None = None,
) -> Path | None:
    """Record a saved head's evaluation beside it (``metrics.json``) and rewrite its card.

    ``results`` maps each encoder the head was evaluated through (its own, and others
    zero-shot) to metric values; ``source_encoder`` names the head's own row when it is not
    the config's ``source_encoder_id``. The card is written by the publishing layer
    (`relrep_hf.utils.publishing_hooks`); returns its path.
    """
    config = Path(folder) / "config.json"
    if not config.is_file() or json.loads(config.read_text()).get("model_type") != "relative_head":
        raise ValueError(
            f"{str(folder)!r} holds no saved relative head (config.json with model_type "
            "'relative_head'): save the head with save_pretrained first."
        )
    metrics: dict[str, Any] = {"results": {str(k): dict(v) for k, v in results.items()}}
    if dataset:
        metrics["dataset"] = dict(dataset)
    if source_encoder:
        metrics["source_encoder"] = source_encoder
    text = json.dumps(metrics, indent=2) + "\n"
    atomic_write_bytes(Path(folder) / HEAD_METRICS_NAME, text.encode())
    card = publisher().write_card(Path(folder))
    if (Path(folder) / MANIFEST_NAME).is_file():  # the digests of the new metrics and card
        atomic_write_bytes(Path(folder) / MANIFEST_NAME, manifest_bytes(Path(folder)))
    return card
