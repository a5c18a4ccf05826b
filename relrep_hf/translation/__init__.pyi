# The public names of relrep_hf.translation, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use.

from relrep_hf.translation.inverse import (
    INVERTIBLE_SIMILARITIES as INVERTIBLE_SIMILARITIES,
    IllConditionedInversionWarning as IllConditionedInversionWarning,
    InversionWarning as InversionWarning,
    RelativeInverse as RelativeInverse,
    UnderdeterminedInversionWarning as UnderdeterminedInversionWarning,
    invert as invert,
    relative_inverse as relative_inverse,
)
from relrep_hf.translation.translator import (
    LatentTranslator as LatentTranslator,
    evaluate_translation as evaluate_translation,
    translate as translate,
    translation_map as translation_map,
)
