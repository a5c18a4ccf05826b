"""`RelativeWrapper`: an encoder, its pooling and its `RelativeProjector`, composed at load time.

The wrapper is to a projector what a PEFT model is to an adapter: it holds any transformers
model (the encoder, loaded with `AutoModel`) and the small projector that belongs to it, checks
that they belong together (embedding size, pooling, layer, encoder id and revision: see
`relrep_hf.models.wrapper_parts`), encodes through the library's one encoding loop
(`relrep_hf.encoding`), forwards unknown attributes to the encoder, and saves only the
projector. Loading the parts, checking them, and the provenance the saved projector records, are
`relrep_hf.models.wrapper_parts`'.

Read top to bottom: the output class, the wrapper (load, checks, forward, encode, save), and
`RelativeWrapperWithHead`, which runs a head on the wrapper's relative features.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn
from transformers import PreTrainedTokenizerBase
from transformers.image_processing_utils import BaseImageProcessor
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.utils import ModelOutput

from relrep_hf.encoding import Pooling, encode_in_order, input_modality, pool_model_output
from relrep_hf.encoding.encoders import encoder_provenance
from relrep_hf.encoding.gguf_encoders import gguf_mismatch
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    check_head_matches_projector,
)
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.models.wrapper_parts import (
    LoadOptions,
    check_encoder_identity,
    check_hidden_size,
    check_preprocessor,
    load_wrapper_parts,
    mismatch,
    projector_and_recorded_encoder,
    projector_with_provenance,
    resolve_pooling_and_layer,
)

__all__ = ["RelativeWrapper", "RelativeWrapperOutput", "RelativeWrapperWithHead"]

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
    ) -> RelativeWrapperWithHead:
        """This wrapper with a classification head on its relative features (texts -> labels)."""
        if isinstance(head, (str, os.PathLike)):
            head = RelativeHeadForClassification.from_pretrained(head, **hub_kwargs)
        return RelativeWrapperWithHead(self, head)

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


class RelativeWrapperWithHead(nn.Module):
    r"""A `RelativeWrapper` and a head on its relative features: texts (or images) -> labels.

    The head may have been trained on another encoder's relative features: it must only share
    the projector's anchor set and similarity, which is checked.

    Args:
        wrapper (`RelativeWrapper`): encoder + projector.
        head (`RelativeHeadForClassification`): a head of the same anchor set.

    Example:
        >>> classifier = wrapper.with_head(head)  # doctest: +SKIP
        >>> classifier.predict(["The socket is closed.", "Sort the list in place."])  # doctest: +SKIP
        ['network', 'text']
    """

    def __init__(self, wrapper: RelativeWrapper, head: RelativeHeadForClassification):
        super().__init__()
        check_head_matches_projector(head.config, wrapper.projector.config)
        self.wrapper = wrapper
        self.head = head

    def forward(self, labels: Tensor | None = None, **inputs: Tensor) -> SequenceClassifierOutput:
        """The head's output (logits, and the loss with ``labels``) on a tokenized batch."""
        relative = self.wrapper(**inputs).relative
        return self.head(relative.to(self.head.device), labels=labels)

    def predict_proba(
        self, inputs: Iterable[Any], batch_size: int = 32, *, show_progress: bool | None = None
    ) -> Tensor:
        """Class probabilities ``[N, num_labels]`` (float32, CPU), rows in input order."""

        def forward(batch: dict[str, Tensor]) -> tuple[Tensor]:
            return (self(**batch).logits.softmax(dim=-1),)

        (probabilities,) = self.wrapper._run(
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
