"""`RelativeModelForSequenceClassification`: encoder + projector + head as one `PreTrainedModel`.

A head trained on encoder A's relative features serves text through encoder B: B's encoder, B's
projector and A's head (the same anchor set), composed into a model that
``transformers.pipeline("text-classification")`` serves like any classifier. Its saved folder is
small, like a PEFT adapter: the projector's and the head's tensors, the encoder's tokenizer, the
code that loads it with transformers alone (``trust_remote_code=True``) and a card; the encoder
is named by Hub id and commit in ``config.json`` and loaded by `from_pretrained`, never saved.

Read top to bottom: the model (built from a wrapper and a head, or loaded), its forward and
predictions, its save.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torch import Tensor, nn
from transformers import AutoTokenizer, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from relrep_hf.models.configuration_relative_classifier import RelativeClassifierConfig
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    check_head_matches_projector,
)
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.models.modeling_relative_wrapper import RelativeWrapper, RelativeWrapperWithHead
from relrep_hf.models.modeling_utils import RelrepPreTrainedModel
from relrep_hf.models.remote_code import write_remote_code
from relrep_hf.models.wrapper_parts import LoadOptions, load_wrapper_parts, recorded_encoder

__all__ = ["RelativeModelForSequenceClassification"]

_HUB_KEYS = ("token", "cache_dir", "local_files_only", "force_download")


class RelativeModelForSequenceClassification(RelrepPreTrainedModel):
    r"""Text (or images) -> labels through any encoder whose projector shares the head's anchor set.

    Build one from a `RelativeWrapper` (encoder B + its projector) and a head trained on any
    encoder's relative features with `from_wrapper`, or load a saved one with `from_pretrained`
    (which loads the encoder its config names). The head must speak the projector's anchor set
    and similarity (`check_head_matches_projector`, the rule `RelativeWrapper.with_head` applies).

    Args:
        config (`RelativeClassifierConfig`): the encoder's name, the projector's and head's configs.

    Example:
        >>> from transformers import pipeline  # doctest: +SKIP
        >>> from relrep_hf import RelativeModelForSequenceClassification, RelativeWrapper
        >>> wrapper_b = RelativeWrapper.from_pretrained("me/encoder-b-projector")  # doctest: +SKIP
        >>> model = RelativeModelForSequenceClassification.from_wrapper(  # doctest: +SKIP
        ...     wrapper_b, "me/head-trained-on-encoder-a"
        ... )
        >>> classify = pipeline(  # doctest: +SKIP
        ...     "text-classification", model=model, tokenizer=wrapper_b.tokenizer
        ... )
        >>> classify(["The socket is closed."], top_k=2)  # doctest: +SKIP
    """

    config_class = RelativeClassifierConfig
    artifact_kind = "classifier"  # its names follow from it and the config (RelrepPreTrainedModel)
    main_input_name = "input_ids"

    def __init__(self, config: RelativeClassifierConfig):
        super().__init__(config)
        projector_config, head_config = config.projector_config, config.head_config
        check_head_matches_projector(head_config, projector_config)
        self.projector = RelativeProjector(projector_config)
        self.head = RelativeHeadForClassification(head_config)
        self.encoder: nn.Module | None = None  # attached by from_wrapper / from_pretrained
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Nothing here: the projector and the head initialise (or load) their own tensors."""

    # ----------------------------------------------------------------------------- building

    @classmethod
    def from_wrapper(
        cls,
        wrapper: RelativeWrapper,
        head: RelativeHeadForClassification | str | os.PathLike,
        **hub_kwargs: Any,
    ) -> RelativeModelForSequenceClassification:
        """The classifier of ``wrapper`` (encoder + projector) and ``head`` (a loaded head, or its
        Hub id or folder), sharing their modules; in eval mode.

        Raises:
            ValueError: the head does not read the projector's features (another anchor set,
                similarity or number of anchors).
        """
        if isinstance(head, (str, os.PathLike)):
            head = RelativeHeadForClassification.from_pretrained(head, **hub_kwargs)
        projector = wrapper._projector_with_provenance()  # records the encoder it knows
        config = RelativeClassifierConfig(projector=projector.config, head=head.config)
        model = cls(config)  # checks the head against the projector
        model.projector, model.head = wrapper.projector, head
        model._attach(wrapper)
        return model.eval()

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str | os.PathLike,
        *args,
        encoder: str | os.PathLike | nn.Module | None = None,
        tokenizer: Any = None,
        strict: bool = True,
        encoder_revision: str | None = None,
        load_encoder: bool = True,
        **kwargs,
    ):
        """Load a saved classifier (folder or Hub id) and the encoder its config names.

        Args:
            encoder: load (or take) this encoder instead of the one the config names.
            tokenizer: use this tokenizer (default: the one saved in the folder, else the
                encoder's).
            strict: see `RelativeWrapper` (mismatches of encoder, pooling, layer are errors).
            encoder_revision: the encoder's revision (default: the commit the config records).
            load_encoder: ``False`` loads (and checks) the projector and the head alone, to
                inspect or push the folder; such a model has no forward until it has an encoder.
            kwargs: transformers' ``from_pretrained`` keywords (``revision``, ``token``,
                ``cache_dir``, ``local_files_only``, ``dtype``, ...).

        Raises:
            ValueError: the config names no encoder that can be loaded, and none was passed.
        """
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        if not load_encoder:
            return model
        source = str(pretrained_model_name_or_path)
        hub_kwargs = {key: kwargs[key] for key in _HUB_KEYS if key in kwargs}
        gguf_file = None
        if encoder is None:
            fix = (
                "Pass the encoder: RelativeModelForSequenceClassification.from_pretrained("
                f"{source!r}, encoder=...) (a Hub id, a local folder or a loaded model)."
            )
            encoder, revision, _ = recorded_encoder(
                model.config, source, what="text classifier", fix=fix
            )
            encoder_revision = encoder_revision or revision or None
            gguf_file = model.projector.config.encoder_gguf_file or None
        if tokenizer is None:
            tokenizer = _saved_tokenizer(pretrained_model_name_or_path, kwargs, hub_kwargs)
        options = LoadOptions(
            dtype=kwargs.get("dtype"),  # the encoder's too (a pipeline passes "auto")
            revision=encoder_revision,
            tokenizer=tokenizer,
            gguf_file=gguf_file,
            hub_kwargs=hub_kwargs,
        )
        loaded, _, preprocessor, revision, _ = load_wrapper_parts(encoder, model.projector, options)
        wrapper = RelativeWrapper(
            loaded, model.projector, preprocessor, strict=strict, encoder_revision=revision
        )
        model._attach(wrapper)
        return model.to(model.projector.weight.device).eval()

    def _attach(self, wrapper: RelativeWrapper) -> None:
        """Take ``wrapper``'s encoder (a submodule: ``to()``, ``eval()`` reach it) and keep the
        wrapper for pooling and encoding; it is not a submodule, its modules are this model's."""
        self.encoder = wrapper.encoder
        self.__dict__["wrapper"] = wrapper

    @property
    def preprocessor(self) -> Any:
        """The encoder's tokenizer (or image processor)."""
        return self._wrapper().preprocessor

    def _wrapper(self) -> RelativeWrapper:
        wrapper = self.__dict__.get("wrapper")
        if wrapper is None:
            raise ValueError(
                "This classifier has no encoder: build it with "
                "RelativeModelForSequenceClassification.from_wrapper(wrapper, head) or load it "
                "with from_pretrained(folder), which loads the encoder its config names."
            )
        return wrapper

    # ----------------------------------------------------------------------------- forward

    def forward(self, labels: Tensor | None = None, **inputs: Tensor) -> SequenceClassifierOutput:
        """The head's logits (and loss with ``labels``) on a tokenized batch: the encoder's
        hidden states pooled as the projector records, projected, classified."""
        relative = self._wrapper()(**inputs).relative
        return self.head(relative.to(self.head.classifier.weight.device), labels=labels)

    def predict_proba(
        self, inputs: Iterable[Any], batch_size: int = 32, *, show_progress: bool | None = None
    ) -> Tensor:
        """Class probabilities ``[N, num_labels]`` (float32, CPU), rows in input order."""
        with_head = RelativeWrapperWithHead(self._wrapper(), self.head)
        return with_head.predict_proba(inputs, batch_size, show_progress=show_progress)

    def predict(
        self, inputs: Iterable[Any], batch_size: int = 32, *, show_progress: bool | None = None
    ) -> list[str]:
        """The most probable label of each input, as named by the head's ``id2label``."""
        with_head = RelativeWrapperWithHead(self._wrapper(), self.head)
        return with_head.predict(inputs, batch_size, show_progress=show_progress)

    # -------------------------------------------------------------------------------- save

    def _save_files(self, folder: Path, **kwargs: Any) -> None:
        """config.json (naming the encoder), the projector's and head's tensors only (never the
        encoder's), the encoder's tokenizer, and the remote code."""
        own = {
            name: tensor
            for name, tensor in self.state_dict().items()
            if not name.startswith("encoder.")
        }
        PreTrainedModel.save_pretrained(self, folder, state_dict=own, **kwargs)
        wrapper = self.__dict__.get("wrapper")
        if wrapper is not None:
            wrapper.preprocessor.save_pretrained(folder)
        write_remote_code(folder)

    def extra_repr(self) -> str:
        c = self.config
        return f"encoder_id={c.encoder_id!r}, num_labels={c.num_labels}"


def _saved_tokenizer(name_or_path: str | os.PathLike, kwargs: dict, hub_kwargs: dict) -> Any:
    """The tokenizer saved beside the classifier, or None when the folder has none."""
    folder = Path(name_or_path)
    if folder.is_dir() and not (folder / "tokenizer_config.json").is_file():
        return None
    try:
        return AutoTokenizer.from_pretrained(
            name_or_path, revision=kwargs.get("revision"), **hub_kwargs
        )
    except (OSError, ValueError, KeyError):
        return None
