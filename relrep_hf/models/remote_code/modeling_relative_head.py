"""A head on relative features that runs with transformers alone (``trust_remote_code=True``).

This file travels inside every head saved or pushed by relrep_hf. It imports only torch and
transformers, and builds the layers of ``relrep_hf.RelativeHeadForClassification`` under the same
names, so it reads the same checkpoint; relrep_hf's test suite checks that both give the same
logits.

Example:
    >>> from transformers import AutoModelForSequenceClassification  # doctest: +SKIP
    >>> head = AutoModelForSequenceClassification.from_pretrained(  # doctest: +SKIP
    ...     "user/topic-head", trust_remote_code=True
    ... )
    >>> head(relative).logits  # [..., m] -> [..., num_labels]  # doctest: +SKIP
"""

from torch import Tensor, nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.modeling_outputs import SequenceClassifierOutput

from .configuration_relative_head import RelativeHeadConfig


class RelativeHeadForClassification(PreTrainedModel):
    r"""LayerNorm over the features read (optional), an MLP (or nothing), a linear classifier."""

    config_class = RelativeHeadConfig
    base_model_prefix = "relative_head"
    main_input_name = "relative"

    def __init__(self, config: RelativeHeadConfig):
        super().__init__(config)
        width = config.num_directions or config.num_anchors  # the features the head reads
        if config.normalize_input:
            self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        else:
            self.norm = nn.Identity()
        layers = []
        for hidden in config.hidden_sizes:
            layers += [
                nn.Linear(width, hidden),
                ACT2FN[config.activation],
                nn.Dropout(config.dropout),
            ]
            width = hidden
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, config.num_labels)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Nothing to initialise: every tensor comes from the checkpoint."""

    def forward(self, relative: Tensor, labels: Tensor | None = None) -> SequenceClassifierOutput:
        """Logits ``[..., num_labels]`` of relative features ``[..., m]``; with ``labels``
        (class indices) the cross-entropy loss too."""
        m = self.config.num_anchors
        if relative.shape[-1] != m:
            raise ValueError(
                f"Expected relative features [..., {m}] (the head's num_anchors), got "
                f"{tuple(relative.shape)}: was the projector built with another anchor set?"
            )
        read = relative[..., : self.config.num_directions or m]
        hidden = self.layers(self.norm(read.to(self.classifier.weight.dtype)))
        logits = self.classifier(hidden)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits.reshape(-1, self.config.num_labels), labels.reshape(-1).long()
            )
        return SequenceClassifierOutput(loss=loss, logits=logits)
