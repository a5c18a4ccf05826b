"""`AnchorSet`: the encoder-agnostic coordinate system shared by every projector.

An anchor set is a mixing matrix ``M [m, K]`` over K parallel support inputs (its kind:
see `relrep_hf.functional.mixing`), plus the similarity settings its anchors were fitted with.
Any encoder gets its anchors by embedding those inputs: ``A = mu + M @ (X_sub - mu)``, which is
``P @ X_sub`` for the paper's row-stochastic ``P``; so one anchor set serves encoders that did
not exist when it was fitted. Every anchor method makes one (`relrep_hf.training.anchor_methods`),
so every comparison runs through one code path. ``fingerprint`` hashes its content: projectors
and heads record it, so a head never reads the features of another anchor set.

On disk (and on the Hub) an anchor set is three files:
``anchor_set.safetensors`` (the mixture), ``anchor_set.json`` (what it is and how it was
made) and ``support.jsonl`` (the support inputs, readable with
``datasets.load_dataset("json", data_files=...)``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from relrep_hf.functional.anchor_strategies import (
    farthest_point_mixture,
    kmeans_mixture,
    random_mixture,
)
from relrep_hf.functional.mixing import UNRECORDED_MIXING, check_mixture, fingerprint, mixed_anchors
from relrep_hf.functional.shared_linear import (
    Normalization,
    check_shared_linear_shrinkage,
    fit_shared_linear,
    support_positions,
)
from relrep_hf.functional.similarities import get_similarity
from relrep_hf.functional.statistics import DEFAULT_EPS, DEFAULT_SHRINKAGE
from relrep_hf.models.anchor_set_files import load_anchor_set_files, write_anchor_set_files
from relrep_hf.utils.defaults import SHARED_LINEAR_SHRINKAGE, check_similarity_settings
from relrep_hf.utils.file_checks import ArtifactFileError
from relrep_hf.utils.io import atomic_directory
from relrep_hf.utils.manifest import write_manifest
from relrep_hf.utils.publishing_hooks import publisher
from relrep_hf.utils.validation import (
    as_embeddings,
    check_distinct_names,
    check_embeddings,
    check_row_indices,
    check_same_device,
    check_same_rows,
)


@dataclass
class AnchorSet:
    """A mixing matrix ``M [m, K]`` over K support inputs, and how it was made.

    Args:
        mixture: the mixing matrix; what its rows may be depends on ``mixing``.
        support: the K support inputs: strings for text, or dicts that re-identify each input
            (e.g. ``{"index": 17}``) together with ``support_reference``.
        support_reference: for non-text inputs, where they come from (dataset id, revision,
            split, column).
        strategy: the anchor method that made it (`relrep_hf.training.anchor_methods`):
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
        self.mixing = self.mixing or UNRECORDED_MIXING.get(self.strategy, "stochastic")
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
        publisher().write_card(folder)  # the publishing layer's card, from the files above
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
        mixture, support, fields = load_anchor_set_files(
            path_or_repo_id,
            revision=revision,
            token=token,
            cache_dir=cache_dir,
            local_files_only=local_files_only,
            force_download=force_download,
            verify=verify,
        )
        try:
            return cls(mixture=mixture, support=support, **fields)
        except (ValueError, TypeError) as error:
            raise ArtifactFileError(
                f"The anchor set at {str(path_or_repo_id)!r} is invalid: {error} Its files are corrupted or "
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
        """Push the anchor set as one commit (`relrep_hf.utils.publishing_hooks`); returns its sha."""
        return publisher().push_folder(
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
