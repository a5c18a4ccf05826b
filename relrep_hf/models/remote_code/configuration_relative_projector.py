"""Configuration of a relative projector, for loading with ``trust_remote_code=True``.

This file travels inside every projector repo pushed by relrep_hf, so that
``transformers.AutoModel.from_pretrained(repo, trust_remote_code=True)`` works where relrep_hf
is not installed. It imports only transformers. The full configuration (validation, defaults,
documentation) is ``relrep_hf.RelativeProjectorConfig``; this one only carries the saved values.
"""

from transformers import PretrainedConfig


class RelativeProjectorConfig(PretrainedConfig):
    r"""The values a saved projector needs to run: sizes and similarity.

    Every other key of the saved ``config.json`` (shrinkage, encoder and anchor set provenance,
    pooling, layer, ...) is kept as an attribute, as transformers does for unknown keys.

    Args:
        hidden_size (`int`): dimension d of the encoder's embeddings.
        num_anchors (`int`): number m of anchors, the size of the relative features.
        similarity (`str`): the similarity the stored weight and bias apply.
    """

    model_type = "relative_projector"

    def __init__(
        self, hidden_size: int = 768, num_anchors: int = 300, similarity: str = "wip", **kwargs
    ):
        self.hidden_size = hidden_size
        self.num_anchors = num_anchors
        self.similarity = similarity
        super().__init__(**kwargs)
