"""Evaluation: the zero-shot protocol (Algorithm 1), the steps it composes, a run's language
pairs, and their plots.

A public API: a program imports these names from ``relrep_hf.evaluation`` (docs/architecture.md,
"The public API"). Imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.utils.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from relrep_hf.evaluation.language_pairs import (
        language_pair_rows,
    )
    from relrep_hf.evaluation.plots import (
        heatmap,
        new_figure,
        relative_spaces_plot,
        save,
        stitching_heatmap,
    )
    from relrep_hf.evaluation.stitching_steps import (
        build_projectors,
        head_f1,
        retrieval_matrix,
        standardize,
        train_classifier,
    )
    from relrep_hf.evaluation.zero_shot import (
        ALGORITHM_1,
        PAPER_TABLE_1,
        EncoderData,
        Method,
        ZeroShotStitching,
        zero_shot_classification,
    )

# public name -> the module that defines it, imported on first access
_LAZY = {
    "ALGORITHM_1": "relrep_hf.evaluation.zero_shot",
    "PAPER_TABLE_1": "relrep_hf.evaluation.zero_shot",
    "EncoderData": "relrep_hf.evaluation.zero_shot",
    "Method": "relrep_hf.evaluation.zero_shot",
    "ZeroShotStitching": "relrep_hf.evaluation.zero_shot",
    "zero_shot_classification": "relrep_hf.evaluation.zero_shot",
    "build_projectors": "relrep_hf.evaluation.stitching_steps",
    "head_f1": "relrep_hf.evaluation.stitching_steps",
    "retrieval_matrix": "relrep_hf.evaluation.stitching_steps",
    "standardize": "relrep_hf.evaluation.stitching_steps",
    "train_classifier": "relrep_hf.evaluation.stitching_steps",
    "language_pair_rows": "relrep_hf.evaluation.language_pairs",
    "heatmap": "relrep_hf.evaluation.plots",
    "new_figure": "relrep_hf.evaluation.plots",
    "relative_spaces_plot": "relrep_hf.evaluation.plots",
    "save": "relrep_hf.evaluation.plots",
    "stitching_heatmap": "relrep_hf.evaluation.plots",
}

__all__ = [
    "ALGORITHM_1",
    "PAPER_TABLE_1",
    "EncoderData",
    "Method",
    "ZeroShotStitching",
    "build_projectors",
    "head_f1",
    "heatmap",
    "language_pair_rows",
    "new_figure",
    "relative_spaces_plot",
    "retrieval_matrix",
    "save",
    "standardize",
    "stitching_heatmap",
    "train_classifier",
    "zero_shot_classification",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
