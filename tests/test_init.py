"""`import relrep_hf`: light (no torch), every public name on first use, and the Auto classes
registered whichever of relrep_hf and transformers is imported first. Registration depends on
what was imported before: the light-import case runs in a fresh interpreter of its own; each
registration case in a fresh process forked from one interpreter that has imported torch and
the other packages transformers loads, and nothing of relrep_hf or transformers (the modules
registration watches), so their import is paid once for all of them."""

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
from tests.fixtures import child_env
from tests.fixtures.forked import WarmInterpreter


def run_python(code: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    return checked(result.returncode, result.stdout, result.stderr)


def checked(returncode: int, stdout: str, stderr: str) -> list[str]:
    """The lines a case printed, once it exited 0 and warned of no failed registration."""
    assert returncode == 0, stderr[-4000:]
    assert "could not register" not in stderr, stderr[-4000:]
    return stdout.strip().splitlines()


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
    the package's __init__ first: lazy, it loads no torch (about 10 CPU-s a process); nor does
    an encoder actor's device for a kind that reads none (`EncoderKind.uses_device`)."""
    modules = ["stores", "ray_shards", "ray_engine", "ray_lance", "ray_reembed", "ray_onboarding"]
    loaded = run_python(
        f"import sys\nfor m in {modules!r}: __import__('relrep_hf.migration.' + m)\n"
        "from relrep_hf.encoding import parse_encoder\n"
        "from relrep_hf.migration.ray_engine import actor_device\n"
        "print(actor_device(parse_encoder('py:tests.fixtures.killable_reembed:letters')[0]))\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    assert loaded == ["None", "[]"]


def test_a_reembed_with_a_callable_encoder_loads_neither_torch_nor_transformers(tmp_path):
    """A re-embed child or Ray actor whose encoder is a Python callable (the re-embed tests'
    `letters`) writes the store's new vectors without torch: 12.8 -> 2.8 CPU-s a process."""
    code = (
        "import sys\nfrom pathlib import Path\nimport numpy as np, pyarrow as pa, pyarrow.parquet as pq\n"
        "from relrep_hf import reembed_store\n"
        f"folder = Path({str(tmp_path)!r})\n"
        "vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(14, np.float32)), 2)\n"
        "rows = {'id': list(range(7)), 'text': [f'note {i} tea' for i in range(7)], 'embedding': vectors}\n"
        "pq.write_table(pa.table(rows), folder / 'old.parquet')\n"
        "spec = 'py:tests.fixtures.killable_reembed:letters'\n"
        "reembed_store(folder / 'old.parquet', spec, folder / 'new.parquet', show_progress=False)\n"
        "print(pq.read_table(folder / 'new.parquet').num_rows)\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    assert run_python(code) == ["7", "[]"]


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


ORDERS = [
    ("import relrep_hf", ""),  # relrep_hf first: registered when transformers' auto loads
    ("from transformers import AutoModel", "import relrep_hf"),  # transformers first: at once
    ("from transformers import AutoConfig", "import relrep_hf"),  # configs now, models later
    ("import relrep_hf", "from transformers import BertModel"),  # auto loaded mid-import
    ("import relrep_hf.models.modeling_relative_projector", ""),  # a submodule, no package name
    ("import relrep_hf.models.anchor_set", ""),
]
WATCHED = (
    "import sys\nprint([m for m in sys.modules if m.startswith(('relrep_hf', 'transformers'))])"
)
IMPORT_HOOK = (
    "import sys, relrep_hf\n"
    "print(any(type(f).__module__ == 'relrep_hf.pipeline.auto_registration' for f in sys.meta_path))\n"
    "from transformers import AutoModel\n"
    "print(any(type(f).__module__ == 'relrep_hf.pipeline.auto_registration' for f in sys.meta_path))\n"
)


@pytest.fixture(scope="module")
def forked_cases(saved) -> list[list[str]]:
    """Every registration case (each import order loading the saved artifacts, then the import
    hook's case) run once, each in its own forked process: [exit status, stdout, stderr] each."""
    codes = [
        f"{before}\n{after}\n"
        + LOAD.format(projector=str(saved / "projector"), head=str(saved / "head"))
        for before, after in ORDERS
    ]
    with WarmInterpreter(env=child_env()) as warm:
        # the children start with torch and the like imported, nothing registration watches
        assert checked(*warm.run(WATCHED)) == ["[]"]
        return [list(warm.run(code, timeout=300)) for code in [*codes, IMPORT_HOOK]]


@pytest.mark.slow
@pytest.mark.parametrize("order", range(len(ORDERS)), ids=lambda i: " / ".join(ORDERS[i]))
def test_auto_classes_load_the_saved_artifacts(forked_cases, order):
    assert checked(*forked_cases[order]) == EXPECTED


@pytest.mark.slow
def test_registration_leaves_the_import_system_as_it_was(forked_cases):
    found = checked(*forked_cases[-1])
    assert found == ["True", "False"]  # the import hook is gone once both registrations ran


def test_every_public_name_resolves():
    assert set(relrep_hf.__all__) == set(relrep_hf._LAZY)
    for name in relrep_hf.__all__:
        assert getattr(relrep_hf, name) is not None, name
    assert set(relrep_hf.__all__) <= set(dir(relrep_hf))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        relrep_hf.nothing_here  # noqa: B018
