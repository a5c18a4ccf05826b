"""``relrep-hf reembed`` (issue #46 item 2): a parquet store re-embedded from its text column,
its space recorded; ``--max-rows`` prints the measured rate and the projected time and writes
nothing; rows without text are one clear error naming their ids; ``--resume`` is the way on from
a killed run's committed chunks (the kill itself: tests/migration/test_reembed.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from relrep_hf.cli import main
from relrep_hf.migration import open_store
from tests.fixtures.killable_reembed import SPEC, letters


def write(path, texts):
    old = np.zeros((len(texts), 3), np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(old.reshape(-1)), 3)
    pq.write_table(
        pa.table({"id": list(range(len(texts))), "text": texts, "embedding": column}), path
    )
    return path


TEXTS = [f"row {i} of the store, " + "seen " * i for i in range(12)]


def test_reembed_writes_the_new_store_and_records_its_encoder(tmp_path, capsys):
    old = write(tmp_path / "docs.parquet", TEXTS)
    out = tmp_path / "new.parquet"
    argv = ["reembed", str(old), "--encoder", SPEC, "--out", str(out), "--chunk-rows", "5"]
    assert main([*argv, "--quiet"]) == 0
    assert f"Re-embedded {old} with {SPEC} into {out}" in capsys.readouterr().out
    np.testing.assert_array_equal(open_store(out).read_all(), letters(TEXTS))
    assert open_store(out).read_space().encoder["spec"] == SPEC
    assert main([*argv, "--quiet"]) == 2  # the output exists: --overwrite to replace it
    assert "exists already" in capsys.readouterr().err


def test_max_rows_prints_the_projection_and_writes_nothing(tmp_path, capsys):
    old = write(tmp_path / "docs.parquet", TEXTS)
    argv = ["reembed", str(old), "--encoder", SPEC, "--max-rows", "4", "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Embedded 4 rows in" in printed and "rows/s" in printed
    assert "the whole store (12 rows) would take about" in printed
    assert [p.name for p in tmp_path.iterdir()] == ["docs.parquet"]


def test_rows_without_text_are_one_clear_error_naming_them(tmp_path, capsys):
    old = write(tmp_path / "docs.parquet", [*TEXTS[:3], "", None])
    assert main(["reembed", str(old), "--encoder", SPEC, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "relrep-hf reembed: error:" in err and "2 row(s) have no text in 'text'" in err
    assert "ids 3, 4." in err and "Traceback" not in err
