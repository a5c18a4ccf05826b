"""The way back: relative coordinates returned to an encoder's absolute space.

- `inverse`: the inverse relative projection (least squares through the anchors, for every
  similarity), and the affine and Procrustes maps fitted on paired rows beside it;
- `translator`: latent space translation, ``translate(x) = invert(target, source(x))``, as a
  function, an affine map (`translation_map`) and a module (`LatentTranslator`).

A public API: a program imports these names from ``relrep_hf.translation`` (docs/architecture.md,
"The public API"). Imported on first use.
"""

from __future__ import annotations

from relrep_hf.utils.lazy_imports import lazy_attributes, stub_names

_LAZY = stub_names(__file__)  # public name -> its module, from __init__.pyi
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
