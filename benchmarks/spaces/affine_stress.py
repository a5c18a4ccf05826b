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

from collections.abc import Sequence
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


def mlp(sizes: Sequence[int]) -> nn.Sequential:
    """Linear layers through ``sizes``, a ReLU between each two."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class AnisotropicAutoencoder(nn.Module):
    """MLP autoencoder whose latent code is stretched by a fixed, permuted anisotropic scale
    (scales from 10^-anisotropy to 10^anisotropy; the paper's Appendix E.3, also
    ``scripts.anisotropic_autoencoders``). ``sizes`` run from the input to the latent code, the
    decoder back; ``squash``: a sigmoid on the output (pixels in [0, 1])."""

    def __init__(
        self,
        sizes: Sequence[int],
        anisotropy: float,
        generator: torch.Generator,
        *,
        squash: bool = False,
    ):
        super().__init__()
        latent_dim = sizes[-1]
        scale = torch.logspace(-anisotropy, anisotropy, latent_dim)
        self.register_buffer("scale", scale[torch.randperm(latent_dim, generator=generator)])
        self.encoder = mlp(sizes)
        decoder = mlp(sizes[::-1])
        self.decoder = nn.Sequential(decoder, nn.Sigmoid()) if squash else decoder

    def encode(self, x: Tensor) -> Tensor:
        return self.encoder(x) * self.scale  # [N, latent_dim], anisotropic by construction

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.encode(x))


def fit_reconstruction(
    model: nn.Module,
    inputs: Tensor,
    targets: Tensor,
    *,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    learning_rate: float = 1e-3,
) -> nn.Module:
    """Adam on the MSE of ``model(inputs)`` to ``targets``, batches shuffled by ``generator``;
    the model returned in eval mode."""
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(inputs), generator=generator)
        for start in range(0, len(inputs), batch_size):
            batch = order[start : start + batch_size]
            loss = nn.functional.mse_loss(model(inputs[batch]), targets[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


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
        sizes = [inputs.shape[1], config.hidden, config.latent_dim]
        model = AnisotropicAutoencoder(sizes, config.anisotropy, generator)
        fit_reconstruction(
            model, inputs, inputs, epochs=config.epochs, batch_size=config.batch_size,
            generator=generator, learning_rate=config.learning_rate,
        )  # fmt: skip
        with torch.no_grad():
            latent = model.encode(inputs)
        rotation = torch.linalg.qr(
            torch.randn(config.latent_dim, config.latent_dim, generator=generator)
        )[0]
        spread = latent.std(dim=0).median()
        shift = config.shift * spread * torch.randn(config.latent_dim, generator=generator)
        spaces[f"AE{i + 1}"] = (latent @ rotation + shift).contiguous()
    return spaces
