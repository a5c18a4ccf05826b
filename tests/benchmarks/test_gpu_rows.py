"""The GPU script of issue #48 (benchmarks/device_checks.sh and benchmarks/perf/gpu_rows.py) on
this machine's CPU: its Python parts run at toy sizes (``--device cpu --tiny``), its table
says which rows are measured, and without CUDA both the part and the script stop with one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from benchmarks.perf import gpu_rows

REPO = Path(__file__).resolve().parents[2]
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")


@pytest.mark.slow
def test_every_part_runs_at_toy_sizes_on_the_cpu(tmp_path, capsys):
    rows = tmp_path / "rows.json"
    for part in ("projector", "wrapper", "extraction", "demo"):
        assert gpu_rows.main([part, "--device", "cpu", "--tiny", "--json", str(rows)]) == 0
    written = json.loads(rows.read_text())
    names = [row["row"] for row in written]
    expected = [name for name, _ in gpu_rows.EXPECTED]
    assert sorted(names) == sorted(expected[:-1])  # every row but the demo's (not under --tiny)
    for row in written:
        assert row["status"] == gpu_rows.SMOKE  # a toy run is never a measurement
        assert row["ours"] > 0 and row["baseline"] > 0
    differences = {row["row"]: row.get("max_abs_difference") for row in written}
    assert differences["RelativeWrapper.encode, all-MiniLM-L6-v2"] < 1e-3  # the same features
    assert all(differences[n] < 1e-4 for n in names if n.startswith("extraction"))
    capsys.readouterr()
    assert gpu_rows.main(["table", "--json", str(rows)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 + len(gpu_rows.EXPECTED)
    assert table[-1].startswith("| relrep-hf demo --quick | not measured |")
    assert "| projector forward, 8 rows, per call | smoke run" in "\n".join(table)


def test_the_table_of_nothing_says_not_measured(tmp_path, capsys):
    assert gpu_rows.main(["table", "--json", str(tmp_path / "none.json")]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]
    assert len(lines) == len(gpu_rows.EXPECTED)
    assert all(" | not measured | " in line for line in lines)


@no_cuda
def test_without_cuda_a_part_says_so_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_rows.main(["projector", "--json", str(tmp_path / "rows.json")])
    assert stop.value.code == 2
    assert capsys.readouterr().out.startswith("gpu_rows: no CUDA device here")
    assert not (tmp_path / "rows.json").exists()
    with pytest.raises(SystemExit):  # off the GPU only the smoke run
        gpu_rows.main(["projector", "--device", "cpu", "--json", str(tmp_path / "rows.json")])


@no_cuda
@pytest.mark.slow
def test_without_cuda_the_script_stops_with_one_line(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHONPATH": str(REPO)}
    script = subprocess.run(["bash", "benchmarks/device_checks.sh"], cwd=REPO, env=env,
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert script.returncode == 2
    assert script.stdout.splitlines() == [
        "device_checks: no CUDA device here (torch.cuda.is_available() is False); nothing was run."
    ]
    assert not list((tmp_path / "out").iterdir())  # nothing ran
