"""The one entry of the benchmarks.

    python -m benchmarks [--quick] [--only NAME ...] [--json PATH]
    python -m benchmarks NAME [ARGS ...]

The first runs the default set (or ``--only`` those) in one process and prints a table of
ratios against baselines; the second runs one benchmark with its own arguments (``python -m
benchmarks NAME --help``). A benchmark is a module of ``perf/``, ``studies/`` or ``spaces/``
named by its file: ``run(quick)`` gives its table rows, ``main(argv)`` its own command line,
``needs(quick)`` the optional packages it reads (every benchmark with rows declares it; a part
whose packages are missing is skipped with one line).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from textwrap import shorten
from types import ModuleType

from benchmarks import common
from benchmarks.common import TABLES, announce_skips, warnings_once

PURPOSES = {
    "perf": "performance, each against a baseline run in the same process",
    "studies": "quality studies: does the method hold up, and what was tried",
    "spaces": "builders of the embedding spaces the studies read (cached)",
}
# What ``python -m benchmarks`` runs (CI: ``--quick``), in this order.
DEFAULT = (
    "projection",
    "statistics",
    "param",
    "wrapper",
    "st",
    "scale",
    "manifest",
    "extraction",
    "extraction_speed",
    "cli",
    "databases",
    "quality",
    "zero_shot",
    "migration",
    "head_transfer",
)


def catalogue() -> dict[str, tuple[str, str, frozenset[str]]]:
    """``{name: (module, purpose, entry points)}`` of every benchmark: each module of a purpose's
    folder defining ``run`` or ``main`` (and ``needs``, where it declares it), read without
    importing it (``--help`` stays quick)."""
    found: dict[str, tuple[str, str, frozenset[str]]] = {}
    for purpose in PURPOSES:
        for path in sorted((Path(__file__).parent / purpose).glob("*.py")):
            tree = ast.parse(path.read_text("utf-8"))
            defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
            entries = frozenset(defined & {"run", "main"})
            if not entries:
                continue  # a helper of the others
            if path.stem in found:
                raise RuntimeError(f"Two benchmarks named {path.stem!r}: rename one.")
            entries |= defined & {"needs"}
            found[path.stem] = (f"benchmarks.{purpose}.{path.stem}", purpose, entries)
    return found


def _summary(module: str) -> str:
    spec = importlib.util.find_spec(module)
    docstring = ast.get_docstring(ast.parse(Path(spec.origin).read_text("utf-8"))) or ""
    return docstring.split("\n\n")[0].replace("\n", " ")


def _listing(benchmarks: dict[str, tuple[str, str, frozenset[str]]]) -> str:
    lines = ["benchmarks (* in the default set; NAME --help for a benchmark's own arguments):"]
    for purpose, what in PURPOSES.items():
        lines.append(f"\n{purpose}/: {what}")
        for name, (module, where, _) in benchmarks.items():
            if where == purpose:
                mark = "*" if name in DEFAULT else " "
                lines.append(
                    f" {mark} {name:<21} {shorten(_summary(module), 76, placeholder=' ...')}"
                )
    return "\n".join(lines)


def _load(name: str, benchmarks: dict, parser: argparse.ArgumentParser) -> ModuleType:
    if name not in benchmarks:
        parser.error(f"no benchmark named {name!r}; the names: {', '.join(benchmarks)}.")
    return importlib.import_module(benchmarks[name][0])


def run_table(argv: Sequence[str], benchmarks: dict) -> None:
    """The default set (or ``--only``): every benchmark's rows in one table, ``--json`` kept."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__.split("\n\n")[0],
        epilog=_listing(benchmarks),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="a crash check on the smallest sizes (CI), no figures"
    )
    parser.add_argument("--only", nargs="*", default=None, metavar="NAME", help="these only")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    import torch
    from transformers.utils import logging as transformers_logging

    torch.manual_seed(0)
    transformers_logging.disable_progress_bar()  # one "Loading weights" bar per model load
    if args.quick:
        quick_threads(torch)
    modules = {name: _load(name, benchmarks, parser) for name in args.only or DEFAULT}
    for name, module in modules.items():
        if not hasattr(module, "run"):
            parser.error(f"{name} has no table rows: run it alone, python -m benchmarks {name}.")
        if not hasattr(module, "needs"):
            parser.error(f"{name} declares no needs(quick): say which optional packages it reads.")
    # said before anything runs, one line each: a missing package stops nothing minutes later
    skipped = {
        name: announce_skips(name, module.needs(args.quick)) for name, module in modules.items()
    }
    results = []
    for name, module in modules.items():
        if "" not in skipped[name]:
            started, cpu = time.perf_counter(), cpu_seconds()
            with warnings_once(name):
                results += module.run(quick=args.quick)
            seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
            load = os.getloadavg()[0]
            print(f"[{name}] {seconds:.1f} s (CPU {cpu:.1f} s, load {load:.1f})", flush=True)
    print_results(results, quick=args.quick)
    if args.json:
        meta = {
            "quick": args.quick,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        skips = {name: gaps for name, gaps in skipped.items() if gaps}
        document = {"meta": meta, "results": results, "tables": TABLES, "skipped": skips}
        args.json.write_text(json.dumps(document, indent=2))


def quick_threads(torch: ModuleType) -> None:
    """--quick: one thread (unless ``OMP_NUM_THREADS`` says otherwise), here and in the
    processes started from now on: a crash check's numbers are not figures, and two OpenMP
    threads spin whenever another process holds a core (at load 2.8: projection 2 -> 41 CPU s,
    st 2 -> 11, wrapper 6 -> 19, and slower in wall time too)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def cpu_seconds() -> float:
    """CPU seconds of this process, its ended children and the quick mode's forked measures
    (user + system): on a shared machine the wall time says the load, this says the work."""
    try:
        import resource
    except ImportError:  # not on Unix: this process only
        return time.process_time()
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    ended = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return ended + common.forked_cpu_seconds()


def print_results(results: list[dict], quick: bool = False) -> None:
    """One line per row (ours, the baseline, their ratio), its extra figures below it;
    ``quick``: under a line that says these are a crash check's, not figures."""
    if quick:
        print(f"\n{common.CRASH_CHECK}")
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


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    common.crash_check_titles("--quick" in argv)
    benchmarks = catalogue()
    if not argv or argv[0].startswith("-"):
        run_table(argv, benchmarks)
        return
    name, rest = argv[0], argv[1:]
    module = _load(name, benchmarks, argparse.ArgumentParser(prog="python -m benchmarks"))
    if hasattr(module, "main"):
        module.main(rest)
    else:  # table rows only: the table of this one
        run_table(["--only", name, *rest], benchmarks)


if __name__ == "__main__":
    main()
