"""Progress bars of long work (encoding, extraction, evaluation): tqdm only, so that what shows
a bar without running a model (a callable or sentence-transformers encoder, a Ray actor, a
re-embed child) does not import torch for it."""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm

# Work that has run this long shows its progress bar unless `show_progress` says otherwise
# (whatever its size: 1,000 sentences through a 135M-parameter LM take minutes on 2 cores).
PROGRESS_DELAY_SECONDS = 3.0


def progress_bar(total: int, show: bool | None, *, main: bool = True, **kwargs: Any) -> tqdm:
    """A tqdm bar over ``total`` inputs: ``show`` True shows it at once, False never, None once
    the work has taken `PROGRESS_DELAY_SECONDS` (tqdm's ``delay``); only on the ``main``
    process. ``kwargs`` go to tqdm (``desc``, ``unit``)."""
    delay = 0.0 if show else PROGRESS_DELAY_SECONDS
    return tqdm(total=total, disable=show is False or not main, delay=delay, **kwargs)
