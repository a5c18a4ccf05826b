"""Should an onboarded encoder choose its own shrinkage from its support rows? (issue #22)

An onboarded encoder gets a projector from the anchor set with no training; its whitening is
estimated from its own rows. Today it takes the anchor set's shrinkage (chosen from the training
encoders' fit rows, `relrep_hf.functional.regularization`). This script measures, on the real group
(`benchmarks.spaces.real_encoders`, 5,000 English verses), each encoder held out in turn and onboarded
on the first K rows, retrieval (R@1) from every training encoder into it on the last 1,000 rows
with:

- the anchor set's shrinkage (the library's behaviour);
- each fixed shrinkage of the grid; the best of them is "best in hindsight" (chosen on test rows);
- two selectors that see the onboarded encoder's support rows only, cross-validated like the
  fit's selector (5 folds, 2 held out, the same hill climb): held-out rows' relative features
  (statistics and anchors from the other rows) scored by MRR against a target: ``consensus``,
  the anchor set's shared coordinates of those rows (its mixing matrix, columns standardised);
  ``reference``, the training encoders' mean relative features of those rows (what retrieval
  will meet; an anchor set would have to ship them).

``python -m benchmarks onboarding_shrinkage`` (about 5 minutes on 2 cores with warm caches;
``--group small_lms --held-out llama-w128-s2:last`` for another group).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from statistics import mean

import torch
import torch.nn.functional as F

from benchmarks.spaces.real_encoders import REAL_ROWS, real_spaces
from relrep_hf import AnchorSet, RelativeProjector, Statistics
from relrep_hf.functional import retrieval_metrics
from relrep_hf.functional.regularization import CovarianceBasis, climb_grid, paired_mrr
from relrep_hf.utils.defaults import DEFAULT_EPS, SHRINKAGE_FOLDS, SHRINKAGE_GRID, SHRINKAGE_ROUNDS

KS = (500, 1000, 2000, 4000)
HELD_OUT = ("smollm2:last", "e5-small", "use-m3")
NUM_ANCHORS = 300
TEST_ROWS = 1000


def _standardised(x: torch.Tensor) -> torch.Tensor:
    return F.normalize((x - x.mean(0)) / x.std(0).clamp_min(1e-300), dim=1)


def select_from_support(
    mixture: torch.Tensor, support: torch.Tensor, target: torch.Tensor, *, standardise: bool
):
    """The grid's shrinkage whose held-out support rows best match ``target`` rows (MRR both
    ways); ``standardise`` scales each anchor's column first (the consensus coordinates' scale
    is not the features')."""
    unit = _standardised if standardise else (lambda x: F.normalize(x, dim=1))
    u = mixture.T.double()  # [K, m]
    k = len(support)
    order = torch.randperm(k, generator=torch.Generator().manual_seed(0))
    scorers = []
    for fold in range(SHRINKAGE_ROUNDS):
        held = torch.zeros(k, dtype=torch.bool)
        held[order[fold::SHRINKAGE_FOLDS]] = True
        basis = CovarianceBasis.from_statistics(Statistics.from_embeddings(support[~held]))
        rotated = (support.double() - basis.mean) @ basis.vectors
        anchors_side = rotated[~held].T @ u[~held]  # [d, m]
        wanted = unit(target[held].double())

        def score(shrinkage, rows=rotated[held], side=anchors_side, b=basis, wanted=wanted):
            features = unit((rows / b.shrunk(shrinkage, DEFAULT_EPS)) @ side)
            return (paired_mrr(features, wanted) + paired_mrr(wanted, features)) / 2

        scorers.append(score)
    scores = climb_grid(sorted(SHRINKAGE_GRID), lambda s: mean(f(s) for f in scorers))
    return max(scores, key=lambda s: (round(scores[s], 9), -s))


def run_one(spaces: dict[str, torch.Tensor], held_out: str, k: int) -> dict:
    rows, test = (
        torch.arange(k),
        torch.arange(len(spaces[held_out]) - TEST_ROWS, len(spaces[held_out])),
    )
    train = {name: x[rows] for name, x in spaces.items() if name != held_out}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # thin statistics at small K
        anchor_set = AnchorSet.shared_linear(
            [{"row": i} for i in range(k)], train, NUM_ANCHORS, support_rows=rows
        )
        relative, reference = {}, []
        for name, x in train.items():
            projector = RelativeProjector.from_anchor_set(
                anchor_set, x, Statistics.from_embeddings(x)
            )
            with torch.no_grad():
                relative[name] = projector(spaces[name][test])
                reference.append(F.normalize(projector(x).double(), dim=1))
        x = spaces[held_out]
        r1 = {}
        for shrinkage in SHRINKAGE_GRID:
            projector = RelativeProjector.from_anchor_set(
                anchor_set, x[rows], Statistics.from_embeddings(x[rows]), shrinkage=shrinkage
            )
            with torch.no_grad():
                onboarded = projector(x[test])
            r1[shrinkage] = mean(
                retrieval_metrics(r, onboarded, ks=(1,))["recall@1"] for r in relative.values()
            )
    chosen = {
        "anchor set's": anchor_set.shrinkage,
        "consensus": select_from_support(
            anchor_set.mixture, x[rows], anchor_set.mixture.T, standardise=True
        ),
        "reference": select_from_support(
            anchor_set.mixture, x[rows], sum(reference), standardise=False
        ),
    }
    best = max(r1, key=r1.get)
    return {
        "chosen": chosen,
        "recall@1": {m: r1[s] for m, s in chosen.items()},
        "best": (best, r1[best]),
    }


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks onboarding_shrinkage", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--group", default="real", help="a group of benchmarks.spaces.groups")
    parser.add_argument("--held-out", nargs="*", default=None)
    parser.add_argument("--k", nargs="*", type=int, default=list(KS))
    arguments = parser.parse_args(argv)
    if arguments.group == "real":
        spaces = real_spaces(REAL_ROWS)
    else:
        from benchmarks.spaces.groups import load_group

        spaces = load_group(arguments.group).embeddings
    held_outs = arguments.held_out or [h for h in HELD_OUT if h in spaces]
    print(
        f"{'held out':<14} {'K':>5}  "
        + "  ".join(
            f"{m:>18}" for m in ("anchor set's", "consensus", "reference", "best in hindsight")
        )
    )
    for held_out in held_outs:
        for k in arguments.k:
            r = run_one(spaces, held_out, k)
            cells = [f"{r['recall@1'][m]:.3f} ({r['chosen'][m]:g})" for m in r["chosen"]]
            cells.append(f"{r['best'][1]:.3f} ({r['best'][0]:g})")
            print(f"{held_out:<14} {k:>5}  " + "  ".join(f"{c:>18}" for c in cells), flush=True)
    print(
        f"(R@1 from each training encoder into the onboarded one, (shrinkage); load {os.getloadavg()[0]:.1f})"
    )
