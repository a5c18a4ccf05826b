"""The run folder's ``run.json`` is read and checked before any step uses it (the fast loop's
tests of relrep_hf/pipeline/; the steps on real encoders are in test_migration.py, marked slow)."""

from __future__ import annotations

import json

import pytest

from relrep_hf.pipeline.run_folder import RunError, read_run


def test_a_folder_without_run_json_is_not_a_run(tmp_path):
    with pytest.raises(RunError, match="is not a run folder .*run 'relrep-hf embed' first"):
        read_run(tmp_path)


def test_a_damaged_or_foreign_run_json_is_refused_with_the_fix(tmp_path):
    (tmp_path / "run.json").write_text('{"encoders": [')  # cut short
    with pytest.raises(RunError, match="is not valid JSON.*embed --overwrite"):
        read_run(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"encoders": [{"name": "a"}]}))
    with pytest.raises(RunError, match="has no valid 'encoders' list"):
        read_run(tmp_path)


def test_a_run_without_an_anchor_set_is_refused_where_one_is_needed(tmp_path):
    run = {"encoders": [{"name": "a", "embeddings": "embeddings/a"}]}
    (tmp_path / "run.json").write_text(json.dumps(run))
    assert read_run(tmp_path) == run
    with pytest.raises(RunError, match="has no anchor set yet: run 'relrep-hf fit' first"):
        read_run(tmp_path, fitted=True)
