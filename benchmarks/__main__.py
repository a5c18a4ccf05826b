"""Run every benchmark in one process and print a table of ratios against baselines."""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import time
from pathlib import Path

import torch

from benchmarks.common import TABLES, announce_skips, warnings_once

MODULES = [
    "bench_projection",
    "bench_statistics",
    "bench_param",
    "bench_wrapper",
    "bench_st",
    "bench_scale",
    "bench_manifest",
    "bench_extraction",
    "bench_cli",
    "bench_quality",
    "bench_zero_shot",
    "bench_migration",
    "head_transfer",
]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", nargs="*", default=None, help="benchmark modules to run")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    torch.manual_seed(0)
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # one "Loading weights" bar per model load
    modules = {name: importlib.import_module(f"benchmarks.{name}") for name in args.only or MODULES}
    skipped = {}  # said before anything runs: a missing package stops nothing minutes later
    for name, module in modules.items():
        needs = getattr(module, "needs", None)
        skipped[name] = announce_skips(name, needs(args.quick)) if needs else {}
    results = []
    for name, module in modules.items():
        if "" not in skipped[name]:
            with warnings_once(name):
                results += module.run(quick=args.quick)
    width = max((len(r["benchmark"]) for r in results), default=9)
    print(f"{'benchmark':<{width}}  {'ours':>10}  {'baseline':>10}  {'ratio':>6}  baseline")
    for r in results:
        print(
            f"{r['benchmark']:<{width}}  {r['value']:>10.4g}  {r['baseline_value']:>10.4g}  "
            f"{r['ratio']:>6.3f}  {r['baseline']} ({r['unit']})"
        )
        for key, value in r.items():
            if key not in ("benchmark", "baseline", "baseline_value", "value", "unit", "ratio"):
                print(
                    f"    {key}: {value:.3g}" if isinstance(value, float) else f"    {key}: {value}"
                )
    if args.json:
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        skips = {name: gaps for name, gaps in skipped.items() if gaps}
        document = {"meta": meta, "results": results, "tables": TABLES, "skipped": skips}
        args.json.write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
