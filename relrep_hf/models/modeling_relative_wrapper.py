"""`RelativeWrapper`: an encoder, its pooling and its `RelativeProjector`, composed at load time;
`RelativeModelForSequenceClassification`: the same with a head, as one `PreTrainedModel`.

The wrapper is to a projector what a PEFT model is to an adapter: it holds any transformers
model (the encoder, loaded with `AutoModel`) and the small projector that belongs to it, checks
that they belong together (embedding size, pooling, layer, encoder id and revision: see
`relrep_hf.models.wrapper_parts`), encodes through the library's one encoding loop
(`relrep_hf.encoding`), forwards unknown attributes to the encoder, and saves only the
projector. Loading the parts, checking them, and the provenance the saved projector records, are
`relrep_hf.models.wrapper_parts`'.

A head trained on encoder A's relative features serves text through encoder B: B's wrapper and
A's head (the same anchor set) make a `RelativeModelForSequenceClassification`
(``wrapper.with_head(head)``), which ``transformers.pipeline("text-classification")`` serves
like any classifier. Its saved folder is small, like a PEFT adapter: the projector's and the
head's tensors, the encoder's tokenizer, the code that loads it with transformers alone
(``trust_remote_code=True``) and a card; the encoder is named by Hub id and commit in
``config.json`` and loaded by `from_pretrained`, never saved. Both classes live here because each
needs the other (``with_head`` builds the classifier, the classifier's load builds a wrapper).

Read top to bottom: the output class, the wrapper (load, checks, forward, encode, save), and the
classifier (built from a wrapper and a head, or loaded; its forward and predictions; its save).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.image_processing_utils import BaseImageProcessor
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.utils import ModelOutput

from relrep_hf.encoding import Pooling, encode_in_order
from relrep_hf.encoding.encoders import encoder_provenance
from relrep_hf.encoding.gguf_encoders import gguf_mismatch
from relrep_hf.encoding.models import input_modality
from relrep_hf.encoding.pooling import pool_model_output
from relrep_hf.models.configuration_relative_classifier import RelativeClassifierConfig
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    check_head_matches_projector,
)
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.models.modeling_utils import RelrepPreTrainedModel
from relrep_hf.models.remote_code import write_remote_code
from relrep_hf.models.wrapper_parts import (
    LoadOptions,
    check_encoder_identity,
    check_hidden_size,
    check_preprocessor,
    load_wrapper_parts,
    mismatch,
    projector_and_recorded_encoder,
    projector_with_provenance,
    recorded_encoder,
    resolve_pooling_and_layer,
    saved_tokenizer,
)

__all__ = [
    "RelativeModelForSequenceClassification",
    "RelativeWrapper",
    "RelativeWrapperOutput",
    "RelativeWrapperWithHead",
]

ConvertTo = Literal["torch", "numpy"]


@dataclass
class RelativeWrapperOutput(ModelOutput):
    """Output of `RelativeWrapper`.

    Args:
        relative (`torch.Tensor` of shape `(batch_size, num_anchors)`): relative features.
        pooled (`torch.Tensor` of shape `(batch_size, hidden_size)`): the pooled embeddings
            of the encoder (absolute space) they were computed from.
    """

    relative: Tensor | None = None
    pooled: Tensor | None = None


class RelativeWrapper(nn.Module):
    r"""An encoder with its pooling and `RelativeProjector`: inputs in, relative features out.

    Load one with `RelativeWrapper.from_pretrained(projector)` (the encoder it records) or
    `RelativeWrapper.from_pretrained(encoder, projector)`, or build one from loaded parts. The
    pooling and layer default to those the projector records; a mismatch with the requested
    ones, or with the encoder the projector records, is an error unless ``strict=False`` (then
    a warning). A projector for another embedding size is always an error.

    Args:
        encoder (`nn.Module`): any transformers model (a `*ForCausalLM` pools its base model,
            an encoder-decoder its encoder, see `relrep_hf.encoding`).
        projector (`RelativeProjector`): the encoder's projector.
        preprocessor: the encoder's tokenizer, or its image processor for an image model.
        pooling (`str`, *optional*): ``"mean"``, ``"cls"`` or ``"last"``; default the projector's.
        layer (`int`, *optional*): hidden layer to pool; default the projector's.
        strict (`bool`, defaults to `True`): mismatches are errors (``False``: warnings).
        encoder_id, encoder_revision (`str`, *optional*): the encoder's Hub id and commit when
            the model does not tell them (see `relrep_hf.encoding.encoders.encoder_provenance`).

    Example:
        >>> from relrep_hf.models.modeling_relative_wrapper import RelativeWrapper
        >>> wrapper = RelativeWrapper.from_pretrained(  # doctest: +SKIP
        ...     "sentence-transformers/all-MiniLM-L6-v2", "my-org/minilm-relative-projector"
        ... )
        >>> wrapper.encode(["A first sentence.", "A second one."]).shape  # doctest: +SKIP
        torch.Size([2, 300])
    """

    def __init__(
        self,
        encoder: nn.Module,
        projector: RelativeProjector,
        preprocessor: Any,
        *,
        pooling: Pooling | None = None,
        layer: int | None = None,
        strict: bool = True,
        encoder_id: str | None = None,
        encoder_revision: str | None = None,
    ):
        super().__init__()
        if not isinstance(projector, RelativeProjector):
            raise ValueError(
                f"Expected a RelativeProjector, got {type(projector).__name__}. Load it with "
                f"RelativeProjector.from_pretrained(path)."
            )
        modality = input_modality(encoder)
        check_preprocessor(encoder, preprocessor, modality)
        known_id, known_revision = encoder_provenance(encoder)
        self.encoder_id = encoder_id or known_id
        self.encoder_revision = encoder_revision or known_revision
        check_hidden_size(encoder, projector.config, modality)
        self.pooling, self.layer = resolve_pooling_and_layer(
            encoder, projector.config, pooling, layer, modality, strict
        )
        check_encoder_identity(projector.config, self.encoder_id, self.encoder_revision, strict)
        self.encoder = encoder
        self.projector = projector
        self.preprocessor = preprocessor
        self.modality = modality
        self.encoder_gguf: dict[str, str] = {}  # GGUF file and quantisation, set on loading one

    # ----------------------------------------------------------------------------- loading

    @classmethod
    def from_pretrained(
        cls,
        encoder: str | os.PathLike | nn.Module | RelativeProjector,
        projector: str | os.PathLike | RelativeProjector | None = None,
        *,
        pooling: Pooling | None = None,
        layer: int | None = None,
        strict: bool = True,
        dtype: torch.dtype | str | None = None,
        device: torch.device | str | None = None,
        revision: str | None = None,
        projector_revision: str | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        image_processor: BaseImageProcessor | None = None,
        gguf_file: str | None = None,
        **hub_kwargs: Any,
    ) -> RelativeWrapper:
        """Load (or take) an encoder, its tokenizer or image processor, and its projector.

        ``RelativeWrapper.from_pretrained(projector)`` with one argument loads the encoder the
        projector records (Hub id and revision, GGUF file; its pooling and layer as always), as
        ``AutoPeftModel`` reads its base model from the adapter; ``(encoder, projector)`` uses
        the encoder given instead.

        Args:
            encoder: a Hub id or local folder (loaded with `AutoModel.from_pretrained`), or a
                loaded model; alone, the projector (see above).
            projector: a Hub id or local folder of a saved `RelativeProjector`, or a loaded one.
            pooling, layer, strict: see the class; default pooling and layer: the projector's.
            dtype: the encoder's dtype (``torch.bfloat16``, ``"auto"``, ...); the projector
                stays float32. A loaded encoder is cast in place.
            device: where the encoder and projector go (a loaded encoder is moved in place).
            revision: the encoder's revision (branch, tag or commit) on the Hub.
            projector_revision: the projector's revision.
            tokenizer, image_processor: use these instead of loading them with the encoder.
            gguf_file: a GGUF file in the encoder's folder or repo, dequantized on load (see
                `relrep_hf.encoding.gguf_encoders`); its tokenizer too, where transformers can build it.
            hub_kwargs: ``token``, ``cache_dir``, ``local_files_only``, ... for every download.

        Raises:
            ValueError: the parts do not belong together (see the class), or an image model has
                no image processor / a text model no tokenizer, or a projector given alone
                records no encoder that can be loaded (pass the encoder then).
        """
        if projector is None:  # the projector alone: load the encoder it records
            projector, encoder, revision, gguf_file = projector_and_recorded_encoder(
                encoder, revision, gguf_file, projector_revision, hub_kwargs
            )
        options = LoadOptions(dtype, device, revision, projector_revision, tokenizer,
                              image_processor, gguf_file, hub_kwargs)  # fmt: skip
        model, projector, preprocessor, encoder_revision, gguf = load_wrapper_parts(
            encoder, projector, options
        )
        loaded_by_id = isinstance(encoder, (str, os.PathLike))  # else its GGUF file is unknown
        config = getattr(projector, "config", None)  # a wrong projector type fails in __init__
        message = gguf_mismatch(config, gguf) if loaded_by_id else None
        if message:
            mismatch(message, strict)
        wrapper = cls(
            model,
            projector,
            preprocessor,
            pooling=pooling,
            layer=layer,
            strict=strict,
            encoder_revision=encoder_revision,
        )
        wrapper.encoder_gguf = gguf
        return wrapper

    # ------------------------------------------------------------------------ attributes

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase | None:
        """The encoder's tokenizer (``None`` for image models)."""
        return self.preprocessor if self.modality == "text" else None

    @property
    def image_processor(self) -> BaseImageProcessor | None:
        """The encoder's image processor (``None`` for text models)."""
        return self.preprocessor if self.modality == "image" else None

    def __getattr__(self, name: str) -> Any:
        """Forward unknown attributes to the encoder (``wrapper.config``, ``wrapper.device``)."""
        try:
            return super().__getattr__(name)  # parameters, buffers, submodules
        except AttributeError:
            if name == "encoder":  # not set yet (inside __init__, unpickling): no recursion
                raise
            return getattr(self.encoder, name)

    # --------------------------------------------------------------------------- forward

    def forward(self, **inputs: Tensor) -> RelativeWrapperOutput:
        """Relative features and pooled embeddings of a tokenized (or processed) batch.

        Args:
            inputs: the tokenizer's output (``input_ids``, ``attention_mask``, ...) or the image
                processor's (``pixel_values``), on the encoder's device.

        Returns:
            `RelativeWrapperOutput` with ``relative [B, m]`` (the projector's dtype) and
            ``pooled [B, d]`` (the encoder's dtype), L2-normalised when the projector records
            that its statistics came from normalised embeddings (``normalized_embeddings``, as
            a sentence-transformers model ending in ``Normalize`` gives them).
        """
        pooled = pool_model_output(self.encoder, inputs, self.pooling, self.layer)
        if self.projector.config.normalized_embeddings:  # built on L2-normalised embeddings
            pooled = nn.functional.normalize(pooled, dim=-1)
        return RelativeWrapperOutput(relative=self.projector(pooled), pooled=pooled)

    def encode(
        self,
        inputs: Iterable[str] | Iterable[Any],
        batch_size: int = 32,
        *,
        show_progress: bool | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        convert_to: ConvertTo = "torch",
        return_pooled: bool = False,
    ) -> Tensor | Any:
        """Relative features of a list of texts (or PIL images), rows in input order.

        Texts are sorted by length (characters, as sentence-transformers does) and batched so
        that padding is not wasted; the outputs are put back in input order. Texts longer than
        the model's input limit (the tokenizer's ``model_max_length`` capped by the positions
        the model has; never the config's generation ``max_length``) are truncated, with one
        warning. Runs under ``torch.inference_mode()`` with the model in eval mode.

        Args:
            inputs: a non-empty list of strings (or PIL images for an image encoder).
            batch_size: inputs per forward.
            show_progress: a progress bar; default for 1024 inputs or more.
            dtype: dtype of the returned tensors (default: the projector's for the relative
                features, the encoder's for the pooled embeddings).
            device: where the returned tensors live (default: the encoder's device).
            convert_to: ``"torch"`` tensors or ``"numpy"`` arrays.
            return_pooled: also return the pooled embeddings.

        Returns:
            The relative features ``[N, m]``; with ``return_pooled`` a `RelativeWrapperOutput`
            with ``relative [N, m]`` and ``pooled [N, d]``.
        """
        if convert_to not in ("torch", "numpy"):
            raise ValueError(f"Invalid convert_to {convert_to!r}. Valid: 'torch', 'numpy'.")

        def forward(batch: dict[str, Tensor]) -> tuple[Tensor, ...]:
            output = self(**batch)
            return (output.relative, output.pooled) if return_pooled else (output.relative,)

        outputs = self._run(inputs, forward, batch_size, show_progress, dtype, device)
        if convert_to == "numpy":  # NumPy has no bfloat16
            outputs = tuple(
                (t.float() if t.dtype in (torch.bfloat16, torch.float16) else t).cpu().numpy()
                for t in outputs
            )
        if return_pooled:
            return RelativeWrapperOutput(relative=outputs[0], pooled=outputs[1])
        return outputs[0]

    def _run(
        self,
        inputs: Iterable[Any],
        forward: Callable[[Mapping[str, Tensor]], tuple[Tensor, ...]],
        batch_size: int,
        show_progress: bool | None,
        dtype: torch.dtype | None,
        device: torch.device | str | None,
        eval_modules: Sequence[nn.Module] = (),
    ) -> tuple[Tensor, ...]:
        """`encoding.encode_in_order` as `encode` and the head run it (one truncation warning),
        then the projector's deferred finite checks read once (the outputs are complete: on a
        GPU, no forward waited for them)."""
        try:
            outputs = encode_in_order(
                self.encoder,
                self.preprocessor,
                inputs,
                forward,
                batch_size=batch_size,
                eval_modules=(self.projector, *eval_modules),
                show_progress=show_progress,
                output_device=device,
                output_dtype=dtype,
            )[0]
        except BaseException:
            self.projector._nonfinite.discard()  # the run's records die with it
            raise
        self.projector.check_finite()
        return outputs

    def with_head(
        self, head: RelativeHeadForClassification | str | os.PathLike, **hub_kwargs: Any
    ) -> RelativeModelForSequenceClassification:
        """This wrapper with a classification head on its relative features (texts -> labels):
        a `RelativeModelForSequenceClassification` sharing its modules (in eval mode), which
        ``transformers.pipeline("text-classification")`` serves and ``predict`` runs.

        Raises:
            ValueError: the head does not read the projector's features (another anchor set,
                similarity or number of anchors).
        """
        return RelativeModelForSequenceClassification.from_wrapper(self, head, **hub_kwargs)

    # ------------------------------------------------------------------------------ save

    def save_pretrained(self, save_directory: str | os.PathLike, **kwargs: Any) -> None:
        """Save the projector only (config.json + model.safetensors); never the encoder.

        Provenance the projector does not record yet (its pooling, the encoder's Hub id and
        commit, when the wrapper knows them) is written into the saved config; the projector
        in memory is left as it is. ``kwargs`` go to `RelativeProjector.save_pretrained`
        (``push_to_hub=True``, ``repo_id``, ``token``, ...).
        """
        self._projector_with_provenance().save_pretrained(save_directory, **kwargs)

    def push_to_hub(self, repo_id: str, **kwargs: Any) -> Any:
        """Push the projector (only) to the Hub; see `save_pretrained`."""
        return self._projector_with_provenance().push_to_hub(repo_id, **kwargs)

    def _projector_with_provenance(self) -> RelativeProjector:
        """The projector, or a shallow copy of it whose config also records what we know."""
        return projector_with_provenance(
            self.projector,
            pooling=self.pooling,
            encoder_id=self.encoder_id,
            encoder_revision=self.encoder_revision,
            encoder_gguf=self.encoder_gguf,
        )

    def extra_repr(self) -> str:
        return f"pooling={self.pooling!r}, layer={self.layer}, modality={self.modality!r}"


_HUB_KEYS = ("token", "cache_dir", "local_files_only", "force_download")


class RelativeModelForSequenceClassification(RelrepPreTrainedModel):
    r"""Text (or images) -> labels through any encoder whose projector shares the head's anchor set.

    Build one from a `RelativeWrapper` (encoder B + its projector) and a head trained on any
    encoder's relative features with `from_wrapper`, or load a saved one with `from_pretrained`
    (which loads the encoder its config names). The head must speak the projector's anchor set
    and similarity (`check_head_matches_projector`); ``wrapper.with_head(head)`` is `from_wrapper`.

    Args:
        config (`RelativeClassifierConfig`): the encoder's name, the projector's and head's configs.

    Example:
        >>> from transformers import pipeline  # doctest: +SKIP
        >>> from relrep_hf import RelativeModelForSequenceClassification, RelativeWrapper
        >>> wrapper_b = RelativeWrapper.from_pretrained("me/encoder-b-projector")  # doctest: +SKIP
        >>> model = wrapper_b.with_head("me/head-trained-on-encoder-a")  # doctest: +SKIP
        >>> classify = pipeline(  # doctest: +SKIP
        ...     "text-classification", model=model, tokenizer=wrapper_b.tokenizer
        ... )
        >>> classify(["The socket is closed."], top_k=2)  # doctest: +SKIP
    """

    config_class = RelativeClassifierConfig
    artifact_kind = "classifier"  # its names follow from it and the config (RelrepPreTrainedModel)
    main_input_name = "input_ids"

    def __init__(self, config: RelativeClassifierConfig, *inputs: Any):
        if not isinstance(config, RelativeClassifierConfig):  # RelativeWrapperWithHead(w, h)
            raise TypeError(
                f"RelativeModelForSequenceClassification takes a RelativeClassifierConfig, got "
                f"{type(config).__name__}. Compose an encoder's wrapper and a head with "
                f"wrapper.with_head(head) (RelativeModelForSequenceClassification.from_wrapper)."
            )
        super().__init__(config, *inputs)
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
            tokenizer = saved_tokenizer(pretrained_model_name_or_path, kwargs, hub_kwargs)
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

        def forward(batch: dict[str, Tensor]) -> tuple[Tensor]:
            return (self(**batch).logits.softmax(dim=-1),)

        (probabilities,) = self._wrapper()._run(
            inputs, forward, batch_size, show_progress, torch.float32, "cpu", (self.head,)
        )
        return probabilities

    def predict(
        self, inputs: Iterable[Any], batch_size: int = 32, *, show_progress: bool | None = None
    ) -> list[str]:
        """The most probable label of each input, as named by the head's ``id2label``."""
        probabilities = self.predict_proba(inputs, batch_size, show_progress=show_progress)
        id2label = self.head.config.id2label
        return [id2label[int(i)] for i in probabilities.argmax(dim=-1)]

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


# the name `RelativeWrapper.with_head` gave its result before it was a `PreTrainedModel`
RelativeWrapperWithHead = RelativeModelForSequenceClassification
