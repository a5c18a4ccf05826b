"""`import relrep_hf`: light (no torch), every public name on first use, and the Auto classes
registered whichever of relrep_hf and transformers is imported first. Each case runs in a fresh
interpreter, since registration depends on what was imported before."""

import subprocess
import sys

import pytest
import torch

import relrep_hf
from relrep_hf import (
    RelativeHeadConfig,
    RelativeHeadForClassification,
    RelativeProjector,
    Statistics,
)


def run_python(code: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "could not register" not in result.stderr, result.stderr[-4000:]
    return result.stdout.strip().splitlines()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("artifacts")
    data = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    RelativeProjector.from_statistics(data[:8], Statistics.from_embeddings(data)).save_pretrained(
        folder / "projector"
    )
    head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=8, num_labels=3))
    head.save_pretrained(folder / "head")
    return folder


def test_import_loads_neither_torch_nor_transformers():
    loaded = run_python(
        "import sys, relrep_hf\n"
        "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))"
    )
    assert loaded == ["[]"]


def test_the_migration_modules_a_ray_worker_imports_load_neither_torch_nor_transformers():
    """A Ray worker, actor or child driver that imports one module of relrep_hf.migration runs
    the package's __init__ first: lazy, it loads no torch (about 10 CPU-s a process)."""
    modules = ["stores", "ray_shards", "ray_engine", "ray_lance", "ray_reembed", "ray_onboarding"]
    loaded = run_python(
        f"import sys\nfor m in {modules!r}: __import__('relrep_hf.migration.' + m)\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    assert loaded == ["[]"]


LOAD = (
    "from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification\n"
    "print(type(AutoModel.from_pretrained({projector!r})).__name__)\n"
    "print(type(AutoModelForSequenceClassification.from_pretrained({head!r})).__name__)\n"
    "print(type(AutoModel.from_pretrained({head!r})).__name__)\n"
    "print(type(AutoConfig.from_pretrained({projector!r})).__name__)\n"
)
EXPECTED = [
    "RelativeProjector",
    "RelativeHeadForClassification",
    "RelativeHeadForClassification",
    "RelativeProjectorConfig",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "before, after",
    [
        ("import relrep_hf", ""),  # relrep_hf first: registered when transformers' auto loads
        ("from transformers import AutoModel", "import relrep_hf"),  # transformers first: at once
        ("from transformers import AutoConfig", "import relrep_hf"),  # configs now, models later
        ("import relrep_hf", "from transformers import BertModel"),  # auto loaded mid-import
        ("import relrep_hf.models.modeling_relative_projector", ""),  # a submodule, no package name
        ("import relrep_hf.models.anchor_set", ""),
    ],
)
def test_auto_classes_load_the_saved_artifacts(saved, before, after):
    code = f"{before}\n{after}\n" + LOAD.format(
        projector=str(saved / "projector"), head=str(saved / "head")
    )
    assert run_python(code) == EXPECTED


@pytest.mark.slow
def test_registration_leaves_the_import_system_as_it_was():
    found = run_python(
        "import sys, relrep_hf\n"
        "print(any(type(f).__module__ == 'relrep_hf.pipeline.auto_registration' for f in sys.meta_path))\n"
        "from transformers import AutoModel\n"
        "print(any(type(f).__module__ == 'relrep_hf.pipeline.auto_registration' for f in sys.meta_path))\n"
    )
    assert found == ["True", "False"]  # the import hook is gone once both registrations ran


def test_every_public_name_resolves():
    assert set(relrep_hf.__all__) == set(relrep_hf._LAZY)
    for name in relrep_hf.__all__:
        assert getattr(relrep_hf, name) is not None, name
    assert set(relrep_hf.__all__) <= set(dir(relrep_hf))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        relrep_hf.nothing_here  # noqa: B018
