"""Run every benchmark in one process and print a table of ratios against baselines."""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import time
from pathlib import Path

import torch

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
    "head_transfer",
]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", nargs="*", default=None, help="benchmark modules to run")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    torch.manual_seed(0)
    results = []
    for name in args.only or MODULES:
        results += importlib.import_module(f"benchmarks.{name}").run(quick=args.quick)
    width = max(len(r["benchmark"]) for r in results)
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
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2))


if __name__ == "__main__":
    main()
