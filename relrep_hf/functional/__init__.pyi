# The public names of relrep_hf.functional, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use. Only what a user calls (docs/api.md, tests/test_public_api.py); a name exported
# before answers from its module with a warning (utils/deprecated_import.py).

from relrep_hf.functional.least_squares import (
    AffineMap as AffineMap,
    fit_affine as fit_affine,
    fit_procrustes as fit_procrustes,
)
from relrep_hf.functional.metrics import (
    accuracy as accuracy,
    mean_reciprocal_rank as mean_reciprocal_rank,
    normalized_mse as normalized_mse,
    recall_at_k as recall_at_k,
    retrieval_metrics as retrieval_metrics,
    weighted_f1 as weighted_f1,
)
from relrep_hf.functional.regularization import (
    cross_validated_shrinkage as cross_validated_shrinkage,
    oas_shrinkage as oas_shrinkage,
)
from relrep_hf.functional.retention import retention_at_k as retention_at_k
from relrep_hf.functional.similarities import relative_projection as relative_projection
from relrep_hf.functional.statistics import (
    shrunk_covariance as shrunk_covariance,
    whiten as whiten,
    whitening_matrix as whitening_matrix,
)
