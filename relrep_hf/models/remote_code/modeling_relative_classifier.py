"""A text classifier across encoders that runs with transformers alone (``trust_remote_code``).

This file travels inside every text classifier saved or pushed by relrep_hf. It imports only
torch, transformers and the projector's and head's standalone code beside it. The encoder is not
in the folder: `from_pretrained` loads the one ``config.json`` names (Hub id and commit) with
``AutoModel``. The forward pools the encoder's hidden states as relrep_hf does (mean, first or
last real token, from the attention mask alone; mask-derived positions for left-padded causal
decoders), projects them and classifies them; relrep_hf's test suite checks that both give the
same logits.

Example:
    >>> from transformers import pipeline  # doctest: +SKIP
    >>> classify = pipeline(  # doctest: +SKIP
    ...     "text-classification", model="user/topic-classifier", trust_remote_code=True
    ... )
    >>> classify(["The socket is closed."], top_k=2)  # doctest: +SKIP
"""

import inspect

import torch
from torch import Tensor, nn
from transformers import AutoModel, PreTrainedModel

from .configuration_relative_classifier import RelativeClassifierConfig
from .configuration_relative_head import RelativeHeadConfig
from .configuration_relative_projector import RelativeProjectorConfig
from .modeling_relative_head import RelativeHeadForClassification
from .modeling_relative_projector import RelativeProjector

_HUB_KEYS = ("token", "cache_dir", "local_files_only", "force_download")


def pool(states: Tensor, mask: Tensor, pooling: str) -> Tensor:
    """One vector per row of ``states [B, T, d]``: the mean of the real tokens, or the first
    (``cls``) or last (``last``) real token, whatever the padding side."""
    real = mask.to(states.device) != 0  # (B, T)
    if pooling == "mean":
        dtype = torch.promote_types(states.dtype, torch.float32)
        keep = real.unsqueeze(-1)
        summed = torch.where(keep, states.to(dtype), 0.0).sum(dim=1)
        return (summed / keep.sum(dim=1).to(dtype)).to(states.dtype)
    batch, length, _ = states.shape
    positions = torch.arange(length, device=states.device).expand(batch, length)
    if pooling == "last":
        index = torch.where(real, positions, -1).amax(dim=1)
    else:
        index = torch.where(real, positions, length).amin(dim=1)
    return states[torch.arange(batch, device=states.device), index]


class RelativeModelForSequenceClassification(PreTrainedModel):
    r"""Encoder (loaded by name) -> pooling -> projector -> head: text in, logits out."""

    config_class = RelativeClassifierConfig
    base_model_prefix = "relative_classifier"
    main_input_name = "input_ids"

    def __init__(self, config: RelativeClassifierConfig):
        super().__init__(config)
        self.projector = RelativeProjector(RelativeProjectorConfig.from_dict(config.projector))
        self.head = RelativeHeadForClassification(RelativeHeadConfig.from_dict(config.head))
        self.encoder = None  # loaded by from_pretrained
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Nothing to initialise: every tensor comes from the checkpoint."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, encoder=None, **kwargs):
        """The saved projector and head, and the encoder ``config.json`` names (or ``encoder``)."""
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        if encoder is None:
            config = model.config
            if not config.encoder_id or config.encoder_id.startswith("local:"):
                raise ValueError(
                    f"{pretrained_model_name_or_path!r} names no encoder on the Hub "
                    f"({config.encoder_id!r}): pass encoder=AutoModel.from_pretrained(...)."
                )
            hub = {key: kwargs[key] for key in _HUB_KEYS if key in kwargs}
            revision = config.encoder_revision or None
            encoder = AutoModel.from_pretrained(config.encoder_id, revision=revision, **hub)
        model.encoder = encoder.to(model.projector.weight.device)
        return model.eval()

    def forward(self, input_ids=None, attention_mask=None, labels=None, **inputs):
        """The head's logits of a tokenized batch (and the loss with ``labels``)."""
        projector = self.projector.config
        module = self.encoder
        if getattr(module.config, "is_encoder_decoder", False):
            module = module.get_encoder()
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        accepted = inspect.signature(module.forward).parameters
        kwargs = {k: v for k, v in inputs.items() if k in accepted}
        causal = any(getattr(sub, "is_causal", False) is True for sub in module.modules())
        if causal and "position_ids" in accepted:  # left padding: positions from the mask
            real = attention_mask != 0
            kwargs["position_ids"] = (real.long().cumsum(-1) - 1).masked_fill(~real, 0)
        if "use_cache" in accepted:
            kwargs["use_cache"] = False
        outputs = module(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=projector.layer != -1,
            return_dict=True,
            **kwargs,
        )
        states = outputs.last_hidden_state  # layer -1: the final output (after a final norm)
        if projector.layer != -1:
            count = len(outputs.hidden_states)  # embeddings + layers
            if projector.layer % count != count - 1:
                states = outputs.hidden_states[projector.layer]
        pooled = pool(states, attention_mask, projector.pooling)
        if getattr(projector, "normalized_embeddings", None):
            pooled = nn.functional.normalize(pooled, dim=-1)
        relative = self.projector(pooled)
        return self.head(relative.to(self.head.classifier.weight.device), labels=labels)
