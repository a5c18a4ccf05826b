"""Train the small causal LMs of the quality benchmark (GPT-2 and Llama, from scratch).

Each model gets its own byte-level BPE tokenizer and is trained on English prose from the
docstrings of installed packages (never on the bundled sentences the benchmark embeds); see
``benchmarks/small_lms.py`` for the models and the text. Trained models are cached, so a second
run only prints their records.

Usage (from the repository root)::

    python scripts/train_small_lms.py            # 4 models, ~10-15 min on 2 idle CPU cores
    python scripts/train_small_lms.py --quick    # 4 much smaller ones, seconds
    python scripts/train_small_lms.py --cache-dir DIR   # default: ~/.cache/relrep_hf/small_lms

The cache folder can also be set with ``RELREP_HF_CACHE`` (models go in its ``small_lms/``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

# scripts/ is not a package: make the repository root importable for ``benchmarks``.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.small_lms import (
    default_cache_dir,
    ensure_small_lms,
    read_record,
    summary_line,
)


def main(argv: Sequence[str] | None = None) -> dict[str, dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny models, for CI")
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help=f"default: {default_cache_dir()}"
    )
    parser.add_argument("--json", action="store_true", help="print the training records as JSON")
    args = parser.parse_args(argv)
    folders = ensure_small_lms(quick=args.quick, cache_dir=args.cache_dir)
    records = {name: read_record(folder) for name, folder in folders.items()}
    for name, folder in folders.items():
        print(f"{summary_line(records[name])}\n    {folder}")
    if args.json:
        print(json.dumps(records, indent=2))
    return records


if __name__ == "__main__":
    main()
