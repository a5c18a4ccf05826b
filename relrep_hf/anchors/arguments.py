"""`FitArguments`: the arguments every anchor method takes.

Like transformers' ``training_args.py`` beside ``trainer.py``. Number of anchors, support
size, the whitening's regularization, eps and seed are common to every method; a method with
more has its own class in its folder, extending this one (`relrep_hf.anchors.param.arguments`:
PARAM's training, Table 5; `relrep_hf.anchors.shared_linear.arguments`: the shrinkage chosen
from the fit rows). Each class holds its method's defaults, so a default has one home (the
paper's 0.15 shrinkage here). Light to import: the command line builds its flags from these
fields (``relrep-hf --help`` imports no torch, accelerate or datasets).
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
    check_count,
    check_similarity_settings,
)

__all__ = ["FitArguments", "argument_field"]


def argument_field(default: Any, help: str, **kwargs: Any) -> Any:
    """A field with its command-line help (read by `transformers.HfArgumentParser`)."""
    return field(default=default, metadata={"help": help}, **kwargs)


@dataclass
class FitArguments:
    """The arguments every anchor method takes; defaults are the paper's (Table 5).

    ``shrinkage`` is the whitening's regularization: a number in [0, 1] (the paper's 0.15),
    or ``"auto"`` where the method chooses it from the fit rows (`relrep_hf.anchors.shared_linear.arguments`).
    """

    _argument_group_name = "Fitting"
    # whether shrinkage="auto" (chosen from the fit rows) is this method's to take
    chooses_shrinkage: ClassVar[bool] = False

    output_dir: str
    num_anchors: int = argument_field(DEFAULT_NUM_ANCHORS, "number of anchors m")
    support_size: int | None = argument_field(
        None, "support points K drawn from the training rows (None: every row)"
    )
    shrinkage: float = argument_field(
        DEFAULT_SHRINKAGE, "covariance shrinkage lambda of the whitened inner product"
    )
    eps: float = argument_field(DEFAULT_EPS, "ridge added to the shrunk covariance")
    seed: int = argument_field(DEFAULT_SEED, "random seed")

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
