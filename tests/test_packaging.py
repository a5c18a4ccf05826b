"""The wheel users install holds the whole package: every module, the card templates and the
bundled data, and it imports and renders a card from its own files (not from this checkout)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_template_and_works_alone(tmp_path):
    source = tmp_path / "source"  # a copy: a build/ folder left in the checkout would leak in
    skip = shutil.ignore_patterns(".*", "build", "*.egg-info", "__pycache__", "tests", "docs")
    shutil.copytree(ROOT, source, ignore=skip)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("relrep_hf-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / "relrep_hf").rglob("*.py")}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "relrep_hf").rglob("*.pyi")}
    expected |= {f"relrep_hf/model_cards/{p.name}" for p in (ROOT / "model_cards").glob("*.md")}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "relrep_hf" / "data").iterdir()}
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)}"
    target = tmp_path / "installed"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    code = (
        "import relrep_hf, relrep_hf.pipeline.steps, relrep_hf.cli\n"
        "from relrep_hf.publishing.cards.templates import template_dir\n"
        "from relrep_hf.publishing.cards.anchor_set_card import anchor_set_card\n"
        "from relrep_hf import AnchorSet\n"
        "card = anchor_set_card(AnchorSet.random(['a', 'b', 'c'], 2))\n"
        "print(relrep_hf.__file__, template_dir(), 'random anchors' in card.text)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    package, templates, rendered = run.stdout.split()
    assert Path(package).is_relative_to(target) and Path(templates).is_relative_to(target)
    assert rendered == "True"


def _requirements_of_every_extra() -> list[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    extras = project["optional-dependencies"].values()
    found = [*project["dependencies"], *(r for extra in extras for r in extra)]
    return sorted({r for r in found if not r.startswith(("relrep-hf", "torch"))})


@pytest.mark.slow
def test_every_extra_installs_from_wheels_alone(tmp_path):
    """pip resolves the dependencies and every extra with ``--only-binary=:all:``: a package
    that builds from source (a C++ compile on a laptop without one) fails this test. The data
    packages installed with --no-deps stay out of the extras.

    What it proves is resolution to wheels alone, so it resolves without installing
    (``--dry-run --report``: no venv, no download of the wheels' contents, no import of what
    would be installed; the other tests import the installed extras). torch's version is read
    from its metadata, not by importing it (a few CPU seconds on a worker that has not). The pip
    is the environment's: the README upgrades it first (Python 3.11's bundled pip 23.2 took 77
    CPU s for this resolution, evaluating 168,560 files' tags; pip 26.2 took 28, the same 149
    packages resolved)."""
    from importlib.metadata import version

    from relrep_hf.utils.defaults import DATA_PACKAGES

    requirements = _requirements_of_every_extra()
    assert not {r.split(">")[0].split("=")[0] for r in requirements} & set(DATA_PACKAGES)
    report = tmp_path / "report.json"
    resolve = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
         "--only-binary=:all:", "--report", str(report),
         f"torch=={version('torch').split('+')[0]}", *requirements],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert resolve.returncode == 0, f"an extra needs a build from source:\n{resolve.stderr[-3000:]}"
    import json

    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert not names & {"llama-cpp-python", "llm", "openai", "uni-curses"}, names
