"""Configuration of a text classifier across encoders, for loading with ``trust_remote_code=True``.

This file travels inside every text classifier saved or pushed by relrep_hf, so that
``transformers.pipeline("text-classification", model=repo, trust_remote_code=True)`` works where
relrep_hf is not installed. It imports only transformers. The full configuration is
``relrep_hf.RelativeClassifierConfig``; this one only carries the saved values.
"""

from transformers import PretrainedConfig


class RelativeClassifierConfig(PretrainedConfig):
    r"""The encoder to load, and the projector's and head's saved configs.

    Args:
        projector (`dict`): the projector's config (sizes, similarity, pooling, layer, ...).
        head (`dict`): the head's config (sizes, layers, labels).
        encoder_id, encoder_revision (`str`): the encoder's Hub id and commit.
    """

    model_type = "relative_classifier"

    def __init__(
        self,
        projector: dict | None = None,
        head: dict | None = None,
        encoder_id: str = "",
        encoder_revision: str = "",
        **kwargs,
    ):
        self.projector = dict(projector or {})
        self.head = dict(head or {})
        self.encoder_id = encoder_id
        self.encoder_revision = encoder_revision
        super().__init__(**kwargs)
