"""The one projection of throughput (`relrep_hf.migration.throughput`) against hand-computed
values, and the dry runs that print it: ``relrep-hf migrate --max-rows`` on a real .npy store
and a saved map (nothing written), as ``relrep-hf reembed --max-rows`` (tests/commands)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relrep_hf.cli import main
from relrep_hf.migration.map import MigrationMap
from relrep_hf.migration.throughput import (
    Throughput,
    dry_run_text,
    format_duration,
    project,
)
from relrep_hf.utils.defaults import DEFAULT_CPU_HOUR_USD, DEFAULT_GPU_HOUR_USD


def test_a_projection_is_rows_over_the_rate_per_worker():
    measured = Throughput("migrate", rows=1000, seconds=2.0, workers=2)
    assert measured.rows_per_second == 500.0 and measured.per_worker == 250.0
    plan = project(measured, 1_000_000, workers=4, hour_usd=0.10)
    # 1e6 rows / 250 rows/s = 4000 worker-seconds = 1.111 worker hours; on 4 workers 1000 s
    assert plan.worker_hours == pytest.approx(4000 / 3600)
    assert plan.seconds == pytest.approx(1000.0)
    assert plan.cost_usd == pytest.approx(4000 / 3600 * 0.10)
    assert "1,000,000 rows: about 16 min 40 s on 4 CPU worker(s)" in str(plan)
    assert "(an assumption)" in str(plan)


def test_the_default_price_is_the_workers_kind():
    cpu = project(Throughput("re-embed", 10, 1.0), 100)
    gpu = project(Throughput("re-embed", 10, 1.0, kind="GPU"), 100)
    assert (cpu.hour_usd, gpu.hour_usd) == (DEFAULT_CPU_HOUR_USD, DEFAULT_GPU_HOUR_USD)
    assert cpu.workers == 1 and gpu.cost_usd == pytest.approx(10 / 3600 * DEFAULT_GPU_HOUR_USD)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(59.4, "0 min 59 s"), (249, "4 min 09 s"), (7500, "2 h 05 min"), (273600, "3 d 04 h")],
)
def test_durations_are_shown_as_a_person_plans(seconds, shown):
    assert format_duration(seconds) == shown


def test_no_rate_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match="no rate to project from"):
        project(Throughput("migrate", 0, 1.0), 10)
    with pytest.raises(ValueError, match="Invalid worker kind 'TPU'"):
        Throughput("migrate", 1, 1.0, kind="TPU")
    with pytest.raises(ValueError, match="hour_usd must be a price >= 0"):
        project(Throughput("migrate", 1, 1.0), 10, hour_usd=-1)
    text = dry_run_text(Throughput("re-embed", 0, 0.0), 50, done="Embedded")
    assert text.endswith("no rate to project the whole store (50 rows) from.")


def test_migrate_max_rows_prints_the_projection_and_writes_nothing(tmp_path, capsys):
    generator = torch.Generator().manual_seed(0)
    MigrationMap(torch.randn(8, 5, generator=generator), torch.zeros(5)).save_pretrained(
        tmp_path / "map"
    )
    np.save(tmp_path / "old.npy", np.ones((300, 8), np.float32))
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = ["migrate", str(tmp_path / "map"), "--vectors", str(tmp_path / "old.npy")]
    assert main([*argv, "--out", str(tmp_path / "new.npy"), "--max-rows", "120"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Migrated 120 rows in ")
    assert "the whole store (300 rows) would take about" in printed
    assert "per CPU hour, an assumption). Nothing was written." in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _documented(error: Exception) -> None:
    """The error's first sentence is the one docs/bad_inputs.md's dry-run section gives."""
    from pathlib import Path

    from tests.test_reliability import first_sentence

    docs = Path(__file__).resolve().parents[2] / "docs" / "bad_inputs.md"
    section = docs.read_text("utf-8").split("## Throughput dry runs")[1]
    assert f"{type(error).__name__}: {first_sentence(str(error))}" in section, str(error)


def test_the_bad_inputs_are_the_documented_ones(tmp_path, capsys):
    np.save(tmp_path / "old.npy", np.ones((3, 8), np.float32))
    argv = ["migrate", "map", "--vectors", str(tmp_path / "old.npy"), "--out", "new.npy"]
    assert main([*argv, "--max-rows", "0"]) == 2
    _documented(ValueError(capsys.readouterr().err.split("error: ", 1)[1].strip()))
    for bad in (
        lambda: Throughput("migrate", 1, 1.0, kind="TPU"),
        lambda: project(Throughput("migrate", 1, 1.0), 10, hour_usd=-1),
    ):
        with pytest.raises(ValueError) as e:
            bad()
        _documented(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.npy"]
