"""The kinds of mixing matrix, and which kind each anchor method's anchor sets hold.

`MIXING_KINDS` are the kinds `relrep_hf.functional.mixing.check_mixture` verifies. Which kind a
strategy's anchor sets hold is the anchor methods' to say: registering a method
(`relrep_hf.anchors.register_anchor_method`) records its kind here, and an anchor set that does
not record its own (built without ``mixing``, or saved before kinds were recorded, when every
anchor set was PARAM, k-means, random or farthest-point) takes its strategy's, or stochastic.
Pure Python, no torch: ``import relrep_hf`` registers the methods.

>>> record_strategy_mixing("toy", "one_hot")
>>> unrecorded_mixing("toy"), unrecorded_mixing("never-registered")
('one_hot', 'stochastic')
>>> forget_strategy_mixing("toy")
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "MIXING_KINDS",
    "STRATEGY_MIXING",
    "MixingKind",
    "check_mixing_kind",
    "forget_strategy_mixing",
    "record_strategy_mixing",
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
