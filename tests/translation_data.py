"""Small float64 spaces and projectors for the least-squares, inverse and translation tests."""

import torch

from relrep_hf.functional.statistics import Statistics
from relrep_hf.models.modeling_relative_projector import RelativeProjector

D = 12
F64 = torch.float64


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def anisotropic(n: int, d: int = D, *, seed: int = 0, shift: float = 1.0) -> torch.Tensor:
    g = generator(seed)
    mixing = torch.randn(d, d, generator=g, dtype=F64)
    return torch.randn(n, d, generator=g, dtype=F64) @ mixing + shift


def orthogonal(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=generator(seed), dtype=F64))
    return q


def make_projector(anchors, stats=None, *, similarity="wip", **kwargs) -> RelativeProjector:
    kwargs.setdefault("dtype", F64)
    return RelativeProjector.from_statistics(anchors, stats, similarity=similarity, **kwargs)


def affine_pair(transform: torch.Tensor, n: int = 400):
    source = anisotropic(n, seed=20)
    shift = torch.randn(transform.shape[1], generator=generator(21), dtype=F64) * 3
    return source, source @ transform + shift


def wip_pair(source, target, m, **kwargs):
    index = torch.arange(m)  # the same rows are the anchors of both spaces
    return (
        make_projector(source[index], Statistics.from_embeddings(source), **kwargs),
        make_projector(target[index], Statistics.from_embeddings(target), **kwargs),
    )
