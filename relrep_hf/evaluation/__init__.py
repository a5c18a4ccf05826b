"""Evaluation: the zero-shot protocol (Algorithm 1), the steps it composes, a run's language
pairs, and their plots.

A public API: a program imports these names from ``relrep_hf.evaluation`` (docs/architecture.md,
"The public API"). Imported on first use.
"""

from __future__ import annotations

from relrep_hf.utils.lazy_imports import lazy_attributes, stub_names

_LAZY = stub_names(__file__)  # public name -> its module, from __init__.pyi
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
