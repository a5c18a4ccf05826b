"""Math: pure functions on tensors (statistics, similarities, anchor mixtures, the closed form,
regularization, losses, least squares, metrics, tables), as latentis's ``functional``.

A public API: a program imports these names from ``relrep_hf.functional`` (docs/architecture.md,
"The public API"); the modules behind them are the package's to rearrange. Imported on first
use, so ``import relrep_hf.functional`` loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.utils.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from relrep_hf.functional.anchor_strategies import (
        farthest_point_mixture,
        kmeans_mixture,
        random_mixture,
        sample_support_rows,
    )
    from relrep_hf.functional.least_squares import (
        AffineMap,
        LeastSquaresOperator,
        fit_affine,
        fit_procrustes,
        least_squares_operator,
    )
    from relrep_hf.functional.losses import (
        LossWeights,
        coverage_loss,
        info_nce_loss,
        length_loss,
        multi_space_info_nce,
        orthogonality_loss,
        param_loss,
    )
    from relrep_hf.functional.metrics import (
        accuracy,
        mean_reciprocal_rank,
        normalized_mse,
        recall_at_k,
        retrieval_metrics,
        retrieval_ranks,
        rr_std,
        weighted_f1,
    )
    from relrep_hf.functional.mixing import (
        MIXING_KINDS,
        check_same_anchor_set,
        fingerprint,
    )
    from relrep_hf.functional.regularization import (
        ShrinkageSelection,
        cross_validated_shrinkage,
        oas_shrinkage,
        supported_rank,
    )
    from relrep_hf.functional.retention import (
        retention_at_k,
        retention_of_neighbours,
        top_k_neighbours,
    )
    from relrep_hf.functional.shared_linear import (
        SharedLinearFit,
        fit_shared_linear,
    )
    from relrep_hf.functional.similarities import (
        SIMILARITIES,
        Similarity,
        get_similarity,
        register_similarity,
        relative_projection,
        unregister_similarity,
    )
    from relrep_hf.functional.statistics import (
        Statistics,
        shrunk_covariance,
        whiten,
        whitening_matrix,
    )
    from relrep_hf.functional.tables import (
        format_table,
        markdown_table,
        mean_std,
        metric_label,
        summarize_seeds,
    )

# public name -> the module that defines it, imported on first access
_LAZY = {
    "Statistics": "relrep_hf.functional.statistics",
    "shrunk_covariance": "relrep_hf.functional.statistics",
    "whiten": "relrep_hf.functional.statistics",
    "whitening_matrix": "relrep_hf.functional.statistics",
    "SIMILARITIES": "relrep_hf.functional.similarities",
    "Similarity": "relrep_hf.functional.similarities",
    "get_similarity": "relrep_hf.functional.similarities",
    "register_similarity": "relrep_hf.functional.similarities",
    "unregister_similarity": "relrep_hf.functional.similarities",
    "relative_projection": "relrep_hf.functional.similarities",
    "farthest_point_mixture": "relrep_hf.functional.anchor_strategies",
    "kmeans_mixture": "relrep_hf.functional.anchor_strategies",
    "random_mixture": "relrep_hf.functional.anchor_strategies",
    "sample_support_rows": "relrep_hf.functional.anchor_strategies",
    "MIXING_KINDS": "relrep_hf.functional.mixing",
    "check_same_anchor_set": "relrep_hf.functional.mixing",
    "fingerprint": "relrep_hf.functional.mixing",
    "SharedLinearFit": "relrep_hf.functional.shared_linear",
    "fit_shared_linear": "relrep_hf.functional.shared_linear",
    "ShrinkageSelection": "relrep_hf.functional.regularization",
    "cross_validated_shrinkage": "relrep_hf.functional.regularization",
    "oas_shrinkage": "relrep_hf.functional.regularization",
    "supported_rank": "relrep_hf.functional.regularization",
    "LossWeights": "relrep_hf.functional.losses",
    "coverage_loss": "relrep_hf.functional.losses",
    "info_nce_loss": "relrep_hf.functional.losses",
    "length_loss": "relrep_hf.functional.losses",
    "multi_space_info_nce": "relrep_hf.functional.losses",
    "orthogonality_loss": "relrep_hf.functional.losses",
    "param_loss": "relrep_hf.functional.losses",
    "AffineMap": "relrep_hf.functional.least_squares",
    "LeastSquaresOperator": "relrep_hf.functional.least_squares",
    "fit_affine": "relrep_hf.functional.least_squares",
    "fit_procrustes": "relrep_hf.functional.least_squares",
    "least_squares_operator": "relrep_hf.functional.least_squares",
    "accuracy": "relrep_hf.functional.metrics",
    "mean_reciprocal_rank": "relrep_hf.functional.metrics",
    "normalized_mse": "relrep_hf.functional.metrics",
    "recall_at_k": "relrep_hf.functional.metrics",
    "retrieval_metrics": "relrep_hf.functional.metrics",
    "retrieval_ranks": "relrep_hf.functional.metrics",
    "rr_std": "relrep_hf.functional.metrics",
    "weighted_f1": "relrep_hf.functional.metrics",
    "retention_at_k": "relrep_hf.functional.retention",
    "retention_of_neighbours": "relrep_hf.functional.retention",
    "top_k_neighbours": "relrep_hf.functional.retention",
    "format_table": "relrep_hf.functional.tables",
    "markdown_table": "relrep_hf.functional.tables",
    "mean_std": "relrep_hf.functional.tables",
    "metric_label": "relrep_hf.functional.tables",
    "summarize_seeds": "relrep_hf.functional.tables",
}

__all__ = [
    "MIXING_KINDS",
    "SIMILARITIES",
    "AffineMap",
    "LeastSquaresOperator",
    "LossWeights",
    "SharedLinearFit",
    "ShrinkageSelection",
    "Similarity",
    "Statistics",
    "accuracy",
    "check_same_anchor_set",
    "coverage_loss",
    "cross_validated_shrinkage",
    "farthest_point_mixture",
    "fingerprint",
    "fit_affine",
    "fit_procrustes",
    "fit_shared_linear",
    "format_table",
    "get_similarity",
    "info_nce_loss",
    "kmeans_mixture",
    "least_squares_operator",
    "length_loss",
    "markdown_table",
    "mean_reciprocal_rank",
    "mean_std",
    "metric_label",
    "multi_space_info_nce",
    "normalized_mse",
    "oas_shrinkage",
    "orthogonality_loss",
    "param_loss",
    "random_mixture",
    "recall_at_k",
    "register_similarity",
    "relative_projection",
    "retention_at_k",
    "retention_of_neighbours",
    "retrieval_metrics",
    "retrieval_ranks",
    "rr_std",
    "sample_support_rows",
    "shrunk_covariance",
    "summarize_seeds",
    "supported_rank",
    "top_k_neighbours",
    "unregister_similarity",
    "weighted_f1",
    "whiten",
    "whitening_matrix",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
