"""Artifacts saved before the one artifact base (#36/#37) still load, and compute what they did.

``tests/fixtures/saved_before/artifacts.tar`` holds a projector, a head, an anchor set, a
wrapper's saved folder (its projector, with the tiny encoder it was built on) and a migration map,
each written by the code of main before the base (``make_saved_before.py`` there), with the
outputs that code computed (``expected.safetensors``). The tests load an unpacked copy.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from relrep_hf import AnchorSet, RelativeHeadForClassification, RelativeProjector
from relrep_hf.migration.map import MigrationMap
from relrep_hf.models.modeling_relative_wrapper import RelativeWrapper
from tests.fixtures.saved_before.make_saved_before import TEXTS

ARCHIVE = Path(__file__).resolve().parents[1] / "fixtures" / "saved_before" / "artifacts.tar"


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """The saved folders, unpacked."""
    folder = tmp_path_factory.mktemp("saved_before")
    with tarfile.open(ARCHIVE) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.12, 3.11.4, 3.10.12 and later
            tar.extractall(folder, filter="data")
        else:
            tar.extractall(folder)  # our own archive
    return folder


@pytest.fixture(scope="module")
def expected(saved) -> dict[str, torch.Tensor]:
    return load_file(saved / "expected.safetensors")


def test_projector_and_head_saved_before_give_the_same_outputs(saved, expected):
    projector = RelativeProjector.from_pretrained(saved / "projector")
    head = RelativeHeadForClassification.from_pretrained(saved / "head")
    with torch.no_grad():
        features = projector(expected["inputs"])
        torch.testing.assert_close(features, expected["projector"], rtol=0, atol=1e-6)
        torch.testing.assert_close(head(features).logits, expected["head"], rtol=0, atol=1e-6)


def test_anchor_set_saved_before_gives_the_same_anchors(saved, expected):
    anchor_set = AnchorSet.from_pretrained(saved / "anchor_set")
    support = torch.randn(40, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(anchor_set.anchors(support[:6]), expected["anchor_set"])


def test_wrapper_folder_saved_before_gives_the_same_features(saved, expected):
    wrapper = RelativeWrapper.from_pretrained(saved / "encoder", saved / "wrapper")
    torch.testing.assert_close(wrapper.encode(TEXTS), expected["wrapper"], rtol=0, atol=1e-6)


def test_migration_map_saved_before_manifests_loads_with_a_warning(saved, expected):
    with pytest.warns(UserWarning, match="no manifest.json"):
        migration_map = MigrationMap.from_pretrained(saved / "migration_map")
    assert migration_map.info["source"] == "old-enc"
    with torch.no_grad():
        torch.testing.assert_close(migration_map(expected["inputs"]), expected["migration_map"])
