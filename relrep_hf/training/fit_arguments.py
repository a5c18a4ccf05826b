"""`FitArguments`: what every anchor method is fitted with, and each method's own defaults.

Number of anchors, support size, the whitening's regularization, eps and seed are common to
every method (`relrep_hf.training.anchor_methods` names each method's arguments class).
`ParamTrainingArguments` extends them with PARAM's training. Each class holds its method's
defaults, so a default has one home: the paper's 0.15 shrinkage here, the shared linear map's
``"auto"`` (chosen from the fit rows) in `SharedLinearArguments`. Light to import: the command
line builds its flags from these fields (``relrep-hf --help`` imports no torch).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from relrep_hf.utils.defaults import (
    DEFAULT_EPS,
    DEFAULT_NUM_ANCHORS,
    DEFAULT_SEED,
    DEFAULT_SHRINKAGE,
    SHARED_LINEAR_SHRINKAGE,
    check_count,
    check_similarity_settings,
)


def _arg(default: Any, help: str, **kwargs: Any) -> Any:
    """A field with its command-line help (read by `transformers.HfArgumentParser`)."""
    return field(default=default, metadata={"help": help}, **kwargs)


@dataclass
class FitArguments:
    """The arguments every anchor method takes; defaults are the paper's (Table 5).

    ``shrinkage`` is the whitening's regularization: a number in [0, 1] (the paper's 0.15),
    or ``"auto"`` where the method chooses it from the fit rows (`SharedLinearArguments`).
    """

    _argument_group_name = "Fitting"
    # whether shrinkage="auto" (chosen from the fit rows) is this method's to take
    chooses_shrinkage: ClassVar[bool] = False

    output_dir: str
    num_anchors: int = _arg(DEFAULT_NUM_ANCHORS, "number of anchors m")
    support_size: int | None = _arg(
        None, "support points K drawn from the training rows (None: every row)"
    )
    shrinkage: float = _arg(
        DEFAULT_SHRINKAGE, "covariance shrinkage lambda of the whitened inner product"
    )
    eps: float = _arg(DEFAULT_EPS, "ridge added to the shrunk covariance")
    seed: int = _arg(DEFAULT_SEED, "random seed")

    def __post_init__(self) -> None:
        check_count(self.num_anchors, "num_anchors")
        if self.support_size is not None:
            check_count(self.support_size, "support_size", optional=True)
        if self.shrinkage == "auto":
            if not self.chooses_shrinkage:
                raise ValueError(
                    f"shrinkage='auto' (chosen from the fit rows) is the shared linear map's; "
                    f"{type(self).__name__} takes a number in [0, 1] (the paper's "
                    f"{DEFAULT_SHRINKAGE})."
                )
            check_similarity_settings(0.0, self.eps)
        else:
            check_similarity_settings(self.shrinkage, self.eps)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class SharedLinearArguments(FitArguments):
    """The shared linear closed form's arguments: the whitening's shrinkage is chosen from the
    fit rows unless a number is given (docs/quality.md)."""

    chooses_shrinkage: ClassVar[bool] = True

    shrinkage: float | str = _arg(
        SHARED_LINEAR_SHRINKAGE,
        "covariance shrinkage lambda of the whitened inner product, or 'auto': chosen from the "
        "fit rows by cross-validation",
    )
