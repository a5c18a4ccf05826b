"""The way back: relative coordinates returned to an encoder's absolute space.

- `inverse`: the inverse relative projection (least squares through the anchors, for every
  similarity), and the affine and Procrustes maps fitted on paired rows beside it;
- `translator`: latent space translation, ``translate(x) = invert(target, source(x))``, as a
  function, an affine map (`translation_map`) and a module (`LatentTranslator`).

A public API: a program imports these names from ``relrep_hf.translation`` (docs/architecture.md,
"The public API"). Imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relrep_hf.utils.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from relrep_hf.translation.inverse import (
        INVERTIBLE_SIMILARITIES,
        IllConditionedInversionWarning,
        InversionWarning,
        RelativeInverse,
        UnderdeterminedInversionWarning,
        invert,
        relative_inverse,
    )
    from relrep_hf.translation.translator import (
        LatentTranslator,
        evaluate_translation,
        translate,
        translation_map,
    )

# public name -> the module that defines it, imported on first access
_LAZY = {
    "INVERTIBLE_SIMILARITIES": "relrep_hf.translation.inverse",
    "IllConditionedInversionWarning": "relrep_hf.translation.inverse",
    "InversionWarning": "relrep_hf.translation.inverse",
    "RelativeInverse": "relrep_hf.translation.inverse",
    "UnderdeterminedInversionWarning": "relrep_hf.translation.inverse",
    "invert": "relrep_hf.translation.inverse",
    "relative_inverse": "relrep_hf.translation.inverse",
    "LatentTranslator": "relrep_hf.translation.translator",
    "evaluate_translation": "relrep_hf.translation.translator",
    "translate": "relrep_hf.translation.translator",
    "translation_map": "relrep_hf.translation.translator",
}

__all__ = [
    "INVERTIBLE_SIMILARITIES",
    "IllConditionedInversionWarning",
    "InversionWarning",
    "LatentTranslator",
    "RelativeInverse",
    "UnderdeterminedInversionWarning",
    "evaluate_translation",
    "invert",
    "relative_inverse",
    "translate",
    "translation_map",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
