"""Configuration of a head on relative features, for loading with ``trust_remote_code=True``.

This file travels inside every head saved or pushed by relrep_hf, so that
``transformers.AutoModelForSequenceClassification.from_pretrained(repo, trust_remote_code=True)``
works where relrep_hf is not installed. It imports only transformers. The full configuration
(validation, defaults, documentation) is ``relrep_hf.RelativeHeadConfig``; this one only carries
the saved values.
"""

from transformers import PretrainedConfig


class RelativeHeadConfig(PretrainedConfig):
    r"""The values a saved head needs to run: its sizes and layers.

    Every other key of the saved ``config.json`` (the anchor set, the similarity, the source
    encoder, ...) is kept as an attribute, as transformers does for unknown keys.

    Args:
        num_anchors (`int`): number m of anchors, the width of the relative features.
        num_directions (`int`, *optional*): the head reads the first ``num_directions`` of them.
        hidden_sizes (`list[int]`): widths of the hidden layers ([] for a linear probe).
        activation (`str`): activation of the hidden layers (a name in ``ACT2FN``).
        dropout (`float`): dropout after each hidden layer.
        normalize_input (`bool`): a LayerNorm over the features read, first.
        layer_norm_eps (`float`): epsilon of that LayerNorm.
    """

    model_type = "relative_head"

    def __init__(
        self,
        num_anchors: int = 300,
        num_directions: int | None = None,
        hidden_sizes: list | None = None,
        activation: str = "gelu",
        dropout: float = 0.1,
        normalize_input: bool = True,
        layer_norm_eps: float = 1e-5,
        **kwargs,
    ):
        self.num_anchors = num_anchors
        self.num_directions = num_directions
        self.hidden_sizes = list(hidden_sizes or [])
        self.activation = activation
        self.dropout = dropout
        self.normalize_input = normalize_input
        self.layer_norm_eps = layer_norm_eps
        super().__init__(**kwargs)
