"""`AnchorSet`: the encoder-agnostic coordinate system shared by every projector.

An anchor set is a row-stochastic mixture ``P [m, K]`` over K parallel support
inputs. Any encoder gets its anchors by embedding those inputs: ``A = P @ X_sub``.
It knows nothing of any particular encoder, so one anchor set serves encoders that
did not exist when it was trained. Random, k-means and farthest-point anchors are
anchor sets too (see `relrep_hf.anchor_strategies`), so every comparison runs through
one code path.

On disk (and on the Hub) an anchor set is three files:
``anchor_set.safetensors`` (the mixture), ``anchor_set.json`` (what it is and how it was
made) and ``support.jsonl`` (the support inputs, readable with
``datasets.load_dataset("json", data_files=...)``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from relrep_hf.anchor_strategies import farthest_point_mixture, kmeans_mixture, random_mixture
from relrep_hf.cards import write_card
from relrep_hf.hub import artifact_kind, push_folder, resolve_folder
from relrep_hf.io import atomic_directory
from relrep_hf.validation import check_embeddings

WEIGHTS_NAME = "anchor_set.safetensors"
CONFIG_NAME = "anchor_set.json"
SUPPORT_NAME = "support.jsonl"
FORMAT_VERSION = 1


@dataclass
class AnchorSet:
    """A mixture ``P [m, K]`` over K support inputs, and how it was made.

    Args:
        mixture: rows on the probability simplex (each row a convex mixture of support points).
        support: the K support inputs: strings for text, or dicts that re-identify each input
            (e.g. ``{"index": 17}``) together with ``support_reference``.
        support_reference: for non-text inputs, where they come from (dataset id, revision,
            split, column).
        strategy: ``"param"``, ``"random"``, ``"kmeans"`` or ``"farthest_point"``.
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

    def __post_init__(self) -> None:
        mixture = self.mixture
        if mixture.ndim != 2:
            raise ValueError(f"mixture must have shape [m, K], got {tuple(mixture.shape)}.")
        check_embeddings(mixture, name="mixture rows")
        if len(self.support) != mixture.shape[1]:
            raise ValueError(
                f"The mixture mixes K={mixture.shape[1]} support inputs but {len(self.support)} "
                "support inputs were given: they must be the same inputs, in the same order."
            )
        row_sums = mixture.double().sum(dim=1)
        if bool((mixture < 0).any()) or not torch.allclose(
            row_sums, torch.ones_like(row_sums), atol=1e-4
        ):
            raise ValueError(
                "mixture rows must lie on the probability simplex (non-negative, summing to 1); "
                f"row sums range over [{row_sums.min().item():.4g}, {row_sums.max().item():.4g}]."
            )

    @property
    def num_anchors(self) -> int:
        return self.mixture.shape[0]

    @property
    def support_size(self) -> int:
        return self.mixture.shape[1]

    def anchors(self, support_embeddings: Tensor) -> Tensor:
        """An encoder's anchors ``P @ X_sub`` ([m, d], float64) from its support embeddings."""
        check_embeddings(support_embeddings, name="support embeddings")
        if support_embeddings.ndim != 2 or support_embeddings.shape[0] != self.support_size:
            raise ValueError(
                f"support embeddings must have shape [K={self.support_size}, d] (one row per "
                f"support input, in order), got {tuple(support_embeddings.shape)}."
            )
        return self.mixture.to(torch.float64) @ support_embeddings.to(torch.float64)

    def check_compatible(self, num_anchors: int, *, what: str) -> None:
        """Raise unless something with ``num_anchors`` features can belong to this anchor set."""
        if num_anchors != self.num_anchors:
            raise ValueError(
                f"The {what} has {num_anchors} anchors but the anchor set has {self.num_anchors}: "
                "they come from different anchor sets."
            )

    # ---- persistence -----------------------------------------------------------------------

    def save_pretrained(self, save_directory: str | os.PathLike) -> None:
        """Write the three files into ``save_directory`` atomically."""
        with atomic_directory(save_directory) as staging:
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

    @classmethod
    def from_pretrained(
        cls,
        path_or_repo_id: str | os.PathLike,
        *,
        revision: str | None = None,
        token: str | bool | None = None,
        cache_dir: str | os.PathLike | None = None,
        local_files_only: bool = False,
    ) -> AnchorSet:
        """Load an anchor set from a local folder or a Hub repo (at ``revision``)."""
        folder, commit = resolve_folder(
            path_or_repo_id,
            revision=revision,
            token=token,
            cache_dir=cache_dir,
            local_files_only=local_files_only,
        )
        missing = [
            n for n in (WEIGHTS_NAME, CONFIG_NAME, SUPPORT_NAME) if not (folder / n).is_file()
        ]
        if missing:
            raise OSError(
                f"{str(path_or_repo_id)!r} is not an anchor set: it lacks {', '.join(missing)}. "
                "Anchor sets are written by AnchorSet.save_pretrained or ParamTrainer."
                + _what_it_is(folder)
            )
        try:
            mixture = load_file(folder / WEIGHTS_NAME)["mixture"]
            description = json.loads((folder / CONFIG_NAME).read_text())
            support_rows = [
                json.loads(line)
                for line in (folder / SUPPORT_NAME).read_text(encoding="utf-8").splitlines()
                if line
            ]
        except (SafetensorError, KeyError, json.JSONDecodeError) as error:
            raise OSError(
                f"The anchor set at {str(path_or_repo_id)!r} is corrupted or truncated ({error}). "
                "Download it again (or save it again)."
            ) from error
        support = [row["text"] if set(row) == {"text"} else row for row in support_rows]
        is_local = commit is None
        return cls(
            mixture=mixture,
            support=support,
            support_reference=description.get("support_reference"),
            strategy=description.get("strategy", "param"),
            encoders=description.get("encoders", []),
            training=description.get("training", {}),
            metrics=description.get("metrics", {}),
            repo_id="" if is_local else str(path_or_repo_id),
            revision="" if is_local else commit,
        )

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
