"""The configs' shared contract: format_version checked on load, unknown keys warned about."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from relrep_hf import RelativeHeadConfig, RelativeProjector, RelativeProjectorConfig, Statistics
from relrep_hf.models.configuration_utils import FORMAT_VERSION


def _saved_projector(folder):
    data = torch.randn(40, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    RelativeProjector.from_statistics(data[:4], Statistics.from_embeddings(data)).save_pretrained(
        folder
    )
    return folder


def _edit(folder, **changes):
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.mark.parametrize("config_class", [RelativeProjectorConfig, RelativeHeadConfig])
def test_format_version_is_written_and_read_back(tmp_path, config_class):
    config_class().save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["format_version"] == FORMAT_VERSION
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a config saved by this version warns about nothing
        assert config_class.from_pretrained(tmp_path).format_version == FORMAT_VERSION


def test_a_newer_format_is_refused_with_the_fix(tmp_path):
    folder = _saved_projector(tmp_path / "projector")
    _edit(folder, format_version=FORMAT_VERSION + 1)
    with pytest.raises((ValueError, OSError), match="newer than this relrep_hf reads.*upgrade"):
        RelativeProjector.from_pretrained(folder, verify=False)


def test_a_config_without_format_version_is_read_as_version_1():
    assert RelativeHeadConfig.from_dict({"num_anchors": 3}).format_version == 1


def test_unknown_keys_are_named_in_a_warning(tmp_path):
    folder = _saved_projector(tmp_path / "projector")
    _edit(folder, anchor_count=7)  # a typo of num_anchors
    with pytest.warns(UserWarning, match=r"does not know: \['anchor_count'\]"):
        projector = RelativeProjector.from_pretrained(folder, verify=False)
    assert projector.config.num_anchors == 4


def test_transformers_own_keys_are_not_unknown():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RelativeHeadConfig(num_anchors=3, id2label={0: "a", 1: "b"}, architectures=["X"])
