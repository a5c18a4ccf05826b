# The public names of relrep_hf.functional, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use.

from relrep_hf.functional.anchor_strategies import (
    farthest_point_mixture as farthest_point_mixture,
    kmeans_mixture as kmeans_mixture,
    random_mixture as random_mixture,
    sample_support_rows as sample_support_rows,
)
from relrep_hf.functional.least_squares import (
    AffineMap as AffineMap,
    LeastSquaresOperator as LeastSquaresOperator,
    fit_affine as fit_affine,
    fit_procrustes as fit_procrustes,
    least_squares_operator as least_squares_operator,
)
from relrep_hf.functional.losses import (
    LossWeights as LossWeights,
    coverage_loss as coverage_loss,
    info_nce_loss as info_nce_loss,
    length_loss as length_loss,
    multi_space_info_nce as multi_space_info_nce,
    orthogonality_loss as orthogonality_loss,
    param_loss as param_loss,
)
from relrep_hf.functional.markdown_tables import (
    format_table as format_table,
    markdown_table as markdown_table,
    mean_std as mean_std,
    metric_label as metric_label,
    summarize_seeds as summarize_seeds,
)
from relrep_hf.functional.metrics import (
    accuracy as accuracy,
    mean_reciprocal_rank as mean_reciprocal_rank,
    normalized_mse as normalized_mse,
    recall_at_k as recall_at_k,
    retrieval_metrics as retrieval_metrics,
    retrieval_ranks as retrieval_ranks,
    rr_std as rr_std,
    weighted_f1 as weighted_f1,
)
from relrep_hf.functional.mixing import (
    MIXING_KINDS as MIXING_KINDS,
    check_same_anchor_set as check_same_anchor_set,
    fingerprint as fingerprint,
)
from relrep_hf.functional.regularization import (
    ShrinkageSelection as ShrinkageSelection,
    cross_validated_shrinkage as cross_validated_shrinkage,
    oas_shrinkage as oas_shrinkage,
    supported_rank as supported_rank,
)
from relrep_hf.functional.retention import (
    retention_at_k as retention_at_k,
    retention_of_neighbours as retention_of_neighbours,
    top_k_neighbours as top_k_neighbours,
)
from relrep_hf.functional.shared_linear import (
    SharedLinearFit as SharedLinearFit,
    fit_shared_linear as fit_shared_linear,
)
from relrep_hf.functional.similarities import (
    SIMILARITIES as SIMILARITIES,
    Similarity as Similarity,
    get_similarity as get_similarity,
    register_similarity as register_similarity,
    relative_projection as relative_projection,
    unregister_similarity as unregister_similarity,
)
from relrep_hf.functional.statistics import (
    Statistics as Statistics,
    shrunk_covariance as shrunk_covariance,
    whiten as whiten,
    whitening_matrix as whitening_matrix,
)
