"""Table 1: zero-shot stitching between CNN and Transformer image encoders on CIFAR-100 (coarse).

Data: ``uoft-cs/cifar100`` from the Hub, the 20 superclasses (``coarse_label``); the 50,000
train images are the parallel set (every encoder sees the same images), the 10,000 test images
are evaluated. Encoders (the paper's four, as in Moschella et al.), timm checkpoints loaded
through transformers' ``TimmWrapperModel`` (``AutoModel`` / ``AutoImageProcessor``; needs
``pip install timm``), each image embedded as the model's pre-logits features (timm's
``forward_head`` with the classifier removed: the final [CLS] token for the ViTs, global average
pooling for RexNet):

=======  ==================================================
name     Hub id
=======  ==================================================
ViT-S    timm/vit_small_patch16_224.augreg_in21k_ft_in1k
RexNet   timm/rexnet_100.nav_in1k
ViT-B    timm/vit_base_patch16_224.augreg_in21k_ft_in1k
ViT-R50  timm/vit_base_r50_s16_384.orig_in21k_ft_in1k
=======  ==================================================

Protocol (Algorithm 1, 300 anchors, Table 5 hyperparameters): for every test encoder t, a
linear head is trained on each encoder s's relative features of the train images and evaluated
unchanged on t's relative features of the test images. Columns: "Abs." (a head on t's own
absolute embeddings, diagonal only), Random-Cos (random support images as anchors, cosine),
PARAM Multi (PARAM trained on every encoder but t, WIP) and PARAM Single (PARAM trained on s
alone with the single-space losses, WIP). Weighted F1 in %, mean ± std over seeds (paper: 6),
in the layout of Table 1; ``f1_heatmaps.png`` shows the matrices. The support set is 10,000
train images (Appendix C: gains saturate at 5,000-10,000); ``--support-size`` changes it.

Sources, checked against the public Hub pages (none reachable from the test machine; the test
suite runs `load_cifar100` against a local Hub serving a small dataset of the same layout,
tests/scripts/test_script_data.py):

* ``uoft-cs/cifar100``: dataset card (huggingface.co/datasets/uoft-cs/cifar100, README.md and
  dataset_infos.json): one config ``cifar100``, splits ``train`` (50,000) and ``test``
  (10,000), features ``img`` (Image, 32x32 RGB), ``fine_label`` (ClassLabel, 100 names) and
  ``coarse_label`` (ClassLabel, 20 names); parquet files.
* ``timm/vit_base_r50_s16_384.orig_in21k_ft_in1k`` and
  ``timm/vit_base_patch16_224.augreg_in21k_ft_in1k``: their Hub file lists (config.json,
  model.safetensors); ``timm/rexnet_100.nav_in1k``: its model card (4.8 M parameters, 224 x 224).
  ``timm/vit_small_patch16_224.augreg_in21k_ft_in1k`` is timm's default pretrained tag of
  ``vit_small_patch16_224``; its Hub page was not among the pages checked.

Deviations: the paper does not describe its classifier; ours is the library's linear head
(LayerNorm + Linear, `relrep_hf.evaluation.stitching_steps.train_classifier`), trained ``--head-epochs`` epochs.

``--smoke`` replaces the encoders by tiny random-weight models built from configs (three ViTs
read through their final [CLS] token, one ResNet through its pooled output, standing in for
RexNet) and CIFAR by 32x32 synthetic images of four pattern classes: it exercises the whole path
offline; its numbers mean nothing.

Usage::

    python -m scripts.vision_stitching                  # the paper's setting (Hub, GPU advised)
    python -m scripts.vision_stitching --smoke --seeds 0 1
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from relrep_hf.encoding import encode_in_order
from relrep_hf.encoding.pooling import pool_model_output
from relrep_hf.evaluation import EncoderData
from scripts.common import experiment_parser, parse, stitching_experiment

CIFAR100 = "uoft-cs/cifar100"  # one config ("cifar100"), splits train and test
ENCODERS = {
    "ViT-S": "timm/vit_small_patch16_224.augreg_in21k_ft_in1k",
    "RexNet": "timm/rexnet_100.nav_in1k",
    "ViT-B": "timm/vit_base_patch16_224.augreg_in21k_ft_in1k",
    "ViT-R50": "timm/vit_base_r50_s16_384.orig_in21k_ft_in1k",
}


def pooled_features(model: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
    """What the model's own classifier reads: ``pooler_output`` ([B, d], or [B, C, 1, 1] for
    transformers' CNNs), flattened to [B, d]."""
    return model(pixel_values=batch["pixel_values"]).pooler_output.flatten(1)


def cls_features(model: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
    """The final-layer [CLS] token of a transformers ViT (after its final LayerNorm)."""
    return pool_model_output(model, batch, "cls")


def embed_images(
    model: nn.Module,
    processor: Any,
    images: list,
    features: Callable[[nn.Module, Mapping[str, Tensor]], Tensor],
    *,
    batch_size: int = 128,
) -> Tensor:
    """[N, d] float32 features of PIL ``images``, through the library's encoding loop."""
    (embeddings,), _ = encode_in_order(
        model,
        processor,
        images,
        lambda batch: (features(model, batch),),
        batch_size=batch_size,
        output_device="cpu",
        output_dtype=torch.float32,
    )
    return embeddings


def load_cifar100() -> tuple[Any, dict[str, Tensor]]:
    """CIFAR-100 from the Hub (its train and test splits) and the coarse labels (20
    superclasses) of each split."""
    import datasets

    cifar = datasets.load_dataset(CIFAR100)  # columns: img, fine_label, coarse_label
    labels = {split: torch.tensor(cifar[split]["coarse_label"]) for split in ("train", "test")}
    return cifar, labels


def hub_data(cache_dir: Path, encoders: Mapping[str, str]) -> dict[str, EncoderData]:
    """CIFAR-100 (coarse) embedded by the timm checkpoints; the embeddings are saved in
    ``cache_dir`` and read back by later runs."""
    try:
        import timm  # noqa: F401  (TimmWrapperModel needs it)
    except ImportError:
        raise SystemExit(
            "The paper's vision encoders are timm checkpoints, which transformers loads through "
            "TimmWrapperModel; that needs the timm package: pip install timm"
        ) from None
    from transformers import AutoImageProcessor, AutoModel

    cifar, labels = load_cifar100()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = {}
    for name, model_id in encoders.items():
        paths = {
            split: cache_dir / f"{model_id.replace('/', '--')}-cifar100-{split}.safetensors"
            for split in ("train", "test")
        }
        if all(path.is_file() for path in paths.values()):
            embedded = {split: load_file(path)["embeddings"] for split, path in paths.items()}
        else:
            print(f"embedding CIFAR-100 with {model_id}")
            model = AutoModel.from_pretrained(model_id).to(device).eval()
            processor = AutoImageProcessor.from_pretrained(model_id)
            embedded = {}
            for split, path in paths.items():
                embedded[split] = embed_images(
                    model, processor, cifar[split]["img"], pooled_features
                )
                path.parent.mkdir(parents=True, exist_ok=True)
                save_file({"embeddings": embedded[split].contiguous()}, path)
        data[name] = EncoderData(
            embedded["train"],
            labels["train"],
            embedded["test"],
            labels["test"],
            parallel=embedded["train"],
        )
    return data


def synthetic_images(n: int, seed: int) -> tuple[list, Tensor]:
    """32x32 RGB images of four classes (horizontal stripes, vertical stripes, a disc, a
    checkerboard) with random colours, frequencies, phases and noise."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32] / 32.0
    images, labels = [], rng.integers(0, 4, size=n)
    for label in labels:
        frequency, phase = rng.uniform(2, 6), rng.uniform(0, 2 * np.pi)
        if label == 0:
            pattern = np.sin(2 * np.pi * frequency * yy + phase) > 0
        elif label == 1:
            pattern = np.sin(2 * np.pi * frequency * xx + phase) > 0
        elif label == 2:
            cy, cx = rng.uniform(0.3, 0.7, size=2)
            pattern = (yy - cy) ** 2 + (xx - cx) ** 2 < rng.uniform(0.04, 0.1)
        else:
            pattern = (np.sin(2 * np.pi * frequency * xx) * np.sin(2 * np.pi * frequency * yy)) > 0
        foreground, background = rng.uniform(0, 1, size=(2, 3))
        pixels = np.where(pattern[..., None], foreground, background)
        pixels = np.clip(pixels + rng.normal(0, 0.1, size=pixels.shape), 0, 1)
        images.append(Image.fromarray((255 * pixels).astype(np.uint8)))
    return images, torch.from_numpy(labels)


def smoke_data() -> dict[str, EncoderData]:
    """Tiny random ViTs and a tiny ResNet on synthetic images."""
    from transformers import AutoModel, ResNetConfig, ViTConfig, ViTImageProcessor

    train_images, train_labels = synthetic_images(320, seed=0)
    test_images, test_labels = synthetic_images(120, seed=1)
    processor = ViTImageProcessor(size={"height": 32, "width": 32})

    def vit(hidden: int, patch: int) -> ViTConfig:
        return ViTConfig(
            image_size=32,
            patch_size=patch,
            hidden_size=hidden,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=2 * hidden,
        )

    encoders = {
        "ViT-S-tiny": (vit(32, 8), cls_features),
        "ResNet-tiny": (
            ResNetConfig(
                embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"
            ),
            pooled_features,
        ),
        "ViT-B-tiny": (vit(48, 8), cls_features),
        "ViT-R50-tiny": (vit(32, 4), cls_features),
    }
    data = {}
    for i, (name, (config, features)) in enumerate(encoders.items()):
        torch.manual_seed(i)
        model = AutoModel.from_config(config).eval()
        train = embed_images(model, processor, train_images, features)
        test = embed_images(model, processor, test_images, features)
        data[name] = EncoderData(train, train_labels, test, test_labels, parallel=train)
    return data


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = experiment_parser(__doc__, "vision_stitching")
    parser.add_argument("--num-anchors", type=int, default=300)
    parser.add_argument("--support-size", type=int, default=10_000)
    parser.add_argument("--head-epochs", type=int, default=20)
    args = parse(parser, argv)
    if args.smoke:
        data = smoke_data()
        overrides = {
            "num_anchors": 24,
            "support_size": 200,
            "num_train_epochs": 4,
            "train_batch_size": 128,
        }
        head_epochs = 10
    else:
        data = hub_data(args.output_dir / "embeddings", ENCODERS)
        overrides = {"num_anchors": args.num_anchors, "support_size": args.support_size}
        head_epochs = args.head_epochs
    print({name: tuple(d.train.shape) for name, d in data.items()})

    return stitching_experiment(
        data,
        args,
        overrides=overrides,
        head_epochs=head_epochs,
        title="CIFAR-100 (coarse): zero-shot weighted F1",
        experiment="Table 1: CIFAR-100 (coarse) zero-shot stitching, weighted F1",
    )


if __name__ == "__main__":
    main()
