"""Configuration of a text classifier across encoders: the encoder it names, its projector's and
its head's configs."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedConfig

from relrep_hf.models.artifact_types import CLASSIFIER_TYPE
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.configuration_relative_projector import RelativeProjectorConfig
from relrep_hf.models.configuration_utils import ANCHOR_SET_KEYS, RelrepConfig

# keys of a nested config that say nothing about the artifact (transformers' own bookkeeping)
_BOOKKEEPING = ("transformers_version", "_name_or_path", "architectures", "auto_map", "dtype")


class RelativeClassifierConfig(RelrepConfig):
    r"""Configuration of `RelativeModelForSequenceClassification`: encoder -> projector -> head.

    The classifier holds no encoder weights: it names its encoder by Hub id and commit (as a PEFT
    adapter names its base model) and loads it on `from_pretrained`. The projector turns that
    encoder's pooled embeddings into relative features; the head, trained on any encoder's
    relative features of the same anchor set, classifies them.

    Args:
        projector (`dict` or `RelativeProjectorConfig`): the encoder's projector's config (its
            pooling and layer say how the encoder's hidden states are pooled).
        head (`dict` or `RelativeHeadConfig`): the head's config (its labels are the classifier's).
        encoder_id, encoder_revision (`str`): the encoder to load (default: the ones the
            projector records; "" when unknown, then `from_pretrained` needs ``encoder=``).

    Example:
        >>> from relrep_hf import RelativeHeadConfig, RelativeProjectorConfig
        >>> from relrep_hf.models.configuration_relative_classifier import RelativeClassifierConfig
        >>> projector = RelativeProjectorConfig(hidden_size=384, num_anchors=16, pooling="mean")
        >>> head = RelativeHeadConfig.for_projector(projector, id2label={0: "neg", 1: "pos"})
        >>> RelativeClassifierConfig(projector=projector, head=head).id2label
        {0: 'neg', 1: 'pos'}
    """

    model_type = "relative_classifier"
    artifact_name = "text classifier"
    artifact_type = CLASSIFIER_TYPE  # what a saved text classifier holds (artifact_types.py)

    def __init__(
        self,
        projector: dict[str, Any] | RelativeProjectorConfig | None = None,
        head: dict[str, Any] | RelativeHeadConfig | None = None,
        encoder_id: str | None = None,
        encoder_revision: str | None = None,
        **kwargs,
    ):
        projector_config = _as_config(projector, RelativeProjectorConfig)
        head_config = _as_config(head, RelativeHeadConfig)
        self.projector = _as_dict(projector_config)
        self.head = _as_dict(head_config)
        self.encoder_id = projector_config.encoder_id if encoder_id is None else encoder_id
        self.encoder_revision = (
            projector_config.encoder_revision if encoder_revision is None else encoder_revision
        )
        for key in ANCHOR_SET_KEYS:  # the anchor set both speak (checked by the model)
            kwargs.setdefault(key, getattr(projector_config, key, ""))
        kwargs["id2label"] = head_config.id2label  # the head's labels are the classifier's
        kwargs["problem_type"] = head_config.problem_type  # the pipeline's softmax or sigmoid
        kwargs.pop("label2id", None)
        kwargs.pop("num_labels", None)
        super().__init__(**kwargs)
        self.label2id = dict(head_config.label2id)

    @property
    def projector_config(self) -> RelativeProjectorConfig:
        """The projector's config, built from its saved values."""
        return _as_config(self.projector, RelativeProjectorConfig)

    @property
    def head_config(self) -> RelativeHeadConfig:
        """The head's config, built from its saved values."""
        return _as_config(self.head, RelativeHeadConfig)


def _as_config(value: Any, config_class: type[PreTrainedConfig]) -> Any:
    if isinstance(value, config_class):
        return value
    if value is None:
        return config_class()
    if not isinstance(value, dict):
        raise ValueError(
            f"Expected a {config_class.__name__} or its dict, got {type(value).__name__}."
        )
    return config_class.from_dict(dict(value))


def _as_dict(config: PreTrainedConfig) -> dict[str, Any]:
    values = config.to_dict()
    return {key: value for key, value in values.items() if key not in _BOOKKEEPING}
