# The public names of relrep_hf.translation, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use. Only what a user calls (docs/api.md, tests/test_public_api.py); a name exported
# before answers from its module with a warning (utils/deprecated_import.py).

from relrep_hf.translation.inverse import InversionWarning as InversionWarning, invert as invert
from relrep_hf.translation.translator import (
    evaluate_translation as evaluate_translation,
    translation_map as translation_map,
)
