"""Test-wide settings: no telemetry, an isolated Hugging Face cache, deterministic threads."""

import os
import tempfile

# Set before transformers / huggingface_hub are imported by any test module.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="relrep-hf-test-home-")


import pytest


@pytest.fixture(scope="session")
def minilm():
    """All 4,192 corpus sentences embedded by the real MiniLM at four layer/pooling settings."""
    from tests.minilm import minilm_spaces

    return minilm_spaces(4192, [(6, "mean"), (6, "cls"), (4, "mean"), (2, "mean")])
