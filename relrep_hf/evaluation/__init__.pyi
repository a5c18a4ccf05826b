# The public names of relrep_hf.evaluation, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use. Only what a user calls (docs/api.md, tests/test_public_api.py); a name exported
# before answers from its module with a warning (utils/deprecated_import.py).

from relrep_hf.evaluation.evaluators import (
    RelativeClassificationEvaluator as RelativeClassificationEvaluator,
)
from relrep_hf.evaluation.plots import (
    heatmap as heatmap,
    relative_spaces_plot as relative_spaces_plot,
    stitching_heatmap as stitching_heatmap,
)
from relrep_hf.evaluation.zero_shot import (
    EncoderData as EncoderData,
    Method as Method,
    ZeroShotStitching as ZeroShotStitching,
    zero_shot_classification as zero_shot_classification,
)
