"""Artifacts saved before the one artifact base (#36/#37) still load, and compute what they did.

``tests/fixtures/saved_before/`` holds a projector, a head, an anchor set, a wrapper's saved
folder (its projector, with the tiny encoder it was built on) and a migration map, each written
by the code of main before the base (``make_saved_before.py`` there), with the outputs that code
computed (``expected.safetensors``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from relrep_hf import AnchorSet, RelativeHeadForClassification, RelativeProjector
from relrep_hf.migration.map import MigrationMap
from relrep_hf.models.modeling_relative_wrapper import RelativeWrapper
from tests.fixtures.saved_before.make_saved_before import TEXTS

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "saved_before"
EXPECTED = load_file(SAVED / "expected.safetensors")
ROWS = EXPECTED["inputs"]


def test_projector_and_head_saved_before_give_the_same_outputs():
    projector = RelativeProjector.from_pretrained(SAVED / "projector")
    head = RelativeHeadForClassification.from_pretrained(SAVED / "head")
    with torch.no_grad():
        features = projector(ROWS)
        torch.testing.assert_close(features, EXPECTED["projector"], rtol=0, atol=1e-6)
        torch.testing.assert_close(head(features).logits, EXPECTED["head"], rtol=0, atol=1e-6)


def test_anchor_set_saved_before_gives_the_same_anchors():
    anchor_set = AnchorSet.from_pretrained(SAVED / "anchor_set")
    support = torch.randn(40, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(anchor_set.anchors(support[:6]), EXPECTED["anchor_set"])


def test_wrapper_folder_saved_before_gives_the_same_features():
    wrapper = RelativeWrapper.from_pretrained(SAVED / "encoder", SAVED / "wrapper")
    torch.testing.assert_close(wrapper.encode(TEXTS), EXPECTED["wrapper"], rtol=0, atol=1e-6)


def test_migration_map_saved_before_manifests_loads_with_a_warning():
    with pytest.warns(UserWarning, match="no manifest.json"):
        migration_map = MigrationMap.from_pretrained(SAVED / "migration_map")
    assert migration_map.info["source"] == "old-enc"
    with torch.no_grad():
        torch.testing.assert_close(migration_map(ROWS), EXPECTED["migration_map"])
