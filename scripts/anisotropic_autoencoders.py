"""Appendix E.3 (Figure 5): image reconstruction through relative spaces of anisotropic
autoencoders.

Four MLP autoencoders AE1..AE4 are trained with distinct seeds. Inside each encoder the latent
code is multiplied by a fixed anisotropic scale (``logspace(-s, s, latent_dim)``, permuted
differently per autoencoder, so the stretched axes differ between them): the latent clouds are
"cigar-shaped" and unlike one another, the paper's induced stress test. A relative decoder is
trained to reconstruct images from AE1's relative features and is then fed, unchanged, the
relative features of AE4 (zero-shot stitching):

* PARAM-WIP: anchors learned by PARAM (Multi) on AE1, AE2 and AE3, with AE4 held out, and the
  whitened inner product;
* Random-Cos: random support points as anchors and cosine similarity (Moschella et al.).

It prints the test-set reconstruction MSE (per pixel, pixels in [0, 1]) of AE4's own decoder
(the absolute reference), of the two stitched decoders, and of the same decoders on AE1 (no
stitching), as mean ± std over seeds, and saves ``reconstructions.png`` (rows: original,
absolute AE4, PARAM-WIP stitched, Random-Cos stitched) and ``latent_pca.png`` (a 2-D PCA of
AE4's latent space, and its per-dimension spread).

Data: ``--data mnist`` loads ``ylecun/mnist`` from the Hub (28x28, 60k / 10k); the offline
default ``--data digits`` is scikit-learn's bundled ``load_digits`` (8x8, 1,797 images,
80 / 20 split). Both have pixels scaled to [0, 1].

Source of ``ylecun/mnist``, checked against its public dataset card (huggingface.co/datasets/
ylecun/mnist; not reachable from the test machine, where tests/scripts/test_script_data.py runs
`load_images` against a local Hub serving a small dataset of the same layout): one config
``mnist``, parquet files, splits ``train`` (60,000) and ``test`` (10,000), features ``image``
(Image, 28x28 grayscale) and ``label`` (ClassLabel, names "0".."9").

Deviations from the paper: the paper gives no architecture, scaling range or training
schedule; ours are below (latent 64 and 64 anchors as the paper). On the 8x8 digits the 64-d
latent is no bottleneck (64 pixels), so reconstructions are near perfect for every autoencoder:
the experiment then tests only how well the stitched decoders transfer, which is the point.

Usage::

    python -m scripts.anisotropic_autoencoders                 # digits, 3 seeds, 2-3 min on 2 CPU cores
    python -m scripts.anisotropic_autoencoders --data mnist    # the paper's data (Hub)
    python -m scripts.anisotropic_autoencoders --smoke         # seconds
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from benchmarks.spaces.affine_stress import AnisotropicAutoencoder, fit_reconstruction, mlp
from relrep_hf.evaluation import EncoderData, Method, ZeroShotStitching
from relrep_hf.evaluation.plots import new_figure, save
from relrep_hf.functional.markdown_tables import format_table, summarize_seeds
from scripts.common import experiment_parser, param_arguments, parse, write_results

AUTOENCODERS = ("AE1", "AE2", "AE3", "AE4")
DECODER_SOURCE, ZERO_SHOT = "AE1", "AE4"
METHODS = (Method("PARAM-WIP", "held_out"), Method("Random-Cos", "random", "cosine"))
COLUMNS = (
    "Absolute AE4",
    "PARAM-WIP stitched",
    "Random-Cos stitched",
    "PARAM-WIP on AE1",
    "Random-Cos on AE1",
)


@dataclass
class Config:
    """Sizes and schedules; the smoke run shrinks them."""

    latent_dim: int = 64  # paper: latent 64
    num_anchors: int = 64  # paper: 64 anchors
    hidden: int = 256
    anisotropy: float = 1.5  # scales from 10^-1.5 to 10^1.5 across the latent dimensions
    ae_epochs: int = 60
    decoder_epochs: int = 150
    batch_size: int = 128
    param_epochs: int = 95  # Table 5
    max_rows: int | None = None  # cap on the train split (MNIST: all 60k)


SMOKE = Config(
    latent_dim=16,
    num_anchors=16,
    hidden=64,
    ae_epochs=15,
    decoder_epochs=20,
    param_epochs=3,
    max_rows=400,
)


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


def load_images(name: str, max_rows: int | None) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """(train images, train labels, test images, test labels, side) as flat [N, side^2] floats."""
    if name == "mnist":
        import datasets

        mnist = datasets.load_dataset("ylecun/mnist")  # columns: image (PIL 28x28), label

        def arrays(split: str) -> tuple[Tensor, Tensor]:
            rows = mnist[split]
            images = np.stack([np.asarray(image, dtype=np.float32) for image in rows["image"]])
            return torch.from_numpy(images.reshape(len(rows), -1) / 255.0), torch.tensor(
                rows["label"]
            )

        (x_train, y_train), (x_test, y_test), side = arrays("train"), arrays("test"), 28
    else:
        from sklearn.datasets import load_digits

        digits = load_digits()  # 1,797 images, 8x8, pixel values 0..16
        x = torch.from_numpy(digits.data / 16.0).float()
        y = torch.from_numpy(digits.target)
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
        cut = int(0.8 * len(x))
        x_train, y_train = x[order[:cut]], y[order[:cut]]
        x_test, y_test = x[order[cut:]], y[order[cut:]]
        side = 8
    if max_rows is not None:
        x_train, y_train = x_train[:max_rows], y_train[:max_rows]
        x_test, y_test = x_test[: max_rows // 4], y_test[: max_rows // 4]
    return x_train, y_train, x_test, y_test, side


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


def autoencoder(pixels: int, config: Config, seed: int) -> AnisotropicAutoencoder:
    """The paper's image autoencoder: two hidden layers each way, a sigmoid on the pixels."""
    sizes = [pixels, config.hidden, config.hidden // 2, config.latent_dim]
    generator = torch.Generator().manual_seed(seed)
    return AnisotropicAutoencoder(sizes, config.anisotropy, generator, squash=True)


class RelativeDecoder(nn.Module):
    """Relative features [N, m] -> images; a LayerNorm first, as in Moschella et al."""

    def __init__(self, num_anchors: int, pixels: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(num_anchors), mlp([num_anchors, hidden, hidden, pixels]), nn.Sigmoid()
        )

    def forward(self, relative: Tensor) -> Tensor:
        return self.net(relative)


def fit(
    model: nn.Module, inputs: Tensor, targets: Tensor, *, epochs: int, batch_size: int, seed: int
) -> nn.Module:
    """Adam on the reconstruction MSE, batches shuffled from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return fit_reconstruction(
        model, inputs, targets, epochs=epochs, batch_size=batch_size, generator=generator
    )


@torch.no_grad()
def mse(reconstructions: Tensor, images: Tensor) -> float:
    return nn.functional.mse_loss(reconstructions, images).item()


# ---------------------------------------------------------------------------------------------
# One seed
# ---------------------------------------------------------------------------------------------


def run_seed(seed: int, data: tuple, config: Config) -> dict[str, Any]:
    x_train, _, x_test, _, _ = data
    pixels = x_train.shape[1]
    autoencoders = {}
    for i, name in enumerate(AUTOENCODERS):
        torch.manual_seed(1000 * seed + i)  # distinct seeds: distinct latent spaces
        model = autoencoder(pixels, config, seed=1000 * seed + i)
        autoencoders[name] = fit(
            model,
            x_train,
            x_train,
            epochs=config.ae_epochs,
            batch_size=config.batch_size,
            seed=1000 * seed + i,
        )
    with torch.no_grad():
        latents = {n: (ae.encode(x_train), ae.encode(x_test)) for n, ae in autoencoders.items()}

    data = {
        name: EncoderData(train, None, test, None, parallel=train)
        for name, (train, test) in latents.items()
    }
    args = param_arguments(
        num_anchors=config.num_anchors, num_train_epochs=config.param_epochs, seed=seed
    )
    stitching = ZeroShotStitching(data, args=args)  # PARAM fitted without AE4: AE1, AE2, AE3
    with torch.no_grad():
        absolute = autoencoders[ZERO_SHOT](x_test)
    result: dict[str, Any] = {"Absolute AE4": mse(absolute, x_test)}
    reconstructions = {"original": x_test, "absolute AE4": absolute}
    for method in METHODS:
        relative = {
            name: stitching.features(method, name, source=DECODER_SOURCE, target=ZERO_SHOT)
            for name in (DECODER_SOURCE, ZERO_SHOT)
        }
        torch.manual_seed(seed)
        decoder = fit(
            RelativeDecoder(config.num_anchors, pixels, config.hidden),
            relative[DECODER_SOURCE][0],
            x_train,
            epochs=config.decoder_epochs,
            batch_size=config.batch_size,
            seed=seed,
        )
        with torch.no_grad():
            stitched = decoder(relative[ZERO_SHOT][1])
            result[f"{method.name} on AE1"] = mse(decoder(relative[DECODER_SOURCE][1]), x_test)
        result[f"{method.name} stitched"] = mse(stitched, x_test)
        reconstructions[f"{method.name} stitched"] = stitched
    return {"mse": result, "reconstructions": reconstructions, "latent": latents[ZERO_SHOT][1]}


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def reconstruction_grid(rows: dict[str, Tensor], labels: Tensor, side: int, path) -> None:
    """One test image per class (up to 10 columns), one row per reconstruction."""
    columns = [int((labels == c).nonzero()[0]) for c in labels.unique()[:10].tolist()]
    figure = new_figure(1.1 * len(columns), 1.2 * len(rows))
    axes = figure.subplots(len(rows), len(columns), squeeze=False)
    for r, (title, images) in enumerate(rows.items()):
        for c, index in enumerate(columns):
            ax = axes[r, c]
            ax.imshow(images[index].reshape(side, side).numpy(), cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(title, rotation=0, ha="right", va="center", fontsize=8)
    figure.suptitle("Zero-shot reconstruction: decoder trained on AE1, fed AE4", fontsize=9)
    save(figure, path)


def latent_pca(latent: Tensor, labels: Tensor, path) -> None:
    """AE4's latent codes on principal components 1 and 2, and 1 and d/4, on equal axes (the
    induced "cigar-shaped" anisotropy), and the std of every latent dimension (log scale)."""
    centered = latent - latent.mean(dim=0)
    _, singular, v = torch.linalg.svd(centered, full_matrices=False)
    points = centered @ v.T  # [N, latent_dim], principal coordinates
    figure = new_figure(13, 4)
    axes = figure.subplots(1, 3)
    for ax, k in zip(axes[:2], (2, max(3, latent.shape[1] // 4)), strict=True):
        ax.scatter(points[:, 0], points[:, k - 1], c=labels.numpy(), cmap="tab10", s=5)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel("PC 1", fontsize=8)
        ax.set_ylabel(f"PC {k}", fontsize=8)
        ratio = (singular[0] / singular[k - 1]).item()
        ax.set_title(f"AE4 latent: PC 1 vs PC {k} (std ratio {ratio:.1f})", fontsize=9)
    axes[2].bar(range(latent.shape[1]), latent.std(dim=0).sort(descending=True).values.numpy())
    axes[2].set_yscale("log")
    axes[2].set_title("std of each latent dimension (sorted)", fontsize=9)
    save(figure, path)


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = experiment_parser(__doc__, "anisotropic_autoencoders")
    parser.add_argument("--data", choices=("digits", "mnist"), default="digits")
    args = parse(parser, argv, default_seeds=(0, 1, 2))
    config = SMOKE if args.smoke else Config()
    data = load_images(args.data, config.max_rows)
    print(f"{args.data}: {len(data[0])} train / {len(data[2])} test images, {data[4]}x{data[4]}")

    runs = {seed: run_seed(seed, data, config) for seed in args.seeds}
    table = summarize_seeds(
        [[{"Metric": "MSE", **r["mse"]}] for r in runs.values()], ("Metric",), COLUMNS
    )
    print(format_table(table, COLUMNS, keys=("Metric",), scale=1.0, digits=4, group=True))

    first = runs[args.seeds[0]]
    figures = {
        "reconstructions": args.output_dir / "reconstructions.png",
        "latent_pca": args.output_dir / "latent_pca.png",
    }
    reconstruction_grid(first["reconstructions"], data[3], data[4], figures["reconstructions"])
    latent_pca(first["latent"], data[3], figures["latent_pca"])
    results = {
        "experiment": "Appendix E.3: anisotropic autoencoders",
        "data": args.data,
        "config": asdict(config),
        "table": table,
        "per_seed": {seed: r["mse"] for seed, r in runs.items()},
        "figures": figures,
    }
    return write_results(args, results)


if __name__ == "__main__":
    # Small MLPs: one intra-op thread is as fast as several, and much faster when other
    # processes share the cores (OpenMP threads then wait on each other).
    torch.set_num_threads(1)
    main()
