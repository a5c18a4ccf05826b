"""Test-wide settings: no telemetry, an isolated Hugging Face cache, deterministic threads."""

import os
import tempfile

# Set before transformers / huggingface_hub are imported by any test module.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="relrep-hf-test-home-")
