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


@pytest.mark.slow
def test_the_evaluate_steps_param_fit_without_checkpoints_gives_the_same_anchors(tmp_path):
    """`compared_methods` fits PARAM in a temporary folder with save_strategy "no": the
    projectors it builds are bit-identical to those of a fit that writes every checkpoint."""
    import torch

    from relrep_hf.anchors.anchor_methods import ANCHOR_METHODS
    from relrep_hf.pipeline.run_evaluation import method_projectors
    from tests.fixtures.synthetic import affine_spaces, small_param_args

    spaces = affine_spaces(("a", "b", "c"), n=600, d=8)
    rows = torch.arange(500)
    built = {
        strategy: method_projectors(
            ANCHOR_METHODS["param"],
            small_param_args(tmp_path / strategy, save_strategy=strategy, support_size=200),
            spaces,
            ["a", "b"],
            rows,
        )
        for strategy in ("epoch", "no")
    }
    for name in spaces:
        saved, unsaved = built["epoch"][name].state_dict(), built["no"][name].state_dict()
        assert saved.keys() == unsaved.keys()
        assert all(torch.equal(saved[key], unsaved[key]) for key in saved), name
