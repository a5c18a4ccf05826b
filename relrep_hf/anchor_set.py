"""`AnchorSet`: the encoder-agnostic coordinate system shared by every projector.

An anchor set is a mixing matrix ``M [m, K]`` over K parallel support inputs (its kind:
see `relrep_hf.mixing`), plus the similarity settings its anchors were fitted with. Any
encoder gets its anchors by embedding those inputs: ``A = mu + M @ (X_sub - mu)``, which is
``P @ X_sub`` for the paper's row-stochastic ``P``. It knows nothing of any particular
encoder, so one anchor set serves encoders that did not exist when it was fitted. Random,
k-means, farthest-point, PARAM, full-support and shared-linear anchors are all anchor sets
(see `relrep_hf.anchor_strategies` and `relrep_hf.shared_linear`), so every comparison runs
through one code path. ``fingerprint`` hashes its content: projectors and heads record it,
so a head never reads the features of another anchor set.

On disk (and on the Hub) an anchor set is three files:
``anchor_set.safetensors`` (the mixture), ``anchor_set.json`` (what it is and how it was
made) and ``support.jsonl`` (the support inputs, readable with
``datasets.load_dataset("json", data_files=...)``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from relrep_hf.anchor_strategies import farthest_point_mixture, kmeans_mixture, random_mixture
from relrep_hf.cards import write_card
from relrep_hf.file_checks import ArtifactFileError, read_json_file, safetensors_shapes
from relrep_hf.hub import artifact_kind, push_folder, resolve_folder
from relrep_hf.io import atomic_directory
from relrep_hf.manifest import verify_folder, write_manifest
from relrep_hf.mixing import STRATEGY_MIXING, check_mixture, fingerprint, mixed_anchors
from relrep_hf.shared_linear import Normalization, feature_gram, top_eigenvectors
from relrep_hf.similarities import get_similarity
from relrep_hf.statistics import DEFAULT_EPS, DEFAULT_SHRINKAGE, Statistics
from relrep_hf.validation import check_embeddings

WEIGHTS_NAME = "anchor_set.safetensors"
CONFIG_NAME = "anchor_set.json"
SUPPORT_NAME = "support.jsonl"
FORMAT_VERSION = 1


@dataclass
class AnchorSet:
    """A mixing matrix ``M [m, K]`` over K support inputs, and how it was made.

    Args:
        mixture: the mixing matrix; what its rows may be depends on ``mixing``.
        support: the K support inputs: strings for text, or dicts that re-identify each input
            (e.g. ``{"index": 17}``) together with ``support_reference``.
        support_reference: for non-text inputs, where they come from (dataset id, revision,
            split, column).
        strategy: ``"param"``, ``"random"``, ``"kmeans"``, ``"farthest_point"``,
            ``"full_support"`` or ``"shared_linear"``.
        mixing: ``"stochastic"``, ``"one_hot"``, ``"identity"`` or ``"linear"`` (default: the
            strategy's kind; see `relrep_hf.mixing`).
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
        self.mixing = self.mixing or STRATEGY_MIXING.get(self.strategy, "stochastic")
        check_mixture(self.mixture, self.mixing)
        if len(self.support) != self.mixture.shape[1]:
            raise ValueError(
                f"The mixture mixes K={self.mixture.shape[1]} support inputs but "
                f"{len(self.support)} support inputs were given: they must be the same inputs, "
                "in the same order."
            )
        get_similarity(self.similarity)  # validates the name
        if not 0.0 <= self.shrinkage <= 1.0 or self.eps < 0:
            raise ValueError(
                f"Need 0 <= shrinkage <= 1 and eps >= 0, got {self.shrinkage} and {self.eps}."
            )

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

    # ---- persistence -----------------------------------------------------------------------

    def save_pretrained(
        self, save_directory: str | os.PathLike, *, keep: Sequence[str] = ()
    ) -> None:
        """Write the three files, the card and their manifest into ``save_directory``
        atomically and durably: the folder then holds exactly these files, plus the entries of
        the old folder that match a glob pattern of ``keep`` (a trainer's ``checkpoint-*``)."""
        with atomic_directory(save_directory, keep=keep) as staging:
            self._write(staging)

    def _write(self, folder: Path) -> None:
        save_file(
            {"mixture": self.mixture.detach().cpu().contiguous()},
            folder / WEIGHTS_NAME,
            metadata={"format": "pt"},
        )
        description = {
            "format_version": FORMAT_VERSION,
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
        }
        (folder / CONFIG_NAME).write_text(json.dumps(description, indent=2, sort_keys=True) + "\n")
        with open(folder / SUPPORT_NAME, "w", encoding="utf-8") as file:
            for item in self.support:
                row = {"text": item} if isinstance(item, str) else item
                file.write(json.dumps(row, ensure_ascii=False) + "\n")
        write_card(self, folder)
        write_manifest(folder)

    @classmethod
    def from_pretrained(
        cls,
        path_or_repo_id: str | os.PathLike,
        *,
        revision: str | None = None,
        token: str | bool | None = None,
        cache_dir: str | os.PathLike | None = None,
        local_files_only: bool = False,
        force_download: bool = False,
        verify: bool | None = None,
    ) -> AnchorSet:
        """Load an anchor set from a local folder or a Hub repo (at ``revision``).

        Its files are checked against the manifest written at save time (``verify=False`` or
        ``RELREP_HF_VERIFY=0`` skips that) and structurally before anything is built.
        """
        folder, commit = resolve_folder(
            path_or_repo_id,
            revision=revision,
            token=token,
            cache_dir=cache_dir,
            local_files_only=local_files_only,
            force_download=force_download,
        )
        source = str(path_or_repo_id)
        missing = [
            n for n in (WEIGHTS_NAME, CONFIG_NAME, SUPPORT_NAME) if not (folder / n).is_file()
        ]
        if missing:
            raise OSError(
                f"{source!r} is not an anchor set: it lacks {', '.join(missing)}. "
                "Anchor sets are written by AnchorSet.save_pretrained or ParamTrainer."
                + _what_it_is(folder)
            )
        verify_folder(
            folder,
            required=(WEIGHTS_NAME, CONFIG_NAME, SUPPORT_NAME),
            what="anchor set",
            source=source,
            verify=verify,
        )
        mixture, description, support = _read_files(folder, source)
        is_local = commit is None
        training = description.get("training", {})
        settings = {  # anchor sets saved before the settings were recorded: their training's
            key: description.get(key, training.get(key, default))
            for key, default in (
                ("similarity", "wip"),
                ("shrinkage", DEFAULT_SHRINKAGE),
                ("eps", DEFAULT_EPS),
            )
        }
        try:
            return cls(
                mixture=mixture,
                support=support,
                support_reference=description.get("support_reference"),
                strategy=description.get("strategy", "param"),
                encoders=description.get("encoders", []),
                training=training,
                metrics=description.get("metrics", {}),
                repo_id="" if is_local else source,
                revision="" if is_local else commit,
                mixing=description.get("mixing", ""),
                **settings,
            )
        except (ValueError, TypeError) as error:
            raise ArtifactFileError(
                f"The anchor set at {source!r} is invalid: {error} Its files are corrupted or "
                "were not written by relrep_hf: download it again or save it again."
            ) from error

    def push_to_hub(
        self,
        repo_id: str,
        *,
        private: bool | None = None,
        token: str | bool | None = None,
        revision: str | None = None,
        commit_message: str = "Upload anchor set with relrep_hf",
    ) -> str:
        """Push the anchor set as one commit; returns the commit sha."""
        return push_folder(
            self._write,
            repo_id,
            private=private,
            token=token,
            revision=revision,
            commit_message=commit_message,
        )

    # ---- baseline strategies -------------------------------------------------------------

    @classmethod
    def random(cls, support: Sequence[Any], num_anchors: int, *, seed: int = 0) -> AnchorSet:
        """Random anchors (the original relative representations): one-hot rows."""
        mixture = random_mixture(len(support), num_anchors, seed=seed)
        return cls(mixture, list(support), strategy="random", training={"seed": seed})

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
        mixture = kmeans_mixture(support_embeddings, num_anchors, seed=seed, iterations=iterations)
        return cls(mixture, list(support), strategy="kmeans", training={"seed": seed})

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
        mixture = farthest_point_mixture(support_embeddings, num_anchors, seed=seed)
        return cls(mixture, list(support), strategy="farthest_point", training={"seed": seed})

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
        mixture = torch.eye(len(support))
        return cls(mixture, list(support), strategy="full_support", shrinkage=shrinkage, eps=eps)

    @classmethod
    def shared_linear(
        cls,
        support: Sequence[Any],
        fit_embeddings: Mapping[str, Tensor],
        num_anchors: int,
        *,
        support_rows: Tensor | Sequence[int],
        fit_rows: Tensor | Sequence[int] | None = None,
        shrinkage: float = DEFAULT_SHRINKAGE,
        eps: float = DEFAULT_EPS,
        normalization: Normalization = "none",
    ) -> AnchorSet:
        """The shared linear compression of full-support WIP features, in closed form.

        ``fit_embeddings`` maps each training encoder (two or more) to its embeddings
        ``[N, d_i]``, row-aligned across encoders. ``support_rows`` (K indices) are the rows
        that embed ``support`` (the K support inputs, in order); ``fit_rows`` (default: every
        row) are the rows the map and each encoder's whitening statistics are fitted on. The
        mixing ``M = U.T [m, K]`` holds the top-m eigenvectors of ``sum_i R_i.T @ R_i``,
        ``R_i`` encoder i's full-support features of the fit rows (`relrep_hf.shared_linear`).
        A new encoder is onboarded as for any anchor set (`RelativeProjector.from_anchor_set`).
        """
        support_rows = torch.as_tensor(support_rows, dtype=torch.long)
        if len(support_rows) != len(support):
            raise ValueError(
                f"support_rows has {len(support_rows)} rows but there are {len(support)} "
                "support inputs: give the row of each support input, in order."
            )
        grams = []
        for name, space in fit_embeddings.items():
            check_embeddings(space, name=f"{name!r} fit embeddings")
            rows = space if fit_rows is None else space[torch.as_tensor(fit_rows)]
            grams.append(
                feature_gram(
                    rows,
                    space[support_rows],
                    Statistics.from_embeddings(rows),
                    shrinkage=shrinkage,
                    eps=eps,
                    normalization=normalization,
                )
            )
        u, eigenvalues = top_eigenvectors(grams, num_anchors)
        total_energy = float(sum(g.trace() for g in grams))
        return cls(
            u.T.float().contiguous(),
            list(support),
            strategy="shared_linear",
            training={
                "normalization": normalization,
                "fit_encoders": list(fit_embeddings),
                "fit_rows": len(rows),
                "support_rows": support_rows.tolist(),
            },
            metrics={"explained_energy": float(eigenvalues.sum()) / total_energy},
            shrinkage=shrinkage,
            eps=eps,
        )


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


def _read_files(folder: Path, source: str) -> tuple[Tensor, dict[str, Any], list[Any]]:
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


def _what_it_is(folder: Path) -> str:
    """A hint naming the artifact a folder holds instead of an anchor set."""
    try:
        kind = artifact_kind(folder)
    except FileNotFoundError:
        return ""
    return {
        "projector": " It holds a projector: load it with RelativeProjector.from_pretrained "
        "(its config names its anchor set).",
        "head": " It holds a head: load it with RelativeHeadForClassification.from_pretrained.",
        "run": " It is a run folder: its anchor set is in anchor_set/.",
    }.get(kind, "")
