"""Variants of the shared linear map, measured on the benchmark's cached spaces (docs/quality.md).

Plain matrix code (float64, no library API beyond statistics and metrics) so that many variants
run in minutes: leave-one-space-out over every space of the group, fit rows = all but the last
1,000 rows, test rows = the last 1,000 (never used for fitting or statistics), m = 300, mean
Recall@1 of every other space into the held-out one. ``--validation`` moves everything inside
the fit rows (inner fit: all but their last 1,000; inner test: their last 1,000), to choose a
setting without the test rows.

    python -m benchmarks quality_variants [--group small_lms] [--validation]
"""

# ruff: noqa
import argparse
import os
import time
from collections.abc import Sequence

import torch

from benchmarks.spaces.groups import load_group
from relrep_hf import Statistics
from relrep_hf.functional import whitening_matrix
from relrep_hf.functional import retrieval_metrics

M = 300
# the group's spaces (float64) and rows, set by `main`
spaces: dict[str, torch.Tensor] = {}
names: list[str] = []
fit = test = torch.arange(0)


def whitened_spaces(spaces, rows, shrinkage):
    """Every space whitened by its own statistics of ``rows`` (shrinkage 0: exactly)."""
    out = {}
    for k, x in spaces.items():
        st = Statistics.from_embeddings(x[rows])
        out[k] = (x - st.mean) @ whitening_matrix(st, shrinkage=shrinkage)
    return out


def whitened(shrink):
    return whitened_spaces(spaces, fit, shrink)


def r1(feats, held, key="recall@1"):
    vals = [retrieval_metrics(feats[o], feats[held])[key] for o in feats if o != held]
    return sum(vals) / len(vals)


def factor_svd(W, train, support):
    # sum_i S_i C_i S_i^T = Z Z^T, Z = [S_i C_i^{1/2}]
    zs = []
    for k in train:
        xw = W[k][fit]
        c = xw.T @ xw
        e, v = torch.linalg.eigh(c)
        zs.append(W[k][support] @ (v * e.clamp_min(0).sqrt()))
    Z = torch.cat(zs, 1)
    U, s, _ = torch.linalg.svd(Z, full_matrices=False)
    return U, s**2


def closed(W, held, K=1000, m=M, power=0.0, outstd=False, train=None):
    support = fit[:K]
    train = train or [k for k in names if k != held]
    U, lam = factor_svd(W, train, support)
    U = U[:, :m] * lam[:m].pow(power)
    feats = {}
    for k in names:
        S = W[k][support]
        B = S.T @ U  # [d, m]
        if outstd:
            B = B / (W[k][fit] @ B).std(0).clamp_min(1e-12)
        feats[k] = W[k][test] @ B
    return feats


def report(label, fn, **kw):
    t0 = time.time()
    vals = []
    for held in names:
        feats = fn(held, **kw)
        vals.append(r1(feats, held))
    print(f"{label:<55} R@1 {sum(vals) / len(vals):.4f}  ({time.time() - t0:.1f}s)", flush=True)
    return sum(vals) / len(vals)


def gcca_gen(W, held, K=1000, m=M, reg=1e-3, power=0.0):
    """maximize cross-encoder agreement / within-encoder variance: generalized eigenproblem
    in the span of the training encoders' factors."""
    support = fit[:K]
    train = [k for k in names if k != held]
    Ufull, lam = factor_svd(W, train, support)
    r = int((lam > lam[0] * 1e-10).sum())
    Q = Ufull[:, :r]  # basis of the reachable directions in R^K
    feats_fit = [W[k][fit] @ (W[k][support].T @ Q) for k in train]  # R_i Q  [N, r]
    within = sum(f.T @ f for f in feats_fit)
    tot = sum(feats_fit)
    between = tot.T @ tot
    within = within + reg * within.trace() / r * torch.eye(r)
    Lw = torch.linalg.cholesky(within)
    Li = torch.linalg.inv(Lw)
    A = Li @ between @ Li.T
    e, v = torch.linalg.eigh((A + A.T) / 2)
    e, v = e.flip(0), v.flip(1)
    a = Li.T @ v[:, :m]
    U = Q @ a
    U = U / U.norm(dim=0) * e[:m].clamp_min(0).pow(power)
    feats = {}
    for k in names:
        feats[k] = W[k][test] @ (W[k][support].T @ U)
    return feats


def kernel_closed(W, held, K=1000, m=M, kind="cos", gamma=1.0, center=True):
    support = fit[:K]
    train = [k for k in names if k != held]

    def phi(k, rows):
        x, s = W[k][rows], W[k][support]
        d = x.shape[1]
        if kind == "cos":
            return x @ (s / s.norm(dim=1, keepdim=True)).T
        if kind == "rbf":
            d2 = torch.cdist(x, s).square()
            return torch.exp(-gamma * d2 / (2 * d))
        if kind == "wip+cos_sup":
            return torch.cat([x @ s.T / d**0.5, x @ (s / s.norm(dim=1, keepdim=True)).T], 1)

    means = {}
    G = 0
    for k in train:
        f = phi(k, fit)
        means[k] = f.mean(0) if center else 0
        f = f - means[k]
        G = G + f.T @ f
    e, v = torch.linalg.eigh(G)
    U = v.flip(1)[:, :m]
    feats = {}
    for k in names:
        mk = means.get(k)
        if mk is None:
            mk = phi(k, fit).mean(0) if center else 0
        feats[k] = (phi(k, test) - mk) @ U
    return feats


def main(argv: Sequence[str] | None = None) -> None:
    global spaces, names, fit, test
    parser = argparse.ArgumentParser(prog="python -m benchmarks quality_variants")
    parser.add_argument("--group", default=os.environ.get("GROUP", "small_lms"))
    parser.add_argument("--validation", action="store_true", help="inside the fit rows")
    args = parser.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    spaces = {k: v.double() for k, v in load_group(args.group).embeddings.items()}
    names = list(spaces)
    n = len(next(iter(spaces.values())))
    fit, test = torch.arange(n - 1000), torch.arange(n - 1000, n)
    if args.validation:
        fit, test = fit[:-1000], fit[-1000:]
    n = len(fit)
    w15 = whitened(0.15)
    report("closed form K=1000 shrinkage 0.15 (as first shipped)", lambda h: closed(w15, h))
    report(f"closed form K={n} shrinkage 0.15", lambda h: closed(w15, h, K=n))
    for p in (-0.5, -0.25, 0.5, 1.0):
        report(
            f"closed form K={n} shrinkage 0.15, columns * eigenvalue^{p}",
            lambda h: closed(w15, h, K=n, power=p),
        )
    report(
        f"closed form K={n} shrinkage 0.15, per-encoder output standardisation",
        lambda h: closed(w15, h, K=n, outstd=True),
    )
    report(f"generalised eigenproblem (between / within) K={n}", lambda h: gcca_gen(w15, h, K=n))
    report("kernel: cosine in whitened space K=1000", lambda h: kernel_closed(w15, h, kind="cos"))
    for g in (1.0, 0.3):
        report(
            f"kernel: RBF gamma={g} K=1000", lambda h: kernel_closed(w15, h, kind="rbf", gamma=g)
        )
    report(
        "WIP + whitened-cosine features concatenated K=1000",
        lambda h: kernel_closed(w15, h, kind="wip+cos_sup", center=False),
    )
    for shrink in (0.01, 0.02, 0.05, 0.1, 0.3, 0.5):
        ws = whitened(shrink)
        report(f"closed form K={n} shrinkage {shrink}", lambda h: closed(ws, h, K=n))
    w0 = whitened(0.0)
    report("closed form K=1000 exact whitening", lambda h: closed(w0, h))
    report("closed form K=2000 exact whitening", lambda h: closed(w0, h, K=2000))
    report(f"closed form K={n} exact whitening (MAXVAR GCCA)", lambda h: closed(w0, h, K=n))
    report(
        "the same, the held-out space's fit rows in the fit too (transductive)",
        lambda h: closed(w0, h, K=n, train=list(names)),
    )
