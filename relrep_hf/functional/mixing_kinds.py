"""The kinds of mixing matrix, which kind each anchor method's anchor sets hold, and how a
sampling method draws its mixture.

`MIXING_KINDS` are the kinds `relrep_hf.functional.mixing.check_mixture` verifies. Which kind a
strategy's anchor sets hold is the anchor methods' to say: registering a method
(`relrep_hf.anchors.register_anchor_method`) records its kind here, and an anchor set that does
not record its own (built without ``mixing``, or saved before kinds were recorded, when every
anchor set was PARAM, k-means, random or farthest-point) takes its strategy's, or stochastic.
A sampling method's registration records its sampler here too, the pure function that draws its
mixture, which `AnchorSet.random`, ``kmeans`` and ``farthest_point`` call (the artifacts sit
below the methods, so they read what the registration recorded down here). Pure Python, no
torch: ``import relrep_hf`` registers the methods.

>>> record_strategy_mixing("toy", "one_hot")
>>> unrecorded_mixing("toy"), unrecorded_mixing("never-registered")
('one_hot', 'stochastic')
>>> forget_strategy_mixing("toy")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

__all__ = [
    "MIXING_KINDS",
    "STRATEGY_MIXING",
    "STRATEGY_SAMPLERS",
    "MixingKind",
    "Sampler",
    "check_mixing_kind",
    "forget_strategy_mixing",
    "forget_strategy_sampler",
    "record_strategy_mixing",
    "record_strategy_sampler",
    "strategy_sampler",
    "unrecorded_mixing",
]

MixingKind = Literal["stochastic", "one_hot", "identity", "linear"]
MIXING_KINDS: tuple[str, ...] = ("stochastic", "one_hot", "identity", "linear")

STRATEGY_MIXING: dict[str, str] = {}
"""Strategy (an anchor method's name) -> the kind of mixing matrix its anchor sets hold."""


def check_mixing_kind(strategy: str, kind: str) -> None:
    """A ValueError naming the valid kinds unless ``kind`` is one of `MIXING_KINDS`."""
    if kind not in MIXING_KINDS:
        raise ValueError(
            f"Invalid mixing {kind!r} for the anchor method {strategy!r}. Valid: "
            f"{', '.join(map(repr, MIXING_KINDS))}."
        )


def record_strategy_mixing(strategy: str, kind: str) -> None:
    """Record that ``strategy``'s anchor sets hold ``kind`` mixings (`check_mixing_kind`)."""
    check_mixing_kind(strategy, kind)
    STRATEGY_MIXING[strategy] = kind


def forget_strategy_mixing(strategy: str) -> None:
    """Forget ``strategy``'s kind (its method was unregistered)."""
    STRATEGY_MIXING.pop(strategy, None)


def unrecorded_mixing(strategy: str) -> str:
    """The kind of an anchor set of ``strategy`` that records none: its method's, else
    stochastic."""
    return STRATEGY_MIXING.get(strategy, "stochastic")


Sampler = Callable[..., Any]
"""``sampler(support_size, support_embeddings, num_anchors, *, seed, **options) -> mixture
[m, K]``: a sampling method's pure math (``support_embeddings`` one ``[K, d_i]`` table per
encoder, or None for a method that needs none)."""

STRATEGY_SAMPLERS: dict[str, Sampler] = {}
"""Strategy (a sampling method's name) -> the sampler that draws its anchor sets' mixtures."""


def record_strategy_sampler(strategy: str, sampler: Sampler) -> None:
    """Record that ``strategy``'s mixtures are drawn by ``sampler``."""
    STRATEGY_SAMPLERS[strategy] = sampler


def forget_strategy_sampler(strategy: str) -> None:
    """Forget ``strategy``'s sampler (its method was unregistered)."""
    STRATEGY_SAMPLERS.pop(strategy, None)


def strategy_sampler(strategy: str) -> Sampler:
    """The sampler of the registered sampling method ``strategy``; a ValueError says what to do
    when none is (the method was unregistered)."""
    if strategy not in STRATEGY_SAMPLERS:
        raise ValueError(
            f"No registered anchor method {strategy!r} draws its anchors by sampling (was it "
            "unregistered?): register it again (`relrep_hf.anchors.register_anchor_methods()` "
            "registers the package's own), or use one of "
            f"{', '.join(map(repr, STRATEGY_SAMPLERS)) or 'none'}."
        )
    return STRATEGY_SAMPLERS[strategy]
