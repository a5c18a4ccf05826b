# The public names of relrep_hf.evaluation, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use.

from relrep_hf.evaluation.evaluators import (
    RelativeClassificationEvaluator as RelativeClassificationEvaluator,
    RelrepEvaluator as RelrepEvaluator,
)
from relrep_hf.evaluation.language_pairs import language_pair_rows as language_pair_rows
from relrep_hf.evaluation.plots import (
    heatmap as heatmap,
    new_figure as new_figure,
    relative_spaces_plot as relative_spaces_plot,
    save as save,
    stitching_heatmap as stitching_heatmap,
)
from relrep_hf.evaluation.stitching_steps import (
    build_projectors as build_projectors,
    head_f1 as head_f1,
    retrieval_matrix as retrieval_matrix,
    standardize as standardize,
    train_classifier as train_classifier,
)
from relrep_hf.evaluation.zero_shot import (
    ALGORITHM_1 as ALGORITHM_1,
    PAPER_TABLE_1 as PAPER_TABLE_1,
    EncoderData as EncoderData,
    Method as Method,
    ZeroShotStitching as ZeroShotStitching,
    zero_shot_classification as zero_shot_classification,
)
