"""`AnchorSet`: the encoder-agnostic coordinate system shared by every projector.

An anchor set is a mixing matrix ``M [m, K]`` over K parallel support inputs (its kind:
see `relrep_hf.functional.mixing`), plus the similarity settings its anchors were fitted with.
Any encoder gets its anchors by embedding those inputs: ``A = mu + M @ (X_sub - mu)``, which is
``P @ X_sub`` for the paper's row-stochastic ``P``; so one anchor set serves encoders that did
not exist when it was fitted. Every anchor method makes one (`relrep_hf.anchors`),
so every comparison runs through one code path. ``fingerprint`` hashes its content: projectors
and heads record it, so a head never reads the features of another anchor set.

On disk (and on the Hub) an anchor set is three files:
``anchor_set.safetensors`` (the mixture), ``anchor_set.json`` (what it is and how it was
made) and ``support.jsonl`` (the support inputs, readable with
``datasets.load_dataset("json", data_files=...)``), saved, verified and pushed by the artifact
base (`relrep_hf.utils.artifacts`), with its card and manifest. The end of this module writes
them, and reads them back checked against each other before any tensor is loaded (a folder
written by someone else is untrusted input).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from relrep_hf.functional.mixing import check_mixture, fingerprint, mixed_anchors
from relrep_hf.functional.mixing_kinds import strategy_sampler, unrecorded_mixing
from relrep_hf.functional.shared_linear import (
    Normalization,
    check_shared_linear_shrinkage,
    fit_shared_linear,
    support_positions,
)
from relrep_hf.functional.similarities import get_similarity
from relrep_hf.functional.statistics import DEFAULT_EPS, DEFAULT_SHRINKAGE
from relrep_hf.models.artifact_types import ANCHOR_SET_FILES, ANCHOR_SET_TYPE
from relrep_hf.utils.artifacts import ArtifactMixin
from relrep_hf.utils.defaults import SHARED_LINEAR_SHRINKAGE, check_similarity_settings
from relrep_hf.utils.file_checks import ArtifactFileError, read_json_file, safetensors_shapes
from relrep_hf.utils.validation import (
    as_embeddings,
    check_distinct_names,
    check_embeddings,
    check_row_indices,
    check_same_device,
    check_same_rows,
)

CONFIG_NAME, WEIGHTS_NAME, SUPPORT_NAME = ANCHOR_SET_FILES  # declared in artifact_types.py
FORMAT_VERSION = 1

_DESCRIPTION_TYPES = {
    "format_version": int,
    "num_anchors": int,
    "support_size": int,
    "strategy": str,
    "support_reference": (dict, type(None)),
    "encoders": list,
    "training": dict,
    "metrics": dict,
    "mixing": str,
    "similarity": str,
    "shrinkage": (int, float),
    "eps": (int, float),
}
_MAX_SUPPORT_LINE = 1 << 20  # one support input: a text or a reference, far below 1 MiB


@dataclass
class AnchorSet(ArtifactMixin):
    """A mixing matrix ``M [m, K]`` over K support inputs, and how it was made.

    Args:
        mixture: the mixing matrix; what its rows may be depends on ``mixing``.
        support: the K support inputs: strings for text, or dicts that re-identify each input
            (e.g. ``{"index": 17}``) together with ``support_reference``.
        support_reference: for non-text inputs, where they come from (dataset id, revision,
            split, column).
        strategy: the anchor method that made it (`relrep_hf.anchors`):
            ``"param"``, ``"shared_linear"``, ``"random"``, ...
        mixing: ``"stochastic"``, ``"one_hot"``, ``"identity"`` or ``"linear"`` (default:
            one-hot for random and farthest-point anchors, else stochastic).
        similarity, shrinkage, eps: the similarity settings the anchors were fitted with;
            projectors built from the anchor set use them unless told otherwise.
        encoders: the encoders it was fitted on (Hub id, revision, pooling, layer, dim).
        training: hyperparameters (loss weights, temperatures, seed, ...).
        metrics: measured at the end of training.

    Example:
        >>> import torch
        >>> from relrep_hf import AnchorSet
        >>> anchor_set = AnchorSet.random(["a", "b", "c", "d"], num_anchors=2, seed=0)
        >>> anchor_set.anchors(torch.eye(4, 3)).shape
        torch.Size([2, 3])
    """

    artifact_kind = "anchor_set"
    artifact_name = "anchor set"
    artifact_type = ANCHOR_SET_TYPE  # what a saved anchor set holds (artifact_types.py)

    mixture: Tensor
    support: list[Any]
    support_reference: dict[str, Any] | None = None
    strategy: str = "param"
    encoders: list[dict[str, Any]] = field(default_factory=list)
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    repo_id: str = ""
    revision: str = ""
    mixing: str = ""
    similarity: str = "wip"
    shrinkage: float = DEFAULT_SHRINKAGE
    eps: float = DEFAULT_EPS

    def __post_init__(self) -> None:
        self.mixing = self.mixing or unrecorded_mixing(self.strategy)  # its method's kind
        if not self.support:
            raise ValueError(
                "An anchor set needs at least one support input, got none: pass the parallel "
                "inputs (texts, or dataset references such as {'index': 0}) the anchors mix."
            )
        bad = next((x for x in self.support if not isinstance(x, (str, dict))), None)
        if bad is not None:
            raise TypeError(
                f"Support inputs must be texts (str) or dataset references (dict, e.g. "
                f"{{'index': 3}}), got {bad!r} ({type(bad).__name__}): convert them, e.g. "
                "[str(x) for x in support] or [{'index': i} for i in rows]."
            )
        check_mixture(self.mixture, self.mixing)
        if len(self.support) != self.mixture.shape[1]:
            raise ValueError(
                f"The mixture mixes K={self.mixture.shape[1]} support inputs but "
                f"{len(self.support)} support inputs were given: they must be the same inputs, "
                "in the same order."
            )
        get_similarity(self.similarity)  # validates the name
        check_similarity_settings(self.shrinkage, self.eps)

    def __repr__(self) -> str:
        """A few lines, like a `datasets.Dataset`'s: not the mixture or the support inputs."""
        names = [str(e.get("name") or e.get("encoder_id") or "?") for e in self.encoders]
        names = names or [str(n) for n in self.training.get("fit_encoders", [])]
        fields = {
            "method": self.strategy,
            "num_anchors": self.num_anchors,
            "support_size": self.support_size,
            "encoders": ", ".join(names) or "(unrecorded)",
            "similarity": self.similarity,
            "shrinkage": self.shrinkage,
            "fingerprint": self.fingerprint,
        }
        if self.repo_id:
            fields["repo_id"] = self.repo_id + (f"@{self.revision}" if self.revision else "")
        return "AnchorSet({\n" + "".join(f"    {k}: {v}\n" for k, v in fields.items()) + "})"

    @property
    def similarity_settings(self) -> dict[str, Any]:
        """``{"similarity", "shrinkage", "eps"}``: what projectors of this anchor set use."""
        return {"similarity": self.similarity, "shrinkage": self.shrinkage, "eps": self.eps}

    @property
    def fingerprint(self) -> str:
        """A hash of the mixing matrix, the support inputs and the similarity settings."""
        return fingerprint(self.mixture, self.support, self.mixing, self.similarity_settings)

    @property
    def num_anchors(self) -> int:
        return self.mixture.shape[0]

    @property
    def support_size(self) -> int:
        return self.mixture.shape[1]

    def anchors(self, support_embeddings: Tensor, mean: Tensor | None = None) -> Tensor:
        """An encoder's anchors ``mean + M @ (X_sub - mean)`` ([m, d], float64).

        ``mean`` is the encoder's mean (for WIP); it changes nothing when M's rows sum to one,
        and a ``"linear"`` anchor set needs it, so that the anchors' WIP features are its
        full-support features mixed by M.
        """
        check_embeddings(support_embeddings, name="support embeddings")
        if support_embeddings.ndim != 2 or support_embeddings.shape[0] != self.support_size:
            raise ValueError(
                f"support embeddings must have shape [K={self.support_size}, d] (one row per "
                f"support input, in order), got {tuple(support_embeddings.shape)}."
            )
        if self.mixing == "linear" and mean is None:
            raise ValueError(
                "A 'linear' anchor set mixes centred support embeddings: pass the encoder's "
                "mean (statistics.mean), or build its projector with "
                "RelativeProjector.from_anchor_set."
            )
        return mixed_anchors(self.mixture, support_embeddings, mean)

    def check_compatible(self, num_anchors: int, *, what: str) -> None:
        """Raise unless something with ``num_anchors`` features can belong to this anchor set."""
        if num_anchors != self.num_anchors:
            raise ValueError(
                f"The {what} has {num_anchors} anchors but the anchor set has {self.num_anchors}: "
                "they come from different anchor sets."
            )

    # ---- files: which ones, and how they are read back (the base saves, verifies, pushes) ----

    def _save_files(self, folder: Path, **_: Any) -> None:
        """The three files (`write_anchor_set_files`)."""
        write_anchor_set_files(
            folder,
            self.mixture,
            {
                "num_anchors": self.num_anchors,
                "support_size": self.support_size,
                "strategy": self.strategy,
                "mixing": self.mixing,
                **self.similarity_settings,
                "fingerprint": self.fingerprint,
                "support_reference": self.support_reference,
                "encoders": self.encoders,
                "training": self.training,
                "metrics": self.metrics,
            },
            self.support,
        )

    @classmethod
    def _load_files(cls, folder: Path, *, source: str, commit: str | None) -> AnchorSet:
        """The anchor set of a checked folder; a Hub one records its repo id and commit."""
        mixture, description, support = read_anchor_set_files(folder, source)
        fields = saved_fields(description)
        fields["repo_id"], fields["revision"] = ("", "") if commit is None else (source, commit)
        try:
            return cls(mixture=mixture, support=support, **fields)
        except (ValueError, TypeError) as error:
            raise ArtifactFileError(
                f"The anchor set at {source!r} is invalid: {error} Its files are corrupted or "
                "were not written by relrep_hf: download it again or save it again."
            ) from error

    # ---- baseline strategies: each drawn by its method's sampler (`relrep_hf.anchors`) -------

    @classmethod
    def random(cls, support: Sequence[Any], num_anchors: int, *, seed: int = 0) -> AnchorSet:
        """Random anchors (the original relative representations): one-hot rows."""
        return cls._sampled("random", support, None, num_anchors, seed=seed)

    @classmethod
    def kmeans(
        cls,
        support: Sequence[Any],
        support_embeddings: Tensor | Sequence[Tensor],
        num_anchors: int,
        *,
        seed: int = 0,
        iterations: int = 50,
    ) -> AnchorSet:
        """k-means anchors: each centroid as the uniform mixture of its cluster's support points."""
        return cls._sampled(
            "kmeans", support, support_embeddings, num_anchors, seed=seed, iterations=iterations
        )

    @classmethod
    def farthest_point(
        cls,
        support: Sequence[Any],
        support_embeddings: Tensor | Sequence[Tensor],
        num_anchors: int,
        *,
        seed: int = 0,
    ) -> AnchorSet:
        """Farthest-point sampling anchors: one-hot rows, each far from those before it."""
        return cls._sampled("farthest_point", support, support_embeddings, num_anchors, seed=seed)

    @classmethod
    def _sampled(
        cls,
        strategy: str,
        support: Sequence[Any],
        support_embeddings: Tensor | Sequence[Tensor] | None,
        num_anchors: int,
        *,
        seed: int,
        **options: Any,
    ) -> AnchorSet:
        """The anchor set of sampling method ``strategy``, its mixture drawn by the sampler its
        registration recorded (`relrep_hf.functional.mixing_kinds.strategy_sampler`): the
        anchor methods sit above the artifacts, so the registry, not an import, reaches them."""
        sampler = strategy_sampler(strategy)
        mixture = sampler(len(support), support_embeddings, num_anchors, seed=seed, **options)
        return cls(mixture, list(support), strategy=strategy, training={"seed": seed})

    # ---- beyond the paper ----------------------------------------------------------------

    @classmethod
    def full_support(
        cls,
        support: Sequence[Any],
        *,
        shrinkage: float = DEFAULT_SHRINKAGE,
        eps: float = DEFAULT_EPS,
    ) -> AnchorSet:
        """Every support input is an anchor (m = K, identity mixing): nothing to fit."""
        mixture = torch.eye(len(support) or 1)[: len(support)]  # [] is refused by __post_init__
        settings = {"shrinkage": shrinkage, "eps": eps}
        return cls(mixture, list(support), strategy="full_support", mixing="identity", **settings)

    @classmethod
    def shared_linear(
        cls,
        support: Sequence[Any],
        fit_embeddings: Mapping[str, Tensor],
        num_anchors: int,
        *,
        support_rows: Tensor | Sequence[int],
        fit_rows: Tensor | Sequence[int] | None = None,
        shrinkage: float | str = SHARED_LINEAR_SHRINKAGE,
        eps: float = DEFAULT_EPS,
        normalization: Normalization = "none",
    ) -> AnchorSet:
        """The shared linear compression of full-support WIP features, in closed form.

        ``fit_embeddings``: each training encoder's (two or more) ``[N, d_i]`` embeddings,
        row-aligned. ``support_rows``: the K rows that embed ``support``, in order;
        ``fit_rows`` (default: all): the rows the map and the whitening are fitted on. ``M =
        U.T [m, K]`` holds the top-m eigenvectors of ``sum_i R_i.T @ R_i``, ``R_i`` encoder i's
        full-support features of the fit rows (`relrep_hf.functional.shared_linear`); a new
        encoder is onboarded as for any anchor set (`RelativeProjector.from_anchor_set`).

        ``shrinkage="auto"`` (the default) chooses the whitening's shrinkage from the fit rows
        (`relrep_hf.functional.regularization`), recorded as ``shrinkage`` and how in
        ``training["shrinkage_selection"]``; a number fixes it. More anchors than the data's
        rank are capped at it, with one warning. Best measured (docs/quality.md): K = N, every
        fit row as support (with exact whitening, MAXVAR generalised CCA; onboarding, a
        least-squares fit to it); one SVD of ``[K, sum d_i]``, so any K is cheap.
        """
        spaces, support_rows, fit_rows = _checked_rows(
            fit_embeddings, len(support), support_rows, fit_rows
        )
        check_shared_linear_shrinkage(shrinkage)
        fit_spaces = {n: x if fit_rows is None else x[fit_rows] for n, x in spaces.items()}
        fitted = fit_shared_linear(
            fit_spaces,
            {n: x[support_rows] for n, x in spaces.items()},
            num_anchors,
            support_positions=support_positions(support_rows, fit_rows),
            shrinkage=shrinkage,
            eps=eps,
            normalization=normalization,
        )
        if fitted.mixture.shape[0] < num_anchors:
            warnings.warn(
                f"The shared linear map was asked for {num_anchors} anchors but the training "
                f"encoders' features have rank {fitted.mixture.shape[0]} (at most the sum of "
                f"their dimensions, {sum(x.shape[1] for x in fit_spaces.values())}, and the "
                f"support size K={len(support)}): capped at {fitted.mixture.shape[0]} anchors.",
                UserWarning,
                stacklevel=2,
            )
        return cls(
            fitted.mixture,
            list(support),
            strategy="shared_linear",
            mixing="linear",
            training={
                "normalization": normalization,
                "fit_encoders": list(fit_spaces),
                "fit_rows": len(next(iter(fit_spaces.values()))),
                "support_rows": support_rows.tolist(),
                "requested_num_anchors": num_anchors,
                "shrinkage_selection": fitted.selection,
            },
            metrics={"explained_energy": fitted.explained_energy},
            shrinkage=fitted.shrinkage,
            eps=eps,
        )


def _checked_rows(
    fit_embeddings: Mapping[str, Tensor],
    num_support: int,
    support_rows: Tensor | Sequence[int],
    fit_rows: Tensor | Sequence[int] | None,
) -> tuple[dict[str, Tensor], Tensor, Tensor | None]:
    """The training encoders' embeddings (row-aligned finite tables), the support rows (one per
    support input) and the fit rows, checked."""
    spaces = {n: as_embeddings(x, name=f"{n!r} fit embeddings") for n, x in fit_embeddings.items()}
    check_distinct_names(spaces, what="training encoders")
    check_same_device(**{f"{n!r} fit embeddings": x for n, x in spaces.items()})
    num_rows = check_same_rows(spaces, what="fit embeddings")
    support_rows = check_row_indices(support_rows, num_rows, name="support_rows")
    if fit_rows is not None:
        fit_rows = check_row_indices(fit_rows, num_rows, name="fit_rows")
    if len(support_rows) != num_support:
        raise ValueError(
            f"support_rows has {len(support_rows)} rows but there are {num_support} "
            "support inputs: give the row of each support input, in order."
        )
    for name, space in spaces.items():
        check_embeddings(space, name=f"{name!r} fit embeddings")
    return spaces, support_rows, fit_rows


# ---- the files ----------------------------------------------------------------------------


def read_anchor_set_files(folder: Path, source: str) -> tuple[Tensor, dict[str, Any], list[Any]]:
    """The mixture, description and support inputs of an anchor set folder, each checked
    against the others before the tensor is read."""
    what = "anchor set"
    tensors = safetensors_shapes(folder / WEIGHTS_NAME, what=what, source=source)
    found = tensors.get("mixture")
    if set(tensors) != {"mixture"} or found[0] not in ("F16", "BF16", "F32", "F64"):
        raise ArtifactFileError(
            f"{WEIGHTS_NAME} of the anchor set at {source!r} must hold exactly one floating-point "
            f"tensor 'mixture', it holds {sorted(tensors)} ({found[0] if found else 'none'}). "
            "Save the anchor set again."
        )
    shape = found[1]
    if len(shape) != 2 or 0 in shape:
        raise ArtifactFileError(
            f"{WEIGHTS_NAME} of the anchor set at {source!r} holds a mixture of shape "
            f"{list(shape)}, not [m, K] with m, K >= 1. Save the anchor set again."
        )
    description = read_json_file(folder / CONFIG_NAME, what=what, source=source)
    problems = [] if isinstance(description, dict) else ["it is not a JSON object"]
    for key, kind in _DESCRIPTION_TYPES.items() if not problems else ():
        if key in description and (
            not isinstance(description[key], kind) or isinstance(description[key], bool)
        ):
            problems.append(f"{key} is {type(description[key]).__name__}")
    if not problems:
        version = description.get("format_version", FORMAT_VERSION)
        if version > FORMAT_VERSION:
            problems.append(
                f"format_version {version} is newer than this relrep_hf reads "
                f"({FORMAT_VERSION}): upgrade relrep_hf"
            )
        for key, size in (("num_anchors", shape[0]), ("support_size", shape[1])):
            if key in description and description[key] != size:
                problems.append(f"{key}={description[key]} but the mixture has {size}")
    if problems:
        raise ArtifactFileError(
            f"{CONFIG_NAME} of the anchor set at {source!r} is invalid: {'; '.join(problems)}. "
            "Save the anchor set again."
        )
    support = _read_support(folder / SUPPORT_NAME, shape[1], source)
    try:
        mixture = load_file(folder / WEIGHTS_NAME)["mixture"]
    except SafetensorError as error:
        raise ArtifactFileError(
            f"The anchor set at {source!r} is corrupted or truncated ({error}). "
            "Download it again (or save it again)."
        ) from error
    return mixture, description, support


def _read_support(path: Path, expected: int, source: str) -> list[Any]:
    """The support inputs of ``support.jsonl``: ``expected`` lines of JSON objects, each a text
    (``{"text": ...}``) or a reference to an input."""

    def broken(problem: str) -> ArtifactFileError:
        return ArtifactFileError(
            f"{SUPPORT_NAME} of the anchor set at {source!r} is invalid: {problem}. Download it "
            "again or save the anchor set again."
        )

    support: list[Any] = []
    with open(path, "rb") as file:
        for number, line in enumerate(iter(lambda: file.readline(_MAX_SUPPORT_LINE + 1), b"")):
            if len(line) > _MAX_SUPPORT_LINE:
                raise broken(f"line {number + 1} is longer than {_MAX_SUPPORT_LINE} bytes")
            if not line.strip():
                continue
            if len(support) == expected:
                raise broken(f"it has more than the K={expected} rows the mixture mixes")
            try:
                row = json.loads(line)
            except (ValueError, UnicodeDecodeError) as error:
                raise broken(f"line {number + 1} is not JSON ({error})") from error
            if not isinstance(row, dict) or not row:
                raise broken(f"line {number + 1} is not a JSON object")
            if set(row) == {"text"}:
                if not isinstance(row["text"], str):
                    raise broken(f"line {number + 1} has a text that is not a string")
                support.append(row["text"])
            else:
                support.append(row)
    if len(support) != expected:
        raise broken(f"it has {len(support)} rows but the mixture mixes K={expected}")
    return support


def write_anchor_set_files(
    folder: Path, mixture: Tensor, description: dict[str, Any], support: list[Any]
) -> None:
    """The three files: the mixture, ``description`` (with the format version) and one support
    input per line (texts as ``{"text": ...}``, readable with ``datasets``)."""
    save_file(
        {"mixture": mixture.detach().cpu().contiguous()},
        folder / WEIGHTS_NAME,
        metadata={"format": "pt"},
    )
    description = {"format_version": FORMAT_VERSION, **description}
    (folder / CONFIG_NAME).write_text(json.dumps(description, indent=2, sort_keys=True) + "\n")
    with open(folder / SUPPORT_NAME, "w", encoding="utf-8") as file:
        for item in support:
            row = {"text": item} if isinstance(item, str) else item
            file.write(json.dumps(row, ensure_ascii=False) + "\n")


def saved_fields(description: dict[str, Any]) -> dict[str, Any]:
    """`AnchorSet`'s fields (besides mixture and support) from a saved description; anchor sets
    saved before the similarity settings were recorded take their training's, or the paper's."""
    training = description.get("training", {})
    return {
        "support_reference": description.get("support_reference"),
        "strategy": description.get("strategy", "param"),
        "encoders": description.get("encoders", []),
        "training": training,
        "metrics": description.get("metrics", {}),
        "mixing": description.get("mixing", ""),
        **{
            key: description.get(key, training.get(key, default))
            for key, default in (
                ("similarity", "wip"),
                ("shrinkage", DEFAULT_SHRINKAGE),
                ("eps", DEFAULT_EPS),
            )
        },
    }
