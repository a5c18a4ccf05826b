"""The candidate maps of an embedding migration, one registry entry each.

A user who switches embedding models has parallel rows: the same inputs embedded by the old
encoder (``old [n, d_s]``) and the new one (``new [n, d_t]``). Every candidate fits
:class:`~relrep_hf.functional.least_squares.AffineMap` s on them, one per setting of its path
(a penalty, a rank, a variant of the prior), and `relrep_hf.migration.selection` keeps the
setting and the candidate that score best out of fold:

- ``affine``: affine least squares (no penalty);
- ``ridge``: affine least squares with a ridge penalty (`PENALTY_GRID`);
- ``procrustes``: orthogonal Procrustes (with scale) after standardising every coordinate;
- ``anchors``: the anchor path (source projector, then the target's inverse), when given, as
  labelled variants (the inverse's ridge);
- ``shrunk``: least squares shrunk toward the anchor path, ``min ||Xs W - Xt||^2 + a ||W -
  W_prior||^2`` (both centred): ``a -> 0`` is the pairwise map, ``a -> inf`` the prior's weight
  with the bias refitted;
- ``low_rank``: reduced-rank regression, the ridge map projected on the top ``r`` principal
  directions of its fitted values (not a default: it has not yet been measured on the real
  group, docs/migration.md; name it in ``candidates`` to consider it).

Add one with `register_migration_candidate` (PEFT's ``register_peft_method`` shape): a
`MigrationCandidate` whose ``fit`` gives the path of ``(setting, map)`` on given rows. Every
solve runs in float64 on the rows' device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from relrep_hf.functional.least_squares import AffineMap, fit_affine, fit_procrustes
from relrep_hf.utils.registry import Registry

__all__ = [
    "CANDIDATES",
    "MIGRATION_CANDIDATES",
    "MigrationCandidate",
    "default_candidates",
    "fit_least_squares",
    "fit_standardised_procrustes",
    "register_migration_candidate",
    "unregister_migration_candidate",
]

PENALTY_GRID = tuple(10.0**e for e in range(-4, 4))  # times the mean eigenvalue of X^T X
RANKS = (8, 16, 32, 64, 128, 256)  # low_rank's ranks (those below the new encoder's width)

Priors = dict[str, AffineMap] | None
# (old rows [n, d_s], new rows [n, d_t], the prior's variants or None) -> [(setting, map)]
CandidateFit = Callable[[Tensor, Tensor, Priors], list[tuple[dict[str, Any], AffineMap]]]


@dataclass(frozen=True)
class MigrationCandidate:
    """One candidate map: ``fit(old, new, priors)`` gives ``[(setting, AffineMap)]`` (float64,
    on the rows' device), the same settings in the same order whatever the rows; ``needs_prior``:
    only fitted when the anchor path is given; ``default``: considered when the caller names no
    candidates (a candidate that lost on the benchmark is registered with ``default=False``)."""

    name: str
    fit: CandidateFit
    needs_prior: bool = False
    default: bool = True
    help: str = ""


MIGRATION_CANDIDATES: Registry[MigrationCandidate] = Registry("migration candidate")


def register_migration_candidate(candidate: MigrationCandidate) -> MigrationCandidate:
    """Add a candidate to `MIGRATION_CANDIDATES` (a ValueError if its name is taken)."""
    if not isinstance(candidate, MigrationCandidate):
        raise ValueError(
            f"register_migration_candidate takes a MigrationCandidate, got "
            f"{type(candidate).__name__}."
        )
    return MIGRATION_CANDIDATES.register(candidate)


def unregister_migration_candidate(name: str) -> MigrationCandidate:
    """Take the candidate ``name`` out of `MIGRATION_CANDIDATES` (a ValueError listing the
    registered candidates if there is none of that name) and return it."""
    return MIGRATION_CANDIDATES.unregister(name)


def default_candidates() -> tuple[str, ...]:
    """The registered candidates considered by default, in registration order."""
    return tuple(name for name, c in MIGRATION_CANDIDATES.items() if c.default)


def _float64(m: AffineMap) -> AffineMap:
    return AffineMap(m.weight.double(), m.bias.double())


def _centred(xs: Tensor, xt: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    mu_s, mu_t = xs.mean(dim=0), xt.mean(dim=0)
    return xs - mu_s, xt - mu_t, mu_s, mu_t


def fit_least_squares(xs: Tensor, xt: Tensor) -> AffineMap:
    """Affine least squares in float64, the minimum-norm solution where the rows are too few
    (`fit_affine`'s SVD solve, on any device)."""
    return fit_affine(xs.double(), xt.double())


def fit_standardised_procrustes(source: Tensor, target: Tensor) -> AffineMap:
    """Orthogonal Procrustes (with scale, `fit_procrustes`) between the two spaces with each
    coordinate standardised (z-scored on these rows), composed into one affine map."""
    xs, xt = source.detach().double(), target.detach().double()
    scale_s = xs.std(dim=0).clamp_min(1e-12)  # [d_s]
    scale_t = xt.std(dim=0).clamp_min(1e-12)  # [d_t]
    rotation = _float64(fit_procrustes(xs / scale_s, xt / scale_t))
    weight = rotation.weight * (1.0 / scale_s)[:, None] * scale_t  # diag(1/s_s) R diag(s_t)
    composite = AffineMap(weight, rotation.bias * scale_t)
    dtype = torch.promote_types(source.dtype, target.dtype)
    return AffineMap(composite.weight.to(dtype), composite.bias.to(dtype))


# `shared_solves`' decompositions: {(id(xs), id(xt)): (xs, xt, versions, decomposition)}
_SHARED: ContextVar[dict | None] = ContextVar("relrep_hf_shared_solves", default=None)


@contextlib.contextmanager
def shared_solves() -> Iterator[None]:
    """Inside the block, the candidates fitted on the same row tensors (the same objects,
    unchanged) share `penalised_path`'s eigendecomposition: ridge, shrunk and low_rank each
    made it, on every fold. The same operations on the same rows: the same maps, bit for bit.
    `relrep_hf.migration.selection` opens one per fold and one for the final fit."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _gram_eigenbasis(xs: Tensor, xt: Tensor) -> tuple[Tensor, ...]:
    """``(mu_s, mu_t, eigenvalues, eigenvectors, cross)`` of the centred rows: the
    eigendecomposition of ``Xs^T Xs`` (eigenvalues clamped at 0) and ``V^T Xs^T Xt``, made once
    per pair of row tensors inside `shared_solves`."""
    cache = _SHARED.get()
    versions = (xs._version, xt._version)  # a tensor changed in place is decomposed again
    hit = None if cache is None else cache.get((id(xs), id(xt)))
    if hit is not None and hit[0] is xs and hit[1] is xt and hit[2] == versions:
        return hit[3]
    centred_s, centred_t, mu_s, mu_t = _centred(xs, xt)
    eigenvalues, eigenvectors = torch.linalg.eigh(centred_s.T @ centred_s)  # [d_s], [d_s, d_s]
    eigenvalues = eigenvalues.clamp_min(0.0)
    cross = eigenvectors.T @ (centred_s.T @ centred_t)  # [d_s, d_t], in the eigenbasis
    decomposition = (mu_s, mu_t, eigenvalues, eigenvectors, cross)
    if cache is not None:  # the rows held too: their ids cannot be reused while cached
        cache[id(xs), id(xt)] = (xs, xt, versions, decomposition)
    return decomposition


def penalised_path(
    xs: Tensor, xt: Tensor, priors: Priors, grid: list[tuple[float, str | None]]
) -> list[tuple[Tensor, Tensor]]:
    """``[(weight, bias)]`` of ``min ||Xs W + b - Xt||^2 + a ||W - W_prior||^2`` for each
    ``(a, label)`` of ``grid`` (``label`` None: no prior, ridge), ``a`` relative to the mean
    eigenvalue of the centred Gram matrix (one eigendecomposition for the whole grid, shared
    by the candidates inside `shared_solves`)."""
    mu_s, mu_t, eigenvalues, eigenvectors, cross = _gram_eigenbasis(xs, xt)
    scale = eigenvalues.mean().clamp_min(1e-300)
    in_basis = {k: eigenvectors.T @ m.weight.double() for k, m in (priors or {}).items()}
    out = []
    for penalty, label in grid:
        a = penalty * scale
        rhs = cross if label is None else cross + a * in_basis[label]
        weight = eigenvectors @ (rhs / (eigenvalues + a)[:, None])  # [d_s, d_t]
        out.append((weight, mu_t - mu_s @ weight))
    return out


def _as_path(grid: list[tuple], keys: tuple[str, ...], pairs: list) -> list:
    settings = [{k: v for k, v in zip(keys, g, strict=True) if v is not None} for g in grid]
    return [(s, AffineMap(w, b)) for s, (w, b) in zip(settings, pairs, strict=True)]


def _affine(xs: Tensor, xt: Tensor, priors: Priors) -> list:
    return [({}, fit_least_squares(xs, xt))]


def _ridge(xs: Tensor, xt: Tensor, priors: Priors) -> list:
    grid = [(a, None) for a in PENALTY_GRID]
    return _as_path(grid, ("penalty", "prior"), penalised_path(xs, xt, None, grid))


def _procrustes(xs: Tensor, xt: Tensor, priors: Priors) -> list:
    return [({}, fit_standardised_procrustes(xs, xt))]


def _anchors(xs: Tensor, xt: Tensor, priors: Priors) -> list:
    return [({"prior": label}, m) for label, m in (priors or {}).items()]


def _shrunk(xs: Tensor, xt: Tensor, priors: Priors) -> list:
    grid = [(a, label) for label in priors or {} for a in PENALTY_GRID]
    return _as_path(grid, ("penalty", "prior"), penalised_path(xs, xt, priors, grid))


def _low_rank(xs: Tensor, xt: Tensor, priors: Priors) -> list:
    """Reduced-rank regression: each ridge map ``W`` projected as ``W V_r V_r^T``, ``V_r`` the
    top ``r`` right singular vectors of the fitted values ``(Xs - mu_s) W``."""
    d_t = xt.shape[1]
    ranks = [r for r in RANKS if r < d_t] or [max(1, d_t - 1)]
    centred_s, _, mu_s, mu_t = _centred(xs, xt)
    out = []
    for setting, ridge in _ridge(xs, xt, None):
        _, _, vh = torch.linalg.svd(centred_s @ ridge.weight, full_matrices=False)  # [., d_t]
        for r in ranks:
            weight = ridge.weight @ vh[:r].T @ vh[:r]  # [d_s, d_t] of rank r
            out.append((setting | {"rank": r}, AffineMap(weight, mu_t - mu_s @ weight)))
    return out


for _candidate in (
    MigrationCandidate("affine", _affine, help="affine least squares"),
    MigrationCandidate("ridge", _ridge, help="affine least squares with a ridge penalty"),
    MigrationCandidate(
        "procrustes", _procrustes, help="orthogonal Procrustes after standardisation"
    ),
    MigrationCandidate("anchors", _anchors, needs_prior=True, help="the anchor path"),
    MigrationCandidate(
        "shrunk", _shrunk, needs_prior=True, help="least squares shrunk toward the anchor path"
    ),
    MigrationCandidate(
        "low_rank", _low_rank, default=False, help="reduced-rank regression on the ridge path"
    ),
):
    register_migration_candidate(_candidate)

CANDIDATES = default_candidates()  # the built-in defaults (the registry may hold more)
