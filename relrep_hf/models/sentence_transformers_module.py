"""`RelativeProjection`: a `RelativeProjector` as a sentence-transformers module.

Most text embedding today runs through sentence-transformers. This module puts relative
features into that pipeline::

    SentenceTransformer(modules=[transformer, pooling, RelativeProjection(projector)])

so that ``model.encode(texts)`` returns relative features. It is stored the way
sentence-transformers stores its own `Dense`: in its folder of the saved model
(``2_RelativeProjection/``), its own small JSON config (``relative_projection.json``: which
feature it reads and writes) beside the projector's ``config.json`` and ``model.safetensors``
(written by `RelativeProjector.save_pretrained`, so the folder is also a projector repo).
``model.save(path)``, ``model.push_to_hub(repo)`` and ``SentenceTransformer(path,
trust_remote_code=True)`` round-trip: sentence-transformers 6 imports a module class outside
its own namespace only with ``trust_remote_code=True``, and relrep_hf must be installed.

The projector must be built on the embeddings the module receives: the output of every module
before it, a ``Normalize`` included. `projector_from_sentence_transformer` does exactly that, by
running the model's own ``encode`` on the anchor set's support inputs and on a corpus for the
whitening statistics; `add_relative_projection` appends the module to a model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Module, Normalize
from torch import Tensor

from relrep_hf.encoding.encoders import encoder_provenance
from relrep_hf.encoding.pooling import SENTENCE_TRANSFORMERS_POOLINGS
from relrep_hf.functional.statistics import Statistics
from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.utils.defaults import DEFAULT_ENCODE_BATCH_SIZE

__all__ = [
    "ArtifactModule",
    "RelativeProjection",
    "add_relative_projection",
    "projector_from_sentence_transformer",
]

# sentence-transformers' pooling modes that are exactly relrep_hf's poolings of the last layer


class ArtifactModule(Module):
    """A sentence-transformers module around one relrep_hf artifact: it reads the feature
    ``module_input_name`` and writes ``module_output_name`` (the same feature unless another is
    named) through `map_embeddings`, and loads from a saved model's folder or Hub repo with
    sentence-transformers' ``load`` arguments. `RelativeProjection` and
    `relrep_hf.migration.bridge.Bridge` are the two; each says how its artifact maps the
    embeddings and how it is read back (`load_module`)."""

    config_keys: list[str] = ["module_input_name", "module_output_name"]  # noqa: RUF012 (ST's API)

    def __init__(
        self, module_input_name: str = "sentence_embedding", module_output_name: str | None = None
    ):
        super().__init__()
        self.module_input_name = module_input_name
        self.module_output_name = module_output_name or module_input_name

    def map_embeddings(self, embeddings: Tensor) -> Tensor:
        """What this module writes for ``embeddings`` (the feature it reads)."""
        raise NotImplementedError

    def forward(self, features: dict[str, Tensor | Any], **kwargs: Any) -> dict[str, Tensor | Any]:
        """Write ``features[module_output_name]`` from ``features[module_input_name]``."""
        features[self.module_output_name] = self.map_embeddings(features[self.module_input_name])
        return features

    @classmethod
    def load(
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        **kwargs: Any,
    ) -> ArtifactModule:
        """Load from a saved model folder or Hub repo (``subfolder`` is the module's folder)."""
        hub_kwargs = {
            "token": token,
            "cache_folder": cache_folder,
            "revision": revision,
            "local_files_only": local_files_only,
        }
        return cls.load_module(model_name_or_path, subfolder, hub_kwargs)

    @classmethod
    def load_module(
        cls, model_name_or_path: str, subfolder: str, hub_kwargs: dict[str, Any]
    ) -> ArtifactModule:
        """The module saved in ``subfolder`` of ``model_name_or_path`` (``hub_kwargs``: token,
        cache_folder, revision, local_files_only, as sentence-transformers names them)."""
        raise NotImplementedError


class RelativeProjection(ArtifactModule):
    r"""Relative features of the sentence embedding, inside a `SentenceTransformer`.

    Args:
        projector (`RelativeProjector`): built on the embeddings this module receives.
        module_input_name (`str`, defaults to ``"sentence_embedding"``): the feature it reads.
        module_output_name (`str`, *optional*): the feature it writes (default: the input's, so
            ``encode`` returns the relative features; give another name to keep both).

    Example:
        >>> from sentence_transformers import SentenceTransformer  # doctest: +SKIP
        >>> modules = [transformer, pooling, RelativeProjection(projector)]  # doctest: +SKIP
        >>> model = SentenceTransformer(modules=modules)  # doctest: +SKIP
        >>> model.encode(["A first sentence."]).shape  # doctest: +SKIP
        (1, 300)
    """

    config_file_name = "relative_projection.json"

    def __init__(
        self,
        projector: RelativeProjector,
        module_input_name: str = "sentence_embedding",
        module_output_name: str | None = None,
    ):
        super().__init__(module_input_name, module_output_name)
        if not isinstance(projector, RelativeProjector):
            raise ValueError(
                f"Expected a RelativeProjector, got {type(projector).__name__}. Load one with "
                "RelativeProjector.from_pretrained(path) or build one with "
                "projector_from_sentence_transformer(model, anchor_set, corpus)."
            )
        self.projector = projector.eval()

    def map_embeddings(self, embeddings: Tensor) -> Tensor:
        """The relative features ``[B, m]`` of ``embeddings [B, d]``."""
        return self.projector(embeddings)

    def get_embedding_dimension(self) -> int:
        """The number of anchors: the size of the relative features."""
        return self.projector.config.num_anchors

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs) -> None:
        """The projector (config.json, model.safetensors, card), then this module's config."""
        if not safe_serialization:
            raise ValueError(
                "RelativeProjection saves safetensors only: use safe_serialization=True."
            )
        self.projector.save_pretrained(output_path)  # atomic: replaces the folder's files
        self.save_config(output_path)

    @classmethod
    def load_module(
        cls, model_name_or_path: str, subfolder: str, hub_kwargs: dict[str, Any]
    ) -> RelativeProjection:
        """Its config checked for unknown keys, then the projector of the same folder."""
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub_kwargs)
        unknown = sorted(set(config) - set(cls.config_keys))
        if unknown:
            where = f"{model_name_or_path!r}" + (f" (subfolder {subfolder!r})" if subfolder else "")
            raise ValueError(
                f"{cls.config_file_name} of {where} has unknown keys "
                f"{unknown}; valid: {cls.config_keys}. It was written by another version: "
                "upgrade relrep_hf."
            )
        cache_dir = hub_kwargs.pop("cache_folder")  # transformers' name for it
        projector = RelativeProjector.from_pretrained(
            model_name_or_path, subfolder=subfolder, cache_dir=cache_dir, **hub_kwargs
        )
        return cls(projector, **config)


def add_relative_projection(
    model: SentenceTransformer, projector: RelativeProjector | str | os.PathLike, **hub_kwargs
) -> SentenceTransformer:
    """Append a `RelativeProjection` of ``projector`` (loaded or a Hub id / folder) to ``model``.

    The model is changed in place and returned; its ``encode`` then gives relative features.
    The projector must have been built on this model's ``encode`` output (see
    `projector_from_sentence_transformer`): its embedding size is checked here.
    """
    if isinstance(projector, (str, os.PathLike)):
        projector = RelativeProjector.from_pretrained(projector, **hub_kwargs)
    _check_no_projection(model)
    dimension = model.get_embedding_dimension()
    if dimension is not None and dimension != projector.config.hidden_size:
        raise ValueError(
            f"The projector takes {projector.config.hidden_size}-dimensional embeddings but the "
            f"model's encode gives {dimension}-dimensional ones: the projector belongs to another "
            "encoder. Build this model's with projector_from_sentence_transformer."
        )
    model.append(RelativeProjection(projector).to(model.device))
    # the card loaded with the model describes its old output (e.g. "384 dimensional"): a new
    # one is generated from the model as it is now, as sentence-transformers does for a merge
    model._model_card_text = None
    return model


def projector_from_sentence_transformer(
    model: SentenceTransformer,
    anchor_set: AnchorSet,
    corpus: Sequence[str],
    *,
    batch_size: int = DEFAULT_ENCODE_BATCH_SIZE,
    **projector_kwargs: Any,
) -> RelativeProjector:
    """Onboard a `SentenceTransformer`: its projector for ``anchor_set``, with no training.

    The model's own ``encode`` (every module, a ``Normalize`` included; no extra
    normalisation) embeds the anchor set's support inputs (the anchors) and ``corpus`` (the
    whitening statistics, float64; ideally many more texts than the support set and never the
    texts to be projected later). So the projector describes exactly the embeddings that
    `RelativeProjection` receives when appended to this model.

    Keyword arguments go to `RelativeProjector.from_anchor_set` (``similarity``, provenance).
    The encoder's Hub id is recorded when the model tells it (never a local path); the pooling
    only when the pipeline is a plain Transformer + Pooling, optionally ending in ``Normalize``
    (then `RelativeWrapper` gives the same features from the bare encoder: it normalises the
    pooled embeddings when the statistics say they were normalised).
    """
    _check_no_projection(model)
    if not all(isinstance(text, str) for text in anchor_set.support):
        raise ValueError(
            "The anchor set's support inputs are not texts (it was built for images or from "
            "dataset references); a SentenceTransformer can only be onboarded on text support."
        )
    if len(corpus) < 2:
        raise ValueError(
            f"The corpus for the whitening statistics has {len(corpus)} texts; give many "
            "(ideally several times the embedding size)."
        )

    def encode(texts: Sequence[str]) -> Tensor:
        embeddings = model.encode(
            list(texts),
            batch_size=batch_size,
            convert_to_tensor=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        return embeddings.detach().to("cpu", torch.float64)

    for key, value in _provenance(model).items():
        projector_kwargs.setdefault(key, value)
    return RelativeProjector.from_anchor_set(
        anchor_set,
        encode(anchor_set.support),
        Statistics.from_embeddings(encode(corpus)),
        **projector_kwargs,
    )


def _check_no_projection(model: SentenceTransformer) -> None:
    if any(isinstance(module, RelativeProjection) for module in model):
        raise ValueError(
            "The model already has a RelativeProjection module: its encode gives relative "
            "features, not the embeddings a projector is built on or applied to. Start from the "
            "model without it (SentenceTransformer(modules=list(model)[:-1]))."
        )


def _provenance(model: SentenceTransformer) -> dict[str, Any]:
    """Encoder id, revision and pooling, as far as the model tells (``{}`` when unknown)."""
    modules = list(model)
    first = modules[0]
    auto_model = getattr(first, "auto_model", None) or getattr(first, "model", None)
    provenance: dict[str, Any] = {}
    if auto_model is not None:
        encoder_id, revision = encoder_provenance(auto_model)
        if encoder_id:
            provenance.update(encoder_id=encoder_id, encoder_revision=revision)
    if len(modules) == 2 or (len(modules) == 3 and isinstance(modules[2], Normalize)):
        # a Normalize after the pooling is read off the statistics (normalized_embeddings) and
        # applied by RelativeWrapper, so the pooling alone is what it needs to be told
        mode = getattr(modules[1], "pooling_mode", None)
        if mode in SENTENCE_TRANSFORMERS_POOLINGS and getattr(modules[1], "include_prompt", True):
            provenance.update(pooling=SENTENCE_TRANSFORMERS_POOLINGS[mode], layer=-1)
    return provenance
