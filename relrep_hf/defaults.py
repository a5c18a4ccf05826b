"""The pipeline's defaults, defined once and light to import (the CLI's ``--help`` reads them)."""

from __future__ import annotations

# the bundled MiniLM at four layer/pooling settings; the last is held out of fitting
DEFAULT_ENCODERS = ("minilm:mean:-1", "minilm:mean:4", "minilm:mean:2", "minilm:cls:-1")
# how an anchor set is fitted; the default is the winner of benchmarks/bench_quality.py
METHODS = ("shared_linear", "param", "full_support")
DEFAULT_METHOD = "shared_linear"
