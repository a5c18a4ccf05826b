"""The paper's anisotropic stress (Appendix E.3), on real sentence embeddings.

Why: the paper stitches autoencoders trained with distinct seeds whose latent codes are
multiplied by a fixed anisotropic scale, permuted differently per autoencoder ("cigar-shaped"
latent clouds unlike one another). Its images (MNIST) cannot be had here, and the bundled
8x8 digits have too few rows for m = 300 anchors, so the autoencoders here compress real
MiniLM sentence embeddings instead (4,192 rows). Each latent code is then rotated and shifted
by a random affine map, as in the paper's Figure 2: the spaces differ by a non-linear part
(seeds), an anisotropic scaling and an affine map.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class StressConfig:
    """Sizes and schedule of the anisotropic autoencoders (latent 64 as the paper)."""

    spaces: int = 4
    latent_dim: int = 64
    hidden: int = 256
    anisotropy: float = 1.5  # latent scales from 10^-1.5 to 10^1.5, permuted per autoencoder
    shift: float = 10.0  # std of the random shift, in units of the latent's median std
    epochs: int = 40
    batch_size: int = 128
    learning_rate: float = 1e-3


QUICK_STRESS = StressConfig(latent_dim=32, hidden=64, epochs=15)


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class AnisotropicAutoencoder(nn.Module):
    """MLP autoencoder whose latent code is stretched by a fixed, permuted anisotropic scale."""

    def __init__(self, dim: int, config: StressConfig, generator: torch.Generator):
        super().__init__()
        scale = torch.logspace(-config.anisotropy, config.anisotropy, config.latent_dim)
        permutation = torch.randperm(config.latent_dim, generator=generator)
        self.register_buffer("scale", scale[permutation])
        self.encoder = _mlp([dim, config.hidden, config.latent_dim])
        self.decoder = _mlp([config.latent_dim, config.hidden, dim])

    def encode(self, x: Tensor) -> Tensor:
        return self.encoder(x) * self.scale  # [N, latent_dim], anisotropic by construction

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.encode(x))


def anisotropic_spaces(
    base: Tensor, config: StressConfig = StressConfig(), *, seed: int = 0
) -> dict[str, Tensor]:
    """``{"AE1": [N, latent_dim], ...}``: each an anisotropic autoencoder's latent code of
    ``base`` (trained with its own seed), rotated and shifted by its own random affine map."""
    inputs = (base - base.mean(dim=0)) / base.std(dim=0).clamp_min(1e-6)  # [N, d], standardized
    spaces = {}
    for i in range(config.spaces):
        generator = torch.Generator().manual_seed(1000 * seed + i)
        torch.manual_seed(1000 * seed + i)
        model = AnisotropicAutoencoder(inputs.shape[1], config, generator)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
        model.train()
        for _ in range(config.epochs):
            order = torch.randperm(len(inputs), generator=generator)
            for start in range(0, len(inputs), config.batch_size):
                batch = inputs[order[start : start + config.batch_size]]
                loss = nn.functional.mse_loss(model(batch), batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            latent = model.eval().encode(inputs)
        rotation = torch.linalg.qr(
            torch.randn(config.latent_dim, config.latent_dim, generator=generator)
        )[0]
        spread = latent.std(dim=0).median()
        shift = config.shift * spread * torch.randn(config.latent_dim, generator=generator)
        spaces[f"AE{i + 1}"] = (latent @ rotation + shift).contiguous()
    return spaces
