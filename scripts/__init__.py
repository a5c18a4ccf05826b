"""The paper's experiments, each a module run from the repository root as
``python -m scripts.NAME [--smoke] [--seeds ...] [--output-dir DIR]`` (``--help`` for its own
options); ``common`` holds what they share beyond the library."""
