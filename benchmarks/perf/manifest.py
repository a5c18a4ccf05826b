"""The load-time cost of checking a projector's files: manifest digests and structural checks.

A 300 x 768 projector (the paper's 300 anchors, a BERT-base-sized encoder) is saved once and
loaded again and again: with the sha256 manifest check against ``verify=False`` (the target:
under 5% of the load time), and with every check of ours against transformers' own
``from_pretrained`` alone.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from transformers import PreTrainedModel

from benchmarks.common import interleaved_medians, row
from relrep_hf import RelativeProjector, Statistics
from relrep_hf.utils.manifest import verify_folder


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads: none (the core install runs it)."""
    return {}


def run(quick: bool = False) -> list[dict]:
    d, m = 768, 300
    data = torch.randn(4 * d, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    projector = RelativeProjector.from_statistics(data[:m], Statistics.from_embeddings(data))
    repeats = 5 if quick else 21
    with tempfile.TemporaryDirectory(prefix="relrep-bench-manifest-") as tmp:
        folder = Path(tmp) / "projector"
        projector.save_pretrained(folder)

        def transformers_alone() -> None:
            PreTrainedModel.from_pretrained.__func__(RelativeProjector, folder)

        times = interleaved_medians(
            {
                "verified": lambda: RelativeProjector.from_pretrained(folder),
                "unverified": lambda: RelativeProjector.from_pretrained(folder, verify=False),
                "transformers": transformers_alone,
                "digests": lambda: verify_folder(folder),
            },
            repeats=repeats,
            warmup=2,
        )
        size = sum(p.stat().st_size for p in folder.iterdir()) / 1024**2
    name = f"projector load ({m} x {d}, {size:.1f} MiB)"
    return [
        row(
            f"{name}: sha256 manifest check",
            "load with verify=False",
            times["unverified"],
            times["verified"],
            "s",
            digest_seconds=times["digests"],
        ),
        row(
            f"{name}: every check of ours",
            "transformers' from_pretrained alone",
            times["transformers"],
            times["verified"],
            "s",
        ),
    ]
