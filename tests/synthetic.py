"""Synthetic parallel spaces: one clustered latent seen through different affine maps."""

import torch


def affine_spaces(
    names=("e0", "e1", "e2", "e3"),
    *,
    n: int = 3000,
    d: int = 16,
    anisotropy: float = 0.3,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """Each space is ``latent @ (Q1 S Q2) + c`` with random rotations Q, an anisotropic scaling
    S (std ratio 10^(2 * anisotropy)) and a large random shift c (the paper's Fig. 2 / E.3)."""
    generator = torch.Generator().manual_seed(seed)
    centers = 2 * torch.randn(20, d, generator=generator)
    latent = centers[torch.randint(20, (n,), generator=generator)] + torch.randn(
        n, d, generator=generator
    )
    spaces = {}
    for i, name in enumerate(names):
        g = torch.Generator().manual_seed(1000 + i)
        q1 = torch.linalg.qr(torch.randn(d, d, generator=g))[0]
        q2 = torch.linalg.qr(torch.randn(d, d, generator=g))[0]
        scale = torch.logspace(-anisotropy, anisotropy, d)[torch.randperm(d, generator=g)]
        spaces[name] = latent @ (q1 @ torch.diag(scale) @ q2) + 10 * torch.randn(d, generator=g)
    return spaces
