"""Zero-shot classification (weighted F1) of the shared linear map on the MiniLM spaces, and
where its gap to the absolute-space diagonal comes from (docs/quality.md).

The main job's protocol (`relrep_hf.pipeline.steps.evaluate`): its split (seed 0, 1,000 test rows),
the map fitted on the three training encoders (the last, minilm-cls-L-1, held out), one head
per source encoder (`relrep_hf.evaluation.stitching_steps.train_classifier`, 30 epochs) evaluated on every other
encoder's test rows; "Abs." is a head on the target's own standardised embeddings. The oracle
gives the source head the target's rows mapped by a SUPERVISED least-squares map onto the
source's features (fitted on the train rows): the best any linear alignment can give a fixed
source head.

    python -m benchmarks zero_shot_gap
"""

# ruff: noqa
import argparse
import os
import time
from collections.abc import Sequence

import torch

from benchmarks.spaces.groups import load_group
from benchmarks.studies.quality_variants import whitened_spaces
from relrep_hf.evaluation.stitching_steps import head_f1, standardize, train_classifier

EPOCHS = int(os.environ.get("EPOCHS", 30))


def _load() -> None:
    """The MiniLM group, its split and the whitened spaces (``W``), as module globals."""
    global spaces, names, labels, n, test, train, held, training, num_labels, W
    group = load_group("minilm")
    spaces = {k: v.double() for k, v in group.embeddings.items()}
    names = list(spaces)
    labels = torch.tensor(group.labels)
    n = len(labels)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    test = order[:1000].sort().values
    train = order[1000:].sort().values
    held = names[-1]
    training = [k for k in names if k != held]
    num_labels = int(labels.max()) + 1
    W = whiten_all(0.15)


def whiten_all(shrink):
    return whitened_spaces(spaces, train, shrink)


def closed(K, m=300, power=0.0):
    support = train[:K]
    zs = []
    for k in training:
        xw = W[k][train]
        e, v = torch.linalg.eigh(xw.T @ xw)
        zs.append(W[k][support] @ (v * e.clamp_min(0).sqrt()))
    U, s, _ = torch.linalg.svd(torch.cat(zs, 1), full_matrices=False)
    U = U[:, :m] * (s[:m] ** 2).pow(power)
    return {k: W[k][support].T @ U for k in names}  # B_k [d, m]


def post(B, kind):
    out = {}
    for k, b in B.items():
        f = W[k][train] @ b
        if kind == "none":
            out[k] = b
        elif kind == "std":
            out[k] = b / f.std(0)
        elif kind == "whiten":
            c = f.T @ f / len(f)
            e, v = torch.linalg.eigh(c)
            out[k] = b @ (v * e.clamp_min(e[-1] * 1e-9).rsqrt()) @ v.T
        elif kind == "global":
            out[k] = b / f.square().mean().sqrt()
    return out


def evaluate(B, label):
    t0 = time.time()
    feats = {k: (W[k] @ B[k]).float() for k in names}
    res = {}
    for target in [t for t in names if t not in ABS]:
        a_tr, a_te = standardize(spaces[target][train].float(), spaces[target][test].float())
        if target not in ABS:
            ABS[target] = head_f1(
                train_classifier(a_tr, labels[train], num_labels=num_labels, epochs=EPOCHS),
                a_te,
                labels[test],
            )
    heads = {
        s: train_classifier(feats[s][train], labels[train], num_labels=num_labels, epochs=EPOCHS)
        for s in names
    }
    rows = []
    for target in names:
        zs = [head_f1(heads[s], feats[target][test], labels[test]) for s in names if s != target]
        same = head_f1(heads[target], feats[target][test], labels[test])
        rows.append((target, ABS[target], same, sum(zs) / len(zs)))
    gap = sum(r[1] - r[3] for r in rows) / len(rows)
    print(
        f"{label:<40} "
        + "  ".join(
            f"{t[:14]}: abs {100 * a:.1f} same {100 * s:.1f} zs {100 * z:.1f}"
            for t, a, s, z in rows
        )
        + f" | mean gap abs-zs {100 * gap:.2f} ({time.time() - t0:.0f}s)",
        flush=True,
    )
    return rows


ABS = {}


def oracle() -> None:
    global W
    W = whiten_all(0.0)
    B = closed(len(train))
    feats = {k: (W[k] @ B[k]).float() for k in names}
    heads = {
        s: train_classifier(feats[s][train], labels[train], num_labels=num_labels, epochs=EPOCHS)
        for s in names
    }
    for target in names:
        xt = torch.cat([spaces[target], torch.ones(n, 1, dtype=torch.float64)], 1)
        mapped, aligned = [], []
        for s in names:
            if s == target:
                continue
            M = torch.linalg.lstsq(xt[train], feats[s][train].double()).solution
            mapped.append(head_f1(heads[s], (xt[test] @ M).float(), labels[test]))
            aligned.append(head_f1(heads[s], feats[target][test], labels[test]))
        print(
            f"{target:<16} abs {100 * ABS[target]:.1f}  K=N exact zero-shot "
            f"{100 * sum(aligned) / 3:.1f}  supervised-map oracle {100 * sum(mapped) / 3:.1f}",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> None:
    """The closed form's variants, then the oracle (``EPOCHS`` in the environment: the heads')."""
    global W
    argparse.ArgumentParser(prog="python -m benchmarks zero_shot_gap").parse_args(argv)
    _load()
    for shrink, K, kinds in ((0.15, 2000, ("none", "std")), (0.0, len(train), ("none", "std"))):
        W = whiten_all(shrink)
        B = closed(K)
        for kind in kinds:
            evaluate(post(B, kind), f"closed K={K} shrinkage={shrink} output={kind}")
    for p in (1.0, 2.0):
        W = whiten_all(0.0)
        evaluate(post(closed(len(train), power=p), "none"), f"K=N exact, columns * eigval^{p}")
    oracle()
