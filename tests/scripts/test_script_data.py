"""The paper scripts' real Hub loading code, run against a local Hub that serves small datasets
laid out like the Hub's (same repo ids, config names, splits, features and file layout).

The Hub cannot be reached here, so without this a user with internet would be the first to run
``load_marc``, ``load_parallel`` (multilingual_stitching.py), ``load_cifar100``
(vision_stitching.py) and ``load_images("mnist")`` (anisotropic_autoencoders.py). Each fixture
is written with `datasets` (parquet files under the Hub repo's paths, a README.md whose YAML
``configs`` name them, as the Hub's parquet repos have it) and uploaded to tests/fixtures/hub_server.py;
a client process forked from this one (`fork_client`: pointed at the local Hub as a fresh
interpreter with ``HF_ENDPOINT`` would be, without a fresh interpreter's 10 CPU s of imports)
uploads them, imports the scripts and calls their loaders with their default ids. The sources
of the layouts are in each script's docstring.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

from tests.fixtures.hub_encoders import run_forked_client
from tests.fixtures.hub_server import LocalHub

REPO = Path(__file__).resolve().parents[2]
MARC_LANGUAGES = ("de", "en", "es", "fr", "ja", "zh")
FLORES_CODES = ("eng_Latn", "deu_Latn", "spa_Latn", "fra_Latn", "zho_Hans")
MARC_ROWS = {"train": 40, "validation": 10, "test": 25}
FLORES_ROWS = {"dev": 7, "devtest": 5}
CIFAR_COARSE = [
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables",
    "household_electrical_devices", "household_furniture", "insects", "large_carnivores",
    "large_man-made_outdoor_things", "large_natural_outdoor_scenes",
    "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates", "people",
    "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2",
]  # fmt: skip
IMAGE_ROWS = {"train": 12, "test": 6}


def write_repo(folder: Path, configs: dict[str, dict[str, datasets.Dataset]]) -> Path:
    """``CONFIG/SPLIT-00000-of-00001.parquet`` files and a README.md whose ``configs`` list
    them, as the Hub's parquet conversions lay a dataset out."""
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, dataset in splits.items():
            (folder / config).mkdir(parents=True, exist_ok=True)
            dataset.to_parquet(folder / config / f"{split}-00000-of-00001.parquet")
            lines += [f"  - split: {split}", f"    path: {config}/{split}-*"]
    (folder / "README.md").write_text("\n".join([*lines, "---", ""]))
    return folder


def marc(root: Path) -> Path:
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.Value("int64")})  # fmt: skip
    configs = {
        language: {
            split: datasets.Dataset.from_dict(
                {
                    "text": [f"{language} {split} review {i}" for i in range(n)],
                    "label": [i % 5 for i in range(n)],
                },
                features=features,
            )
            for split, n in MARC_ROWS.items()
        }
        for language in MARC_LANGUAGES
    }
    return write_repo(root / "marc", configs)


def flores(root: Path) -> Path:
    int32, string = datasets.Value("int32"), datasets.Value("string")
    features = datasets.Features({"id": int32, "URL": string, "domain": string, "topic": string,
                                  "has_image": int32, "has_hyperlink": int32, "sentence": string})  # fmt: skip
    configs = {}
    for code in FLORES_CODES:
        configs[code] = {}
        for split, n in FLORES_ROWS.items():
            rows = {"id": list(range(1, n + 1)), "URL": ["https://en.wikinews.org/x"] * n,
                    "domain": ["wikinews"] * n, "topic": ["science"] * n, "has_image": [0] * n,
                    "has_hyperlink": [0] * n,
                    "sentence": [f"{code} {split} sentence {i}" for i in range(n)]}  # fmt: skip
            configs[code][split] = datasets.Dataset.from_dict(rows, features=features)
    return write_repo(root / "flores", configs)


def images(count: int, size: int, mode: str, seed: int) -> list[Image.Image]:
    generator = np.random.default_rng(seed)
    shape = (size, size, 3) if mode == "RGB" else (size, size)
    return [Image.fromarray(generator.integers(0, 256, shape, dtype=np.uint8), mode)
            for _ in range(count)]  # fmt: skip


def cifar(root: Path) -> Path:
    features = datasets.Features({
        "img": datasets.Image(),
        "fine_label": datasets.ClassLabel(num_classes=100),
        "coarse_label": datasets.ClassLabel(names=CIFAR_COARSE),
    })  # fmt: skip
    splits = {
        split: datasets.Dataset.from_dict(
            {
                "img": images(n, 32, "RGB", seed),
                "fine_label": [(7 * i) % 100 for i in range(n)],
                "coarse_label": [(3 * i + seed) % 20 for i in range(n)],
            },
            features=features,
        )
        for seed, (split, n) in enumerate(IMAGE_ROWS.items())
    }
    return write_repo(root / "cifar", {"cifar100": splits})


def mnist(root: Path) -> Path:
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=[str(d) for d in range(10)])})  # fmt: skip
    splits = {
        split: datasets.Dataset.from_dict(
            {"image": images(n, 28, "L", seed), "label": [(i + seed) % 10 for i in range(n)]},
            features=features,
        )
        for seed, (split, n) in enumerate(IMAGE_ROWS.items())
    }
    return write_repo(root / "mnist", {"mnist": splits})


CLIENT = r"""
import json, sys
from pathlib import Path
from huggingface_hub import HfApi

fixtures = Path(sys.argv[1])
api = HfApi()
for repo_id, folder in json.loads(sys.argv[2]).items():
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    api.upload_folder(folder_path=str(fixtures / folder), repo_id=repo_id, repo_type="dataset")

from scripts import anisotropic_autoencoders, multilingual_stitching as ml, vision_stitching

out = {}
test = ml.load_marc("de", "test", None)
out["marc_test"] = {"rows": len(test), "labels": list(test["label"]),
                   "texts": list(test["text"])[:3]}
out["marc_train_size"] = len(ml.load_marc("zh", "train", 10))
dataset, split, columns = ml.DEFAULT_PARALLEL
parallel = ml.load_parallel(dataset, split, ml.parse_columns(columns))
out["parallel"] = {language: rows for language, rows in parallel.items()}
cifar, labels = vision_stitching.load_cifar100()
out["cifar"] = {split: {"rows": len(cifar[split]), "size": list(cifar[split][0]["img"].size),
                        "labels": labels[split].tolist()} for split in ("train", "test")}
x_train, y_train, x_test, y_test, side = anisotropic_autoencoders.load_images("mnist", None)
out["mnist"] = {"train": list(x_train.shape), "test": list(x_test.shape), "side": side,
                "max": float(x_train.max()), "labels": y_test.tolist()}
print(json.dumps(out))
"""

REPOS = {
    "mteb/AmazonReviewsClassification": "marc",
    "facebook/flores": "flores",
    "uoft-cs/cifar100": "cifar",
    "ylecun/mnist": "mnist",
}


@pytest.mark.slow
def test_script_loaders_against_hub_layout_fixtures(tmp_path):
    fixtures = tmp_path / "fixtures"
    for build in (marc, flores, cifar, mnist):
        build(fixtures)
    orgs = {repo_id.split("/")[0]: ["tester"] for repo_id in REPOS}
    # the scripts (torch, transformers, datasets) imported here: the forked client has them
    from scripts import anisotropic_autoencoders, multilingual_stitching, vision_stitching  # noqa: F401

    with LocalHub(orgs=orgs) as hub:
        args = [str(fixtures), json.dumps(REPOS)]
        stdout = run_forked_client(hub, CLIENT, *args, home=tmp_path / "client", timeout=600)
        served = {path for method, path, status in hub.requests if status == 200}
    out = json.loads(stdout.strip().splitlines()[-1])
    # the client's datasets cache is its own (HF_HOME), not this process's
    assert any((tmp_path / "client" / "hf_home" / "datasets").rglob("*.arrow"))
    # the loaders really went to the Hub repos by id (parquet files of the configs asked for)
    for path in ("de/test-00000-of-00001.parquet", "eng_Latn/devtest-00000-of-00001.parquet",
                 "cifar100/train-00000-of-00001.parquet", "mnist/test-00000-of-00001.parquet"):  # fmt: skip
        assert any(p.endswith(path) for p in served), path

    # MARC: stars 1-2 -> 0, 4-5 -> 1, 3 stars (label 2) dropped; the fixture's labels cycle 0..4
    stars = [i % 5 for i in range(MARC_ROWS["test"])]
    assert out["marc_test"]["labels"] == [int(s >= 3) for s in stars if s != 2]
    assert out["marc_test"]["texts"] == ["de test review 0", "de test review 1", "de test review 3"]
    assert out["marc_train_size"] == 10
    # FLORES: dev + devtest of every language's config, row i the same sentence everywhere
    languages = {"en": "eng_Latn", "de": "deu_Latn", "es": "spa_Latn", "fr": "fra_Latn",
                 "zh": "zho_Hans"}  # fmt: skip
    for language, code in languages.items():
        assert out["parallel"][language] == [
            f"{code} {split} sentence {i}" for split, n in FLORES_ROWS.items() for i in range(n)
        ]
    # CIFAR-100: both splits, 32x32 images, the coarse labels
    for seed, (split, n) in enumerate(IMAGE_ROWS.items()):
        assert out["cifar"][split] == {"rows": n, "size": [32, 32],
                                       "labels": [(3 * i + seed) % 20 for i in range(n)]}  # fmt: skip
    # MNIST: flat 28x28 images in [0, 1], the test labels
    assert out["mnist"]["train"] == [IMAGE_ROWS["train"], 784]
    assert out["mnist"]["test"] == [IMAGE_ROWS["test"], 784] and out["mnist"]["side"] == 28
    assert 0.9 < out["mnist"]["max"] <= 1.0
    assert out["mnist"]["labels"] == [(i + 1) % 10 for i in range(IMAGE_ROWS["test"])]
