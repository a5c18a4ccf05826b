"""`SharedLinearArguments`: the shared linear closed form's arguments (`FitArguments`, the
whitening's shrinkage chosen from the fit rows unless a number is given). Light to import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from relrep_hf.anchors.arguments import FitArguments, argument_field
from relrep_hf.utils.defaults import SHARED_LINEAR_SHRINKAGE

__all__ = ["SharedLinearArguments"]


@dataclass
class SharedLinearArguments(FitArguments):
    """The shared linear closed form's arguments: the whitening's shrinkage is chosen from the
    fit rows unless a number is given (docs/quality.md)."""

    chooses_shrinkage: ClassVar[bool] = True

    shrinkage: float | str = argument_field(
        SHARED_LINEAR_SHRINKAGE,
        "covariance shrinkage lambda of the whitened inner product, or 'auto': chosen from the "
        "fit rows by cross-validation",
    )
