"""Kinds of mixing matrix an anchor set can hold, their checks, and its content fingerprint.

Every anchor set is a mixing matrix ``M [m, K]`` over K support inputs; encoder i's anchors
are ``mu_i + M @ (X_sub_i - mu_i)`` (which is ``M @ X_sub_i`` whenever M's rows sum to one).
What M may be depends on how it was made:

| kind | rows | made by |
| --- | --- | --- |
| ``"stochastic"`` | on the probability simplex | PARAM (``softmax(logits / T)``), k-means |
| ``"one_hot"`` | one 1 per row | random, farthest-point sampling |
| ``"identity"`` | ``M = I`` (m = K) | full support |
| ``"linear"`` | any finite values | shared linear compression (closed form, fine-tuned) |
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

# the kinds, and each anchor method's (declared by the methods, `relrep_hf.anchors`)
from relrep_hf.functional.mixing_kinds import MIXING_KINDS, MixingKind, unrecorded_mixing
from relrep_hf.utils.validation import check_embeddings

__all__ = [
    "MIXING_KINDS",
    "MixingKind",
    "check_mixture",
    "check_same_anchor_set",
    "fingerprint",
    "mixed_anchors",
    "unrecorded_mixing",
]


def check_mixture(mixture: Tensor, kind: str) -> None:
    """Raise a ValueError unless ``mixture [m, K]`` is a valid matrix of ``kind``."""
    if kind not in MIXING_KINDS:
        raise ValueError(f"Invalid mixing {kind!r}. Valid: {', '.join(map(repr, MIXING_KINDS))}.")
    if mixture.ndim != 2:
        raise ValueError(f"mixture must have shape [m, K], got {tuple(mixture.shape)}.")
    check_embeddings(mixture, name="mixture rows")
    if kind == "linear":
        return
    if kind == "identity":
        if mixture.shape[0] != mixture.shape[1] or not torch.equal(
            mixture, torch.eye(mixture.shape[0], dtype=mixture.dtype, device=mixture.device)
        ):
            raise ValueError("An 'identity' mixture must be the K x K identity matrix.")
        return
    row_sums = mixture.double().sum(dim=1)
    if bool((mixture < 0).any()) or not torch.allclose(
        row_sums, torch.ones_like(row_sums), atol=1e-4
    ):
        raise ValueError(
            "mixture rows must lie on the probability simplex (non-negative, summing to 1); "
            f"row sums range over [{row_sums.min().item():.4g}, {row_sums.max().item():.4g}]."
        )
    if kind == "one_hot" and not bool(((mixture == 0) | (mixture == 1)).all()):
        raise ValueError("A 'one_hot' mixture must have exactly one 1 per row, zeros elsewhere.")


def mixed_anchors(mixture: Tensor, support_embeddings: Tensor, center: Tensor | None) -> Tensor:
    """``center + M @ (X_sub - center)`` ([m, d], float64); ``center=None`` means 0.

    For WIP the center is the encoder's mean, so the anchors' WIP features are exactly the
    full-support features mixed by M: ``wip(x, A) = wip(x, X_sub) @ M.T``. The mixture (an
    anchor set's stored parameter) goes to the support's device: the user's rows stay where they are.
    """
    support = support_embeddings.to(torch.float64)
    mixture = mixture.to(support.device, torch.float64)
    if center is None:
        return mixture @ support
    center = center.to(support.device, torch.float64)
    return center + mixture @ (support - center)


def fingerprint(
    mixture: Tensor, support: Sequence[Any], mixing: str, settings: dict[str, Any]
) -> str:
    """A hash of everything that defines the relative features: the mixing matrix (dtype,
    shape and bytes), the support inputs in order, the mixing kind and the similarity
    settings. Two anchor sets with the same fingerprint give the same features."""
    digest = hashlib.sha256()
    tensor = mixture.detach().cpu().contiguous()  # its bytes, read on the CPU whatever the device
    digest.update(f"{tensor.dtype}{tuple(tensor.shape)}{mixing}".encode())
    digest.update(tensor.view(torch.uint8).numpy().tobytes())
    digest.update(json.dumps(list(support), sort_keys=True, ensure_ascii=False).encode())
    digest.update(json.dumps(settings, sort_keys=True).encode())
    return digest.hexdigest()[:32]


def check_same_anchor_set(a: Any, b: Any, *, names: tuple[str, str] = ("source", "target")) -> None:
    """Raise a ValueError unless ``a`` and ``b`` read relative features of one anchor set.

    The one rule for every pair of artifacts (projector, head, inverse): ``a`` and ``b`` are
    artifacts with a ``config``, configs, or anything with the same fields. They must have the same ``num_anchors``
    and ``similarity``; and the same anchor set: where both record a ``anchor_set_fingerprint``
    (the content hash, see `fingerprint`), that decides, for local and Hub anchor sets alike;
    otherwise the same ``anchor_set_id`` and, for the same id, ``anchor_set_revision``, where
    both record them. What is not recorded ("") cannot be checked and is accepted. ``names``
    name ``a`` and ``b`` in the message, e.g. ``("head", "projector")``.
    """
    first, second = names
    a, b = getattr(a, "config", a), getattr(b, "config", b)

    def field(config: Any, name: str) -> Any:
        return getattr(config, name, "") or ""

    m_a, m_b = field(a, "num_anchors"), field(b, "num_anchors")
    if m_a != m_b:
        raise ValueError(
            f"The {first} has {m_a} anchors but the {second} has {m_b}: they come from "
            "different anchor sets. Build both from the same anchor set."
        )
    sim_a, sim_b = field(a, "similarity"), field(b, "similarity")
    if sim_a and sim_b and sim_a != sim_b:
        raise ValueError(
            f"The {first} uses similarity {sim_a!r} but the {second} uses {sim_b!r}: their "
            "relative features are not comparable. Build both with the same similarity."
        )
    print_a, print_b = field(a, "anchor_set_fingerprint"), field(b, "anchor_set_fingerprint")
    if print_a and print_b:
        if print_a != print_b:
            raise ValueError(
                f"The {first} was built on anchor set {print_a} (fingerprint) but the {second} "
                f"on anchor set {print_b}: with the same number of anchors their features still "
                "mean different things. Build both from the same anchor set "
                "(RelativeProjector.from_anchor_set)."
            )
        return
    id_a, id_b = field(a, "anchor_set_id"), field(b, "anchor_set_id")
    rev_a, rev_b = field(a, "anchor_set_revision"), field(b, "anchor_set_revision")
    if id_a and id_b and id_a != id_b:
        raise ValueError(
            f"The {first} uses anchor set {id_a!r} but the {second} uses {id_b!r}: relative "
            "features only carry over between artifacts built on the same anchor set (row r of "
            f"both anchors is the same input). Build the {second} from {id_a!r} "
            "(RelativeProjector.from_anchor_set)."
        )
    if id_a == id_b and rev_a and rev_b and rev_a != rev_b:
        raise ValueError(
            f"The {first} uses anchor set revision {rev_a!r} ({id_a}@{rev_a}) but the {second} "
            f"uses {rev_b!r} ({id_b}@{rev_b}): the anchors of two revisions differ. Build both "
            "from the same revision."
        )
