"""Math: pure functions on tensors (statistics, similarities, anchor mixtures, the closed form,
regularization, losses, least squares, metrics, tables), as latentis's ``functional``.

A public API: a program imports these names from ``relrep_hf.functional`` (docs/architecture.md,
"The public API"); the modules behind them are the package's to rearrange. Imported on first
use, so ``import relrep_hf.functional`` loads no torch.
"""

from __future__ import annotations

from relrep_hf.utils.lazy_imports import lazy_attributes, stub_names

_LAZY = stub_names(__file__)  # public name -> its module, from __init__.pyi
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
