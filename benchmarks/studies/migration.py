"""Embedding migration (issue #31): the chosen map's recall against the pairwise baselines on
real encoders, and the streamed rewrite of a large .npy store against a plain NumPy pass.

Quality (``--part quality``), in both retrieval directions: ``queries``, the issue's protocol
(mapped row i must find new row i among the new encoder's own vectors of the test rows) and
``corpus``, what a migrated store serves (new-encoder row i must find mapped row i among the
mapped test rows); the choice is cross-validated on the direction scored. The real group's 5,000 English verses (`benchmarks.spaces.real_encoders`;
``--quick``: 400 verses, three encoders, no SmolLM2). For each fit size K, the shared linear
anchor set (the library's default, shrinkage chosen from the rows) is fitted on the first K rows
of every encoder, each encoder's projector from the same rows. For each ordered pair (old, new),
`select_migration_map` gets the pair's K rows and the anchor path (old projector, then the new
one's inverse) as the prior, refitted on each fold's rows (`AnchorPaths`); every candidate and the chosen one map the old encoder's last 1,000
rows (re-embedding scores 1.0 in both directions: the new rows themselves). The pairwise baselines are
affine least squares, ridge with cross-validated penalty and standardised Procrustes.

Throughput (``--part throughput``): ``rows x 384`` float32 in a .npy file mapped to 768-d, our
`migrate_store` (chunked reads, one ``addmm`` per chunk, NaN/inf checks of each chunk as read
and as written, the output's lock, written aside, fsync, rename) against a plain chunked NumPy pass over ``np.load(mmap_mode="r")`` into an
``open_memmap`` output, interleaved in one process; peak RSS growth of each in a fresh process.

    OMP_NUM_THREADS=1 python -m benchmarks migration --part quality
    python -m benchmarks migration --part throughput --rows 1000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

import numpy as np
import torch

from benchmarks.common import Table, interleaved_medians, peak_memory, row
from relrep_hf.migration import migrate_store  # imported before any measurement
from relrep_hf.migration.candidates import DEFAULT_FOLDS
from relrep_hf.migration.map import MigrationMap

PAIRS = (
    ("minilm:mean", "e5-small"),
    ("use-m3", "e5-small"),
    ("minilm:mean", "use-m3"),
    ("e5-small", "use-m3"),
    ("smollm2:mean", "minilm:mean"),
    ("smollm2:last", "minilm:mean"),
    ("minilm:mean", "smollm2:last"),
    ("e5-small", "smollm2:mean"),
    ("use-m3", "smollm2:last"),
)
KS, QUICK_KS = (1000, 4000), (300,)
TEST_ROWS, QUICK_TEST_ROWS = 1000, 100
NUM_ANCHORS = 600  # at least every encoder's width (576), so that every inverse is exact
BASELINES = ("affine", "ridge", "procrustes")
ROWS, QUICK_ROWS = 1_000_000, 100_000
D_IN, D_OUT, CHUNK_ROWS = 384, 768, 32768


class AnchorPaths:
    """The anchor path of any pair, fitted on given rows: one shared linear anchor set on those
    rows of every encoder (cached by rows: the folds are the same for every pair), each
    encoder's projector onboarded from the same rows. The whitening's shrinkage is chosen once,
    on all K fit rows (the library's default selection), and fixed for the folds' refits."""

    def __init__(self, spaces: dict, fit_rows: torch.Tensor):
        self.spaces, self.shrinkage = spaces, None
        self.anchor_sets: dict = {}
        self.projectors: dict = {}
        self.anchor_set(fit_rows)  # chooses the shrinkage
        self.shrinkage = self.anchor_sets[self._key(fit_rows)].shrinkage

    @staticmethod
    def _key(rows: torch.Tensor) -> tuple:
        return (len(rows), hash(rows.numpy().tobytes()))

    def anchor_set(self, rows: torch.Tensor):
        from relrep_hf import AnchorSet

        key = self._key(rows)
        if key not in self.anchor_sets:
            train = {name: x[rows] for name, x in self.spaces.items()}
            kwargs = {} if self.shrinkage is None else {"shrinkage": self.shrinkage}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the cap's and thin statistics' warnings
                self.anchor_sets[key] = AnchorSet.shared_linear(
                    [{"index": int(i)} for i in rows],
                    train,
                    NUM_ANCHORS,
                    support_rows=torch.arange(len(rows)),
                    **kwargs,
                )
        return self.anchor_sets[key]

    def projector(self, name: str, rows: torch.Tensor):
        from relrep_hf import RelativeProjector, Statistics

        key = (name, *self._key(rows))
        if key not in self.projectors:
            x = self.spaces[name][rows]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.projectors[key] = RelativeProjector.from_anchor_set(
                    self.anchor_set(rows), x, Statistics.from_embeddings(x)
                )
        return self.projectors[key]

    def fit(self, pair: tuple[str, str]):
        """``rows -> {label: AffineMap}``: the pair's anchor path (variants by inverse ridge,
        `anchor_path_maps`) fitted on ``rows``."""
        from relrep_hf.migration.fit import anchor_path_maps

        def fit_on(rows: torch.Tensor):
            return anchor_path_maps(self.projector(pair[0], rows), self.projector(pair[1], rows))

        return fit_on


def pair_recalls(
    paths: AnchorPaths, pair: tuple[str, str], k: int, test: int, direction: str, folds: int
) -> dict:
    """Every candidate's and the chosen map's test Recall@1 for one pair of ``paths.spaces``,
    fit size and retrieval direction (the choice cross-validated on the same direction)."""
    from relrep_hf.functional.metrics import retrieval_metrics
    from relrep_hf.migration.candidates import select_migration_map

    old, new = paths.spaces[pair[0]].double(), paths.spaces[pair[1]].double()
    n = len(old)
    fit, held = slice(0, k), slice(n - test, n)
    prior = paths.fit(pair)  # refitted on each fold's rows: its score is out of fold too
    start = time.perf_counter()
    selection = select_migration_map(
        old[fit], new[fit], prior=prior, direction=direction, folds=folds
    )
    seconds = time.perf_counter() - start
    out = {}
    for name, candidate in selection.maps.items():
        with torch.no_grad():
            mapped = candidate(old[held])
        pair_of = (mapped, new[held]) if direction == "queries" else (new[held], mapped)
        out[name] = retrieval_metrics(*pair_of, ks=(1,))["recall@1"]
    out["chosen"] = out[selection.chosen]
    out["best pairwise"] = max(out[b] for b in BASELINES)
    return out | {"choice": selection.chosen, "fit_seconds": seconds, "cv": selection.cv_recall}


def _floors(results: dict) -> dict:
    """The issue's floors on one K's pairs."""
    hard = [r for r in results.values() if r["affine"] < 0.95]
    reach = [r for r in results.values() if max(r[c] for c in r["cv"]) >= 0.95]
    return {
        "min chosen - best pairwise": min(
            r["chosen"] - r["best pairwise"] for r in results.values()
        ),
        "pairs LSQ<0.95": len(hard),
        "mean chosen / mean LSQ (LSQ<0.95)": (
            mean(r["chosen"] for r in hard) / mean(r["affine"] for r in hard)
            if hard
            else float("nan")
        ),
        "pairs where a candidate reaches 0.95": len(reach),
        "min chosen there": min((r["chosen"] for r in reach), default=float("nan")),
    }


def _k_row(k: int, direction: str, results: dict) -> dict:
    floors = _floors(results)
    print(
        f"  K={k} {direction} floors: " + ", ".join(f"{a} {b:.3g}" for a, b in floors.items()),
        flush=True,
    )
    hard = [p for p, r in results.items() if r["affine"] < 0.95]
    label = f"pairs with LSQ < 0.95 ({len(hard)})" if hard else "all pairs (none with LSQ < 0.95)"
    hard = hard or list(results)
    detail = {
        f"{a}->{b}": f"{r['choice']} {r['chosen']:.3f} (best pairwise {r['best pairwise']:.3f}, "
        f"LSQ {r['affine']:.3f}, anchors {r.get('anchors', float('nan')):.3f}, shrunk "
        f"{r.get('shrunk', float('nan')):.3f})"
        for (a, b), r in results.items()
    }
    return row(
        f"migration R@1 ({direction}) K={k}, mean over {label}",
        "affine least squares",
        mean(results[p]["affine"] for p in hard),
        mean(results[p]["chosen"] for p in hard),
        "recall@1",
        **floors,
        **detail,
    )


def quality(
    quick: bool,
    directions: tuple[str, ...] = ("queries", "corpus"),
    encoders: tuple[str, ...] | None = None,
    ks: tuple[int, ...] | None = None,
    folds: int = DEFAULT_FOLDS,
) -> list[dict]:
    """``queries``: the issue's protocol (mapped row i among the new encoder's own vectors);
    ``corpus``: the migration's use (new row i among the mapped vectors). ``encoders``: only
    these (and the pairs among them; the anchor set is fitted on them)."""
    from benchmarks.spaces.real_encoders import (
        QUICK_REAL_ENCODERS,
        QUICK_REAL_ROWS,
        REAL_ENCODERS,
        REAL_ROWS,
        real_spaces,
    )

    rows = QUICK_REAL_ROWS if quick else REAL_ROWS
    encoders = encoders or (QUICK_REAL_ENCODERS if quick else REAL_ENCODERS)
    spaces = real_spaces(rows, encoders=encoders)
    test = QUICK_TEST_ROWS if quick else TEST_ROWS
    out = []
    for k in ks or (QUICK_KS if quick else KS):
        paths = AnchorPaths(spaces, torch.arange(k))
        for direction in directions:
            results = {}
            table = Table(
                f"migration K={k}, {direction}: test Recall@1 of each pair (load "
                f"{os.getloadavg()[0]:.1f})",
                [("old -> new", 30, ""), ("chosen", 24, ""), ("R@1", 6, ".3f"),
                 ("pairwise", 8, ".3f"), ("LSQ", 6, ".3f"), ("anchors", 7, ".3f"),
                 ("shrunk", 6, ".3f"), ("fit s", 6, ".1f")],
            )  # fmt: skip
            for pair in [p for p in PAIRS if set(p) <= set(encoders)]:
                r = results[pair] = pair_recalls(paths, pair, k, test, direction, folds)
                table.add(f"{pair[0]} -> {pair[1]}", r["choice"], r["chosen"],
                          r["best pairwise"], r["affine"], r.get("anchors"), r.get("shrunk"),
                          r["fit_seconds"])  # fmt: skip
            out.append(_k_row(k, direction, results))
    return out


def _make_vectors(path: Path, rows: int) -> None:
    vectors = np.lib.format.open_memmap(path, "w+", np.float32, (rows, D_IN))
    rng = np.random.default_rng(0)
    for start in range(0, rows, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, rows)
        vectors[start:stop] = rng.standard_normal((stop - start, D_IN), dtype=np.float32)
    vectors.flush()
    del vectors


def _map(seed: int = 0) -> MigrationMap:
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(D_IN, D_OUT, generator=generator) / D_IN**0.5
    return MigrationMap(weight, torch.randn(D_OUT, generator=generator))


def plain_numpy_pass(source: Path, out: Path) -> None:
    """The baseline: a plain chunked NumPy pass over the memory map, into an open_memmap."""
    weight, bias = _map().numpy_parameters()
    vectors = np.load(source, mmap_mode="r")
    result = np.lib.format.open_memmap(out, "w+", np.float32, (len(vectors), D_OUT))
    for start in range(0, len(vectors), CHUNK_ROWS):
        result[start : start + CHUNK_ROWS] = vectors[start : start + CHUNK_ROWS] @ weight + bias
    result.flush()
    del result


def ours(source: Path, out: Path) -> None:
    """`migrate_store` with its defaults (NaN/inf checks in and out, lock, written aside, fsync,
    rename)."""
    migrate_store(_map(), source, out, chunk_rows=CHUNK_ROWS, overwrite=True, show_progress=False)


def throughput(quick: bool, rows: int | None = None) -> list[dict]:
    rows = rows or (QUICK_ROWS if quick else ROWS)
    folder = Path(tempfile.mkdtemp(prefix="relrep-bench-migration-"))
    try:
        source = folder / "old.npy"
        _make_vectors(source, rows)
        a, b = folder / "plain.npy", folder / "ours.npy"
        times = interleaved_medians(
            {"plain": lambda: plain_numpy_pass(source, a), "ours": lambda: ours(source, b)},
            repeats=5 if quick else 3,
            warmup=1,
        )
        same = np.allclose(
            np.load(a, mmap_mode="r")[-100:], np.load(b, mmap_mode="r")[-100:], atol=1e-4
        )
        _, plain_peak = peak_memory(plain_numpy_pass, source, a)
        _, our_peak = peak_memory(ours, source, b)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"  {rows:,} x {D_IN} -> {D_OUT} float32: ours {times['ours']:.2f} s, plain NumPy "
        f"{times['plain']:.2f} s ({times['ours'] / times['plain']:.2f}x); peak RSS growth ours "
        f"{our_peak / 2**20:.0f} MiB, plain {plain_peak / 2**20:.0f} MiB; outputs equal: {same}",
        flush=True,
    )
    return [
        row(
            f"migrate_store {rows:,} x {D_IN} -> {D_OUT} .npy",
            "plain chunked NumPy pass over the memory map",
            times["plain"],
            times["ours"],
            "s",
            peak_rss_mib=our_peak / 2**20,
            baseline_peak_rss_mib=plain_peak / 2**20,
            outputs_equal=bool(same),
            threads=torch.get_num_threads(),
        )
    ]


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The real group's packages (the quality part reads its encoders)."""
    from benchmarks.spaces.groups import group_needs

    return {"": group_needs("real", quick=quick)}


def run(quick: bool) -> list[dict]:
    """Both parts (``python -m benchmarks``); quick: 400 verses and 100,000 rows."""
    return quality(quick) + throughput(quick)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks migration", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part", choices=("quality", "throughput", "all"), default="all")
    parser.add_argument("--rows", type=int, default=None, help="throughput: rows of the store")
    parser.add_argument("--encoders", nargs="*", default=None, help="quality: only these")
    parser.add_argument("--directions", nargs="*", default=["queries", "corpus"])
    parser.add_argument("--ks", nargs="*", type=int, default=None, help="quality: fit sizes")
    parser.add_argument("--folds", type=int, default=DEFAULT_FOLDS, help="quality: CV folds")
    args = parser.parse_args(argv)
    results = []
    if args.part in ("quality", "all"):
        encoders = args.encoders and tuple(args.encoders)
        ks = args.ks and tuple(args.ks)
        results += quality(args.quick, tuple(args.directions), encoders, ks, args.folds)
    if args.part in ("throughput", "all"):
        results += throughput(args.quick, args.rows)
    for r in results:
        print(
            f"{r['benchmark']}: ours {r['value']:.4g}, {r['baseline']} {r['baseline_value']:.4g}, ratio {r['ratio']:.3f}"
        )
