"""Embedding migration (issues #31, #37): whether a migration is worth it on real encoders, and
the streamed rewrite of a large .npy store against a plain NumPy pass.

Quality (``--part quality``): the real group's 5,000 English verses
(`benchmarks.spaces.real_encoders`; ``--quick``, a crash check: 200 verses, three encoders, no
SmolLM2, the first pair at K = 100, two folds). For
each fit size K, the shared linear anchor set (the library's default, shrinkage chosen from the
rows) is fitted on the first K rows of every encoder, each encoder's projector from the same
rows. For each ordered pair (old, new), `select_migration_map` gets the pair's K rows and the
anchor path as the prior, refitted on each fold's rows (`AnchorPaths`), with ``--criteria``
deciding (default: the mean of cross-validated Recall@1 and retention@10); the bridge is the
same choice fitted new -> old. On the last 1,000 rows (`migration_report`): new-encoder
queries (the new rows themselves) search the corpus migrated by every candidate (the defaults
and ``low_rank``), by the chosen one, through the bridge, and ranked by CSLS over the chosen
map (`csls`: a retrieval-time hubness correction, measured as a scoring option); Recall@1 and
retention@10 of each, the best candidate in hindsight, the selection's loss, and per K the mean
over pairs as a ratio to affine least squares.

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
from relrep_hf import MigrationMap, migrate_store
from relrep_hf.migration.candidates import CANDIDATES
from relrep_hf.migration.selection import BLEND, DEFAULT_FOLDS

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
KS, QUICK_KS = (1000, 4000), (100,)
TEST_ROWS, QUICK_TEST_ROWS = 1000, 50
QUICK_PAIRS = 1  # --quick: the first pair of the encoders (a crash check, not the study)
QUICK_FOLDS = 2  # --quick: the fewest cross-validation folds (the default: DEFAULT_FOLDS)
NUM_ANCHORS = 600  # at least every encoder's width (576), so that every inverse is exact
CANDIDATES_RUN = (*CANDIDATES, "low_rank")  # low_rank measured beside the defaults
ROWS, QUICK_ROWS = 1_000_000, 20_000
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


def csls(queries: torch.Tensor, keys: torch.Tensor, sample: torch.Tensor, k: int = 10):
    """CSLS scores (Conneau et al. 2018) of every query against every key: ``2 cos(q, d) -
    r_d``, ``r_d`` the mean cosine of key d to its ``k`` nearest queries of ``sample`` (the
    query-side term is the same for every key of a query, so it does not change a ranking)."""
    unit = torch.nn.functional.normalize
    keys = unit(keys, dim=1)
    hubness = (unit(sample, dim=1) @ keys.T).topk(k, dim=0).values.mean(dim=0)  # [n_keys]
    return 2 * unit(queries, dim=1) @ keys.T - hubness


def csls_scores(queries, keys, reference: torch.Tensor, sample) -> dict:
    """Recall@1 and retention@10 (own row left out) of a search ranked by `csls`."""
    from relrep_hf.functional.retention import retention_of_neighbours

    scores = csls(queries, keys, sample)
    rows = torch.arange(len(scores))
    recall = (scores.argmax(dim=1) == rows).double().mean().item()
    scores[rows, rows] = -torch.inf
    return {"recall@1": recall, "retention@10": retention_of_neighbours(
        scores.topk(10, dim=1).indices, reference)}  # fmt: skip


def pair_report(
    paths: AnchorPaths, pair: tuple[str, str], k: int, test: int, criterion: str, folds: int
) -> dict:
    """One pair of ``paths.spaces`` at fit size ``k``: every candidate (`CANDIDATES_RUN`), the
    chosen map and the bridge on the last ``test`` rows (`migration_report`: new-encoder
    queries, Recall@1 and retention@10 against re-embedding), and CSLS over the chosen map."""
    from relrep_hf.functional.retention import top_k_neighbours
    from relrep_hf.migration import migration_report, select_migration_map

    old, new = paths.spaces[pair[0]].double(), paths.spaces[pair[1]].double()
    n = len(old)
    fit, held = slice(0, k), slice(n - test, n)
    start = time.perf_counter()
    forward = select_migration_map(old[fit], new[fit], prior=paths.fit(pair), folds=folds,
                                   criterion=criterion)  # fmt: skip
    seconds = time.perf_counter() - start
    # low_rank is measured beside the defaults, not chosen from (nor blended)
    aside = select_migration_map(old[fit], new[fit], folds=folds, candidates=("low_rank",),
                                 criterion=criterion)  # fmt: skip
    backward = select_migration_map(new[fit], old[fit], prior=paths.fit(pair[::-1]),
                                    folds=folds, criterion=criterion)  # fmt: skip
    defaults, chosen = list(forward.maps), forward.chosen  # the defaults and their blend
    maps = forward.maps | {"low_rank": aside.maps["low_rank"]}
    report = migration_report(old[held], new[held], new[held], maps, chosen,
                              bridge=backward.map)  # fmt: skip
    reference = top_k_neighbours(new[held], new[held], 10, exclude_own=True)
    with torch.no_grad():
        mapped = forward.maps[chosen](old[held])
    report["csls"] = csls_scores(new[held], mapped, reference, new[fit])
    blend = forward.settings.get(BLEND, {})
    out = {"choice": chosen, "bridge_choice": backward.chosen, "fit_seconds": seconds,
           "blend": f"{blend.get('weight')} {'+'.join(blend.get('of', []))}"}  # fmt: skip
    for metric in ("recall@1", "retention@10"):
        hindsight = max(report[c][metric] for c in defaults)
        single = max(report[c][metric] for c in defaults if c != BLEND)
        out[metric] = {c: report[c][metric] for c in maps} | {
            "chosen": report[chosen][metric], "best": hindsight,
            "loss": hindsight - report[chosen][metric],
            "single loss": single - report[chosen][metric], "bridge": report["bridge"][metric],
            "csls": report["csls"][metric]}  # fmt: skip
    out["recommendation"] = report["recommendation"]["action"]
    cv = forward.cv_recall | aside.cv_recall, forward.cv_retention | aside.cv_retention
    out["cv"] = {c: (cv[0][c], cv[1][c]) for c in maps}
    return out


def _k_rows(k: int, criterion: str, results: dict) -> list[dict]:
    """The issue's floors on one K's pairs, per metric: every pair's selection loss <= 0.005,
    the mean chosen over the mean least squares >= 1.1 (K = 1,000)."""
    out = []
    for metric in ("recall@1", "retention@10"):
        values = [r[metric] for r in results.values()]
        worst = max(v["loss"] for v in values)
        worst_single = max(v["single loss"] for v in values)
        ratio = mean(v["chosen"] for v in values) / mean(v["affine"] for v in values)
        print(f"  K={k} {criterion} {metric}: worst selection loss {worst:.3f} (floor 0.005; "
              f"against the best single candidate {worst_single:.3f}), "
              f"mean chosen / mean LSQ {ratio:.3f} (floor 1.1 at K=1000)", flush=True)  # fmt: skip
        out.append(row(
            f"migration {metric} (corpus) K={k}, criterion {criterion}, mean over pairs",
            "affine least squares", mean(v["affine"] for v in values),
            mean(v["chosen"] for v in values), metric, worst_selection_loss=worst,
            worst_loss_against_single_candidates=worst_single,
            **{f"{a}->{b}": f"{results[a, b]['choice']} {v['chosen']:.3f} (best "
               f"{v['best']:.3f}, LSQ {v['affine']:.3f}, bridge {v['bridge']:.3f})"
               for (a, b), v in zip(results, values, strict=True)}))  # fmt: skip
    return out


def quality(
    quick: bool,
    criteria: tuple[str, ...] = ("both",),
    encoders: tuple[str, ...] | None = None,
    ks: tuple[int, ...] | None = None,
    folds: int = DEFAULT_FOLDS,
) -> list[dict]:
    """Every pair among ``encoders`` (default: the real group) at each fit size, the choice
    cross-validated by each of ``criteria``, scored as a migrated store is searched."""
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
        for criterion in criteria:
            results = {}
            pairs = [p for p in PAIRS if set(p) <= set(encoders)]
            for pair in pairs[:QUICK_PAIRS] if quick else pairs:
                results[pair] = pair_report(paths, pair, k, test, criterion, folds)
                _print_pair(k, criterion, pair, results[pair])
            out += _k_rows(k, criterion, results)
    return out


def _print_pair(k: int, criterion: str, pair: tuple[str, str], r: dict) -> None:
    names = [*CANDIDATES_RUN, BLEND, "chosen", "best", "loss", "single loss", "bridge", "csls"]
    table = Table(
        f"K={k} {criterion}: {pair[0]} -> {pair[1]} (chosen {r['choice']}, blend {r['blend']}, bridge "
        f"{r['bridge_choice']}, recommended {r['recommendation']}, fit {r['fit_seconds']:.1f} "
        f"s, load {os.getloadavg()[0]:.1f})",
        [("metric", 13, ""), *((n[:8], 8, ".3f") for n in names)],
    )
    for metric in ("recall@1", "retention@10"):
        table.add(metric, *(r[metric].get(n) for n in names))
    cv = [*CANDIDATES_RUN, BLEND]
    table.add("cv", *(r["cv"][n][0] for n in cv), *[None] * 6)
    table.add("cv retention", *(r["cv"][n][1] for n in cv), *[None] * 6)


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
            repeats=1 if quick else 3,
            warmup=0 if quick else 1,
        )
        same = np.allclose(
            np.load(a, mmap_mode="r")[-100:], np.load(b, mmap_mode="r")[-100:], atol=1e-4
        )
        _, plain_peak = peak_memory(plain_numpy_pass, source, a, quick=quick)
        _, our_peak = peak_memory(ours, source, b, quick=quick)
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
    """Both parts (``python -m benchmarks``); quick: 200 verses, one pair, two folds, and 20,000
    rows."""
    return quality(quick, folds=QUICK_FOLDS if quick else DEFAULT_FOLDS) + throughput(quick)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks migration", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part", choices=("quality", "throughput", "all"), default="all")
    parser.add_argument("--rows", type=int, default=None, help="throughput: rows of the store")
    parser.add_argument("--encoders", nargs="*", default=None, help="quality: only these")
    parser.add_argument(
        "--criteria", nargs="*", default=["both"], help="quality: recall, retention, both"
    )
    parser.add_argument("--ks", nargs="*", type=int, default=None, help="quality: fit sizes")
    parser.add_argument("--folds", type=int, default=DEFAULT_FOLDS, help="quality: CV folds")
    args = parser.parse_args(argv)
    results = []
    if args.part in ("quality", "all"):
        encoders = args.encoders and tuple(args.encoders)
        ks = args.ks and tuple(args.ks)
        results += quality(args.quick, tuple(args.criteria), encoders, ks, args.folds)
    if args.part in ("throughput", "all"):
        results += throughput(args.quick, args.rows)
    for r in results:
        print(
            f"{r['benchmark']}: ours {r['value']:.4g}, {r['baseline']} {r['baseline_value']:.4g}, ratio {r['ratio']:.3f}"
        )
