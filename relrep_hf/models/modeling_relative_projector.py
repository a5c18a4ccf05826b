"""`RelativeProjector`: one encoder's statistics and anchors as a `PreTrainedModel`.

The projector maps an encoder's embeddings ``[..., d]`` to relative features
``[..., m]``. Its state is the encoder's mean, whitening matrix and anchors
(persistent buffers, float64 estimates stored in the model's dtype) and the fused
``weight [d, m]`` / ``bias [m]`` that the similarity applies (frozen parameters,
prepared once in float64). For ``wip`` and ``inner`` the forward is one ``addmm``.
Nothing is ever estimated from the batch being projected, so the output of a row
does not depend on the batch it came in.

The projector also records whether its statistics came from L2-normalised embeddings
(``config.normalized_embeddings``, read off the statistics: normalised rows have a mean
squared norm of exactly 1). sentence-transformers normalises by default, so
``projector(st_model.encode(texts))`` on a projector fitted on unnormalised pooling gives
features far from the wrapper's; the first batch's row norms are checked (once, cheaply) and a
warning says so.

NaN or Inf in the output is an error, checked where it costs nothing: at once on the CPU, and
on an accelerator recorded on the device and read at the next point that waits for it anyway
(`RelativeWrapper.encode`, `RelativeProjector.check_finite`), since reading a GPU value in every
forward made the host wait for the GPU at every call (``finite_check`` chooses).
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import torch
from torch import Tensor, nn

from relrep_hf.functional.similarities import apply_prepared, get_similarity, prepare_anchors
from relrep_hf.functional.statistics import Statistics, whiten, whitening_matrix
from relrep_hf.models.configuration_relative_projector import RelativeProjectorConfig
from relrep_hf.models.modeling_utils import RelrepPreTrainedModel
from relrep_hf.models.remote_code import write_remote_code
from relrep_hf.models.remote_code.modeling_relative_projector import declare_tensors
from relrep_hf.utils.hub_files import artifact_kind
from relrep_hf.utils.validation import (
    DeferredFiniteCheck,
    EmbeddingsLike,
    as_embeddings,
    check_embeddings,
    check_finite,
    check_same_device,
)

if TYPE_CHECKING:
    from relrep_hf.models.anchor_set import AnchorSet

# Rows whose norms all lie within this of 1 are taken as L2-normalised (float16 rounding included).
UNIT_NORM_TOLERANCE = 1e-2
# Rows of the first batch whose norms are checked against the statistics.
NORM_CHECK_ROWS = 1024
# When the forward checks its output for NaN / Inf: "auto" is at once on the CPU (reading a
# value there costs nothing) and deferred elsewhere (reading a GPU value waits for the GPU).
FiniteCheck = Literal["auto", "immediate", "deferred"]


class RelativeProjector(RelrepPreTrainedModel):
    r"""Relative projection of one encoder's embeddings onto a shared set of anchors.

    Build one from anchors and statistics with [`~RelativeProjector.from_statistics`], from an
    `AnchorSet` with `from_anchor_set`, or load one with `from_pretrained`.

    Example:
        >>> import torch
        >>> from relrep_hf import RelativeProjector, Statistics
        >>> x = torch.randn(1000, 16, dtype=torch.float64)
        >>> projector = RelativeProjector.from_statistics(x[:8], Statistics.from_embeddings(x))
        >>> projector(x[:4].float()).shape
        torch.Size([4, 8])
    """

    config_class = RelativeProjectorConfig
    artifact_kind = "projector"  # its names follow from it and the config (RelrepPreTrainedModel)
    main_input_name = "embeddings"

    def __init__(self, config: RelativeProjectorConfig):
        super().__init__(config)
        declare_tensors(self, config.hidden_size, config.num_anchors)  # the remote code's layout
        self._norms_checked = False  # the first forward compares input norms with the statistics
        self._finite_check: FiniteCheck = "auto"
        self._nonfinite = DeferredFiniteCheck("RelativeProjector")  # the deferred checks' record
        # read once: the weights are prepared for this width and similarity
        self._shape_and_similarity = (config.hidden_size, config.similarity)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Nothing to initialise: every tensor comes from data (or from the checkpoint)."""

    @classmethod
    def from_statistics(
        cls,
        anchors: EmbeddingsLike,
        statistics: Statistics | None,
        *,
        similarity: str = "wip",
        shrinkage: float | None = None,
        eps: float | None = None,
        dtype: torch.dtype = torch.float32,
        **config_kwargs,
    ) -> RelativeProjector:
        """A projector from raw anchors ``[m, d]`` (in the encoder's space) and its statistics.

        ``statistics`` may be ``None`` only for similarities that do not use them (``cosine``,
        ``inner``, distances). The whitening and the fused weights are computed in float64 and
        stored in ``dtype``. Extra keyword arguments go to `RelativeProjectorConfig`
        (provenance: ``encoder_id``, ``pooling``, ``layer``, ``anchor_set_id``, ...).
        Computed on the anchors' device (the statistics must be there too), where the projector
        is returned.
        """
        spec = get_similarity(similarity)
        anchors = as_embeddings(anchors, name="anchors")
        if statistics is not None:
            check_same_device(anchors=anchors, statistics=statistics.mean)
        check_embeddings(anchors, name="anchors", min_rows=1)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(
                f"dtype must be a floating-point torch dtype (torch.float32, torch.float64, "
                f"torch.bfloat16, ...), got {dtype!r}: a projector's features are real numbers."
            )
        if anchors.ndim != 2:
            raise ValueError(f"anchors must have shape [m, d], got {tuple(anchors.shape)}.")
        m, d = anchors.shape
        if statistics is None and spec.needs_statistics:
            raise ValueError(
                f"Similarity {similarity!r} needs the encoder's whitening statistics: pass "
                "Statistics.from_embeddings(embeddings) (or a streamed Statistics)."
            )
        config = RelativeProjectorConfig(
            hidden_size=d,
            num_anchors=m,
            similarity=similarity,
            **({} if statistics is None else _norm_record(statistics)),
            **({} if shrinkage is None else {"shrinkage": shrinkage}),
            **({} if eps is None else {"eps": eps}),
            **config_kwargs,
        )
        if statistics is None:
            mean = torch.zeros(d, dtype=torch.float64, device=anchors.device)
            whitening = torch.eye(d, dtype=torch.float64, device=anchors.device)
        else:
            if statistics.dim != d:
                raise ValueError(
                    f"The statistics have dimension {statistics.dim} but the anchors have {d}: "
                    "they must come from the same encoder, pooling and layer."
                )
            mean = statistics.mean
            whitening = whitening_matrix(statistics, shrinkage=config.shrinkage, eps=config.eps)
        anchors = anchors.detach().to(torch.float64)
        weight, bias = prepare_anchors(
            anchors, similarity=similarity, mean=mean, whitening=whitening
        )
        # filled in float64 on the anchors' device, cast once at the end
        projector = cls(config).to(device=anchors.device, dtype=torch.float64)
        with torch.no_grad():
            for name, value in [
                ("mean", mean),
                ("whitening", whitening),
                ("anchors", anchors),
                ("weight", weight),
                ("bias", bias),
            ]:
                getattr(projector, name).copy_(value)
        return projector.to(dtype).eval()

    @classmethod
    def from_anchor_set(
        cls,
        anchor_set: AnchorSet,
        support_embeddings: EmbeddingsLike,
        statistics: Statistics | EmbeddingsLike | None,
        **kwargs,
    ) -> RelativeProjector:
        """An encoder's projector from an anchor set, with no training.

        ``support_embeddings [K, d]`` are the encoder's embeddings of the anchor set's support
        inputs, in order; ``statistics`` its whitening statistics (a `Statistics`, or the
        embeddings to estimate them from: ideally many more rows than the support set).
        Embeddings may be tensors, NumPy arrays or lists of floats. Keyword arguments go to
        `from_statistics` (dtype, provenance); the similarity, shrinkage and eps are the anchor
        set's (those its anchors were fitted with) unless given. The projector records the
        anchor set's fingerprint. Computed on the support embeddings' device (the statistics
        must be there too), where the projector is returned.
        """
        support_embeddings = as_embeddings(support_embeddings, name="support embeddings")
        if statistics is not None and not isinstance(statistics, Statistics):
            statistics = as_embeddings(statistics, name="statistics embeddings")
            check_same_device(support_embeddings=support_embeddings, statistics=statistics)
            statistics = Statistics.from_embeddings(statistics)
        if statistics is not None:
            check_same_device(support_embeddings=support_embeddings, statistics=statistics.mean)
        if statistics is not None and statistics.dim != support_embeddings.shape[-1]:
            raise ValueError(
                f"The statistics are {statistics.dim}-dimensional but the support embeddings "
                f"are {support_embeddings.shape[-1]}-dimensional: both must come from the "
                "encoder being onboarded (same model, layer and pooling). Estimate the "
                "statistics from that encoder's embeddings."
            )
        for key, value in anchor_set.similarity_settings.items():
            if kwargs.get(key) is None:
                kwargs[key] = value
        kwargs.setdefault("anchor_set_id", anchor_set.repo_id)
        kwargs.setdefault("anchor_set_revision", anchor_set.revision)
        kwargs.setdefault("anchor_set_fingerprint", anchor_set.fingerprint)
        affine_centered = get_similarity(kwargs["similarity"]).needs_statistics
        if anchor_set.mixing == "linear" and not affine_centered:
            raise ValueError(
                f"A 'linear' anchor set mixes WIP features; similarity {kwargs['similarity']!r} "
                "cannot use it. Build the projector with similarity='wip'."
            )
        mean = statistics.mean if affine_centered and statistics is not None else None
        anchors = anchor_set.anchors(support_embeddings, mean=mean)
        return cls.from_statistics(anchors, statistics, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *args, **kwargs):
        """Load a saved projector; a local anchor set or run folder gets an error that says so."""
        folder = Path(pretrained_model_name_or_path)
        kind = None
        if folder.is_dir() and not (folder / "config.json").is_file():
            with contextlib.suppress(FileNotFoundError):  # transformers' error names what lacks
                kind = artifact_kind(folder)
        if kind == "anchor_set":
            raise ValueError(
                f"{str(folder)!r} holds an anchor set, not a projector: load it with "
                "AnchorSet.from_pretrained, and build an encoder's projector with "
                "RelativeProjector.from_anchor_set(anchor_set, support_embeddings, statistics)."
            )
        if kind == "run":
            raise ValueError(
                f"{str(folder)!r} is a run folder: its projectors are in projectors/<encoder>/ "
                f"(load one of {sorted(p.name for p in (folder / 'projectors').glob('*'))})."
            )
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    @property
    def whitened_anchors(self) -> Tensor:
        """The anchors in the encoder's whitened space, ``(A - mu) L`` ([m, d])."""
        return whiten(self.anchors, mean=self.mean, whitening=self.whitening)

    def forward(self, embeddings: EmbeddingsLike) -> Tensor:
        """Relative features ``[..., m]`` of ``embeddings [..., d]`` (a tensor, a NumPy array or
        a list of floats).

        The first call warns when the input's row norms contradict the statistics: unit rows
        (L2-normalised, as sentence-transformers returns them) for a projector fitted on
        unnormalised embeddings, or the reverse. Embed the way the projector was built.
        Tensors must be on the projector's device (NumPy arrays and lists go there); the
        features come back there. NaN or Inf in the features is a ``ValueError``: at once on the
        CPU, at the next `check_finite` elsewhere (see `finite_check`).
        """
        # The work around the one matmul is kept to a few tensor calls and no config reads
        # (each read of a transformers config attribute cost ~35 us): on a GPU they are not
        # hidden behind the matmul (1.30x a bare addmm on an H200 before, N = 65,536).
        weight = self.weight
        if not isinstance(embeddings, Tensor):
            embeddings = as_embeddings(embeddings).to(weight.device)
        elif embeddings.device != weight.device:
            check_same_device(embeddings=embeddings, projector=weight)
        if not self._norms_checked:
            self._norms_checked = True
            self._check_norms(embeddings)
        hidden_size, similarity = self._shape_and_similarity
        if embeddings.shape[-1] != hidden_size:
            check_embeddings(
                embeddings,
                dim=hidden_size,
                dim_hint=" (the projector's hidden_size): the projector belongs to another "
                "encoder, pooling or layer",
            )
        if embeddings.dtype != weight.dtype:
            embeddings = embeddings.to(weight.dtype)
        relative = apply_prepared(embeddings, weight, self.bias, similarity=similarity)
        mode = self._finite_check
        if mode == "deferred" or (mode == "auto" and relative.device.type != "cpu"):
            self._nonfinite.record(relative)  # one queued reduction, read at `check_finite`
        else:
            self._check_output(embeddings, relative)
        return relative

    @property
    def finite_check(self) -> FiniteCheck:
        """When the forward checks its output for NaN / Inf: ``"immediate"`` (every call, naming
        the bad rows; on a GPU each call then waits for the device), ``"deferred"`` (recorded on
        the device, raised by `check_finite`, which `RelativeWrapper.encode` calls at its end,
        or after `~relrep_hf.utils.validation.DEFERRED_CHECK_CAPACITY` calls), or ``"auto"``
        (the default: immediate on the CPU, deferred elsewhere)."""
        return self._finite_check

    @finite_check.setter
    def finite_check(self, mode: FiniteCheck) -> None:
        if mode not in get_args(FiniteCheck):
            valid = ", ".join(map(repr, get_args(FiniteCheck)))
            raise ValueError(f"Invalid finite_check {mode!r}. Valid: {valid}.")
        self._finite_check = mode
        self._nonfinite.check()  # what the previous mode recorded is not dropped

    def check_finite(self) -> None:
        """Raise ``ValueError`` if a deferred forward since the last check gave NaN or Inf.

        One wait for the device; call it where the features are read anyway (a copy to the CPU),
        or after each call while looking for a bad batch. Nothing to do on the CPU, where every
        forward checks its own output.
        """
        self._nonfinite.check()

    def _check_output(self, embeddings: Tensor, relative: Tensor) -> None:
        """NaN / Inf in ``relative`` as an error that names the rows, or the overflow."""
        # A non-finite input row always yields a non-finite output row, and a sum is the
        # cheapest reduction that sees one (isfinite().all() costs half the addmm on CPU).
        if not math.isfinite(relative.sum().item()) and not bool(torch.isfinite(relative).all()):
            check_finite(embeddings.reshape(-1, embeddings.shape[-1]))
            raise ValueError(
                "The projection overflowed although the embeddings are finite: the projector's "
                f"dtype {self.weight.dtype} is too narrow for them; load it in float32."
            )

    def _check_norms(self, embeddings: Tensor) -> None:
        """Warn when the rows' L2-normalisation differs from that of the statistics."""
        normalized = self.config.normalized_embeddings
        if normalized is None or self.config.similarity == "cosine" or embeddings.numel() == 0:
            return  # unknown, or a similarity blind to the input's scale
        rows = embeddings.detach().reshape(-1, embeddings.shape[-1])[:NORM_CHECK_ROWS]
        norms = torch.linalg.vector_norm(rows.double(), dim=-1)
        unit = bool(((norms - 1.0).abs() <= UNIT_NORM_TOLERANCE).all())
        if unit == normalized:
            return
        low, high = float(norms.min()), float(norms.max())
        if unit:
            message = (
                f"These embeddings are L2-normalised (every row has norm 1), but the projector's "
                f"statistics come from unnormalised embeddings (RMS row norm "
                f"{self.config.embedding_norm:.3g}). sentence-transformers normalises its output "
                "by default: project the embeddings the projector was built from (RelativeWrapper "
                "pools them that way), or build the projector from normalised embeddings."
            )
        else:
            message = (
                f"The projector's statistics come from L2-normalised embeddings (rows of norm 1), "
                f"but these rows have norms from {low:.3g} to {high:.3g}. Normalise them first "
                "(torch.nn.functional.normalize(x, dim=-1), or sentence-transformers' "
                "normalize_embeddings=True)."
            )
        warnings.warn(message, UserWarning, stacklevel=5)  # the caller of projector(...)

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"hidden_size={c.hidden_size}, num_anchors={c.num_anchors}, similarity={c.similarity!r}"
        )

    def _write_extras(self, folder: Path) -> None:
        """The standalone code that ``trust_remote_code=True`` loads."""
        write_remote_code(folder)

    def post_load(self) -> None:
        self.requires_grad_(False)  # the loader recreates parameters as trainable


def _norm_record(statistics: Statistics) -> dict[str, object]:
    """What the config records about the rows behind ``statistics``: count, RMS row norm, and
    whether they were L2-normalised (mean squared norm 1)."""
    mean_squared_norm = statistics.mean_squared_norm()
    return {
        "statistics_count": statistics.count,
        "embedding_norm": math.sqrt(mean_squared_norm),
        "normalized_embeddings": statistics.count > 0
        and abs(mean_squared_norm - 1.0) <= 2 * UNIT_NORM_TOLERANCE,
    }
