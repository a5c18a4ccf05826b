"""Configuration of a head on relative features: its sizes, and the anchor set it speaks."""

from __future__ import annotations

from typing import Any

from transformers.activations import ACT2FN

from relrep_hf.models.artifact_types import HEAD_TYPE
from relrep_hf.models.configuration_utils import ANCHOR_SET_KEYS, RelrepConfig
from relrep_hf.utils.defaults import DEFAULT_NUM_ANCHORS

# The layers `for_projector` gives a head unless told otherwise: a small MLP transferred best
# to encoders the head never saw (benchmarks.studies.head_variants, docs/heads.md), where a bare
# `RelativeHeadConfig` stays a linear probe.
SWAPPABLE_HEAD_LAYERS: dict[str, Any] = {"hidden_sizes": [256], "dropout": 0.3}


class RelativeHeadConfig(RelrepConfig):
    r"""Configuration of a classification head on relative features.

    A head reads the ``m`` relative features of any encoder whose projector uses the same anchor
    set and similarity, so its config records that anchor set (id and revision) and the
    similarity, and, for the model card, the encoder whose features it was trained on.

    Args:
        num_anchors (`int`): number m of anchors, the width of the relative features.
        hidden_sizes (`list[int]`, defaults to `[]`): widths of the hidden layers; empty gives a
            linear probe, otherwise an MLP.
        activation (`str`, defaults to `"gelu"`): activation of the hidden layers (a name in
            `transformers.activations.ACT2FN`).
        dropout (`float`, defaults to 0.1): dropout after each hidden layer.
        normalize_input (`bool`, defaults to `True`): a LayerNorm over the m features of each
            row first. It is per row, so nothing is estimated from the training encoder's
            feature scale; similarities of another encoder arrive on another scale, and the
            normalisation makes the head indifferent to it, which is what zero-shot stitching
            needs (the relative-representations papers put a normalisation layer there too).
        layer_norm_eps (`float`, defaults to 1e-5): epsilon of that LayerNorm.
        similarity (`str`): the similarity of the projectors it was trained with ("" unknown).
        anchor_set_id, anchor_set_revision, anchor_set_fingerprint (`str`): the anchor set it
            was trained with (`RelrepConfig`).
        source_encoder_id, source_encoder_revision (`str`): the encoder whose relative features
            it was trained on (several encoders: their names joined by ", ").
        num_directions (`int`, *optional*): the head reads the first ``num_directions`` of the m
            features (the shared linear closed form orders them, most shared first); ``None``
            reads all m until `HeadTrainer` chooses the number from several encoders' features
            of the same labelled rows (leave one encoder out, `relrep_hf.training.head_directions`).
        direction_selection (`dict`, *optional*): how that number was chosen: the candidates,
            their held-out-encoder weighted F1 and the encoders (shown in the head's card).
        num_labels, id2label, label2id: the classes, as in every transformers config.

    Example:
        >>> from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
        >>> config = RelativeHeadConfig(num_anchors=300, id2label={0: "neg", 1: "pos"})
        >>> config.num_labels, config.hidden_sizes
        (2, [])
    """

    model_type = "relative_head"
    artifact_name = "head"
    artifact_type = HEAD_TYPE  # what a saved head holds (artifact_types.py)

    def __init__(
        self,
        num_anchors: int = DEFAULT_NUM_ANCHORS,
        hidden_sizes: list[int] | None = None,
        activation: str = "gelu",
        dropout: float = 0.1,
        normalize_input: bool = True,
        layer_norm_eps: float = 1e-5,
        similarity: str = "",
        source_encoder_id: str = "",
        source_encoder_revision: str = "",
        num_directions: int | None = None,
        direction_selection: dict[str, Any] | None = None,
        **kwargs,
    ):
        hidden_sizes = [] if hidden_sizes is None else list(hidden_sizes)
        if isinstance(num_anchors, bool) or not isinstance(num_anchors, int) or num_anchors < 1:
            raise ValueError(f"num_anchors must be a positive int, got {num_anchors!r}.")
        if any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in hidden_sizes):
            raise ValueError(
                f"hidden_sizes must be a list of positive ints ([] for a linear probe), got "
                f"{hidden_sizes!r}."
            )
        if activation not in ACT2FN:
            valid = ", ".join(repr(name) for name in sorted(ACT2FN))
            raise ValueError(f"Invalid activation {activation!r}. Valid: {valid}.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")
        if num_directions is not None and (
            isinstance(num_directions, bool)
            or not isinstance(num_directions, int)
            or not 1 <= num_directions <= num_anchors
        ):
            raise ValueError(
                f"num_directions must be an int in [1, num_anchors={num_anchors}] or None (read "
                f"every feature), got {num_directions!r}."
            )
        self.num_anchors = num_anchors
        self.num_directions = num_directions
        self.direction_selection = dict(direction_selection) if direction_selection else None
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.dropout = dropout
        self.normalize_input = bool(normalize_input)
        self.layer_norm_eps = layer_norm_eps
        self.similarity = similarity
        self.source_encoder_id = source_encoder_id
        self.source_encoder_revision = source_encoder_revision
        super().__init__(**kwargs)
        if self.label2id is None and self.id2label is not None:
            self.label2id = {label: index for index, label in self.id2label.items()}
        if self.num_labels is None or self.num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {self.num_labels!r}.")

    @classmethod
    def for_projector(cls, projector_config: Any, **kwargs) -> RelativeHeadConfig:
        """A head config that reads the features of a projector (or of its config).

        Copies its number of anchors, similarity and anchor set, and names its encoder as the
        source; ``kwargs`` (``id2label``, ``hidden_sizes``, ...) set the rest. ``hidden_sizes``
        and ``dropout`` default to `SWAPPABLE_HEAD_LAYERS` (one hidden layer of 256, dropout
        0.3; ``hidden_sizes=[]`` gives a linear probe): that head transferred best to encoders
        it never saw (docs/heads.md).

        Example:
            >>> from relrep_hf import RelativeProjectorConfig
            >>> projector = RelativeProjectorConfig(hidden_size=384, num_anchors=64)
            >>> RelativeHeadConfig.for_projector(projector, num_labels=5).num_anchors
            64
        """
        projector_config = getattr(projector_config, "config", projector_config)
        provenance = {
            "num_anchors": projector_config.num_anchors,
            "similarity": projector_config.similarity,
            **{key: getattr(projector_config, key, "") for key in ANCHOR_SET_KEYS},
            "source_encoder_id": projector_config.encoder_id,
            "source_encoder_revision": projector_config.encoder_revision,
        }
        return cls(**{**provenance, **SWAPPABLE_HEAD_LAYERS, **kwargs})

    @property
    def input_width(self) -> int:
        """How many of the m features the head reads (``num_directions``, else all m)."""
        return self.num_directions or self.num_anchors
