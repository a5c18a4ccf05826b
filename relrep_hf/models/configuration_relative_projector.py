"""Configuration of a `RelativeProjector`: sizes, similarity, shrinkage and provenance."""

from __future__ import annotations

from relrep_hf.functional.similarities import get_similarity
from relrep_hf.models.artifact_types import PROJECTOR_TYPE
from relrep_hf.models.configuration_utils import RelrepConfig
from relrep_hf.utils.defaults import (
    DEFAULT_EPS,
    DEFAULT_NUM_ANCHORS,
    DEFAULT_SHRINKAGE,
    check_similarity_settings,
)


class RelativeProjectorConfig(RelrepConfig):
    r"""Configuration of one encoder's relative projector.

    Args:
        hidden_size (`int`): dimension d of the encoder's embeddings.
        num_anchors (`int`): number m of anchors, the size of the relative features.
        similarity (`str`, defaults to `"wip"`): one of `relrep_hf.functional.similarities.SIMILARITIES`.
        shrinkage (`float`, defaults to `DEFAULT_SHRINKAGE`, 0.15): lambda of the shrunk covariance (paper, App. B).
        eps (`float`, defaults to `DEFAULT_EPS`, 5e-8): the ridge added to the shrunk covariance.
        statistics_count (`int`): number of embeddings the whitening statistics were estimated on.
        embedding_norm (`float`): root mean square row norm of those embeddings (0 unknown).
        normalized_embeddings (`bool`, *optional*): whether those embeddings were L2-normalised
            (every row of norm 1, as sentence-transformers returns them by default); `None` when
            unknown. The projector warns once when its input says otherwise.
        encoder_id, encoder_revision (`str`): Hub id and commit of the encoder ("" until known).
        pooling (`str`), layer (`int`): how the encoder's embeddings were pooled, and from which
            hidden layer (transformers' `hidden_states` index; -1 is the last).
        anchor_set_id, anchor_set_revision, anchor_set_fingerprint (`str`): the anchor set
            (`RelrepConfig`).
        encoder_gguf_file, encoder_quantization (`str`): for an encoder loaded from a GGUF file,
            the file (in the encoder's repo) and its quantisation (``Q4_K_M``, ``F16``, ...).
        encoder_kind, encoder_source (`str`): what kind of encoder it was (``transformers``,
            ``gguf``, ``sentence-transformers``, ``callable``, ``precomputed``; "" unknown) and,
            for the last three, its spec (``py:module:function``, ``st:ID``, the file's name).

    Example:
        >>> from relrep_hf import RelativeProjectorConfig
        >>> config = RelativeProjectorConfig(hidden_size=384, num_anchors=300)
        >>> config.similarity
        'wip'
    """

    model_type = "relative_projector"
    artifact_name = "projector"
    artifact_type = PROJECTOR_TYPE  # what a saved projector holds (artifact_types.py)

    def __init__(
        self,
        hidden_size: int = 768,
        num_anchors: int = DEFAULT_NUM_ANCHORS,
        similarity: str = "wip",
        shrinkage: float = DEFAULT_SHRINKAGE,
        eps: float = DEFAULT_EPS,
        statistics_count: int = 0,
        embedding_norm: float = 0.0,
        normalized_embeddings: bool | None = None,
        encoder_id: str = "",
        encoder_revision: str = "",
        pooling: str = "",
        layer: int = -1,
        encoder_gguf_file: str = "",
        encoder_quantization: str = "",
        encoder_kind: str = "",
        encoder_source: str = "",
        **kwargs,
    ):
        get_similarity(similarity)  # validates the name, listing the valid ones
        if hidden_size < 1 or num_anchors < 1:
            raise ValueError(
                f"hidden_size and num_anchors must be positive, got {hidden_size} and {num_anchors}."
            )
        check_similarity_settings(shrinkage, eps)
        self.hidden_size = hidden_size
        self.num_anchors = num_anchors
        self.similarity = similarity
        self.shrinkage = shrinkage
        self.eps = eps
        self.statistics_count = statistics_count
        self.embedding_norm = embedding_norm
        self.normalized_embeddings = normalized_embeddings
        self.encoder_id = encoder_id
        self.encoder_revision = encoder_revision
        self.pooling = pooling
        self.layer = layer
        self.encoder_gguf_file = encoder_gguf_file
        self.encoder_quantization = encoder_quantization
        self.encoder_kind = encoder_kind
        self.encoder_source = encoder_source
        super().__init__(**kwargs)
