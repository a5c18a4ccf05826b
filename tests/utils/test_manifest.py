"""Silent corruption becomes a clear error: the manifest of sha256 digests, checked on load.

The bit-flip test flips one byte in every region of every file of a small projector, head and
anchor set in turn (every byte of the weights, configs and manifest, which the loader parses; one
byte per 32-byte region of the larger files and of the card and remote code, which it only
hashes) and checks that each load is refused with an error naming the flipped file. The
Hub test pushes to the local Hub server and corrupts the downloaded snapshot.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
import torch

from relrep_hf import AnchorSet, RelativeHeadConfig, RelativeProjector, Statistics
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.utils.manifest import MANIFEST_NAME, CorruptedArtifactError
from tests.fixtures.hub_encoders import run_forked_client
from tests.fixtures.hub_server import LocalHub

EVERY_BYTE = 2048  # files up to this size get every byte flipped; larger ones one per region
REGION = 32
# read by nothing but the digest check, which catches a flip anywhere in a file alike: one flip
# per region (every byte of the head's card and the projector's configuration code took 3400 of
# the 8300 loads, 40 % of this test)
HASHED_ONLY = (".md", ".py")


def small_projector() -> RelativeProjector:
    data = torch.randn(32, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return RelativeProjector.from_statistics(data[:2], Statistics.from_embeddings(data))


def small_head() -> RelativeHeadForClassification:
    torch.manual_seed(0)
    return RelativeHeadForClassification(RelativeHeadConfig(num_anchors=2, num_labels=2))


def small_anchor_set() -> AnchorSet:
    return AnchorSet.random(["a", "b", "c", "d"], num_anchors=2, seed=0)


ARTIFACTS = {
    "projector": (small_projector, RelativeProjector.from_pretrained),
    "head": (small_head, RelativeHeadForClassification.from_pretrained),
    "anchor_set": (small_anchor_set, AnchorSet.from_pretrained),
}


def offsets(path: Path, size: int) -> range:
    every_byte = size <= EVERY_BYTE and path.suffix not in HASHED_ONLY
    return range(size) if every_byte else range(0, size, REGION)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ARTIFACTS)
def test_every_flipped_byte_region_is_rejected_naming_the_file(kind, tmp_path):
    build, load = ARTIFACTS[kind]
    folder = tmp_path / kind
    build().save_pretrained(folder)
    load(folder)  # intact: loads
    files = sorted(p for p in folder.iterdir() if p.is_file())
    assert MANIFEST_NAME in {p.name for p in files}
    flips = 0
    for path in files:
        original = path.read_bytes()
        for offset in offsets(path, len(original)):
            damaged = bytearray(original)
            damaged[offset] ^= 0xFF
            path.write_bytes(bytes(damaged))
            with pytest.raises(CorruptedArtifactError, match=path.name):
                load(folder)
            flips += 1
        path.write_bytes(original)
    load(folder)  # restored: loads again
    print(f"{kind}: {flips} flips over {len(files)} files, each rejected")
    assert flips > 200


@pytest.mark.parametrize("kind", ARTIFACTS)
def test_a_folder_over_the_verify_first_size_is_checked_while_it_loads(kind, tmp_path, monkeypatch):
    """The flip test's folders are small, so checked before the load; a larger one is hashed on
    a second thread during the load, and refused as surely (here: every folder counts as large)."""
    from relrep_hf.utils import artifacts

    monkeypatch.setattr(artifacts, "VERIFY_FIRST_BYTES", -1)
    build, load = ARTIFACTS[kind]
    folder = tmp_path / kind
    build().save_pretrained(folder)
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        original = path.read_bytes()
        damaged = bytearray(original)
        damaged[len(damaged) // 2] ^= 0xFF
        path.write_bytes(bytes(damaged))
        with pytest.raises(CorruptedArtifactError, match=path.name):
            load(folder)
        path.write_bytes(original)
    load(folder)


def test_flipped_tensor_data_loads_silently_without_the_check(tmp_path):
    """Why the manifest exists: the flip lands in tensor data, the header stays intact."""
    folder = tmp_path / "projector"
    small_projector().save_pretrained(folder)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-2] ^= 0x01  # inside the data of the last tensor
    weights.write_bytes(bytes(data))
    with pytest.raises(CorruptedArtifactError, match="model.safetensors"):
        RelativeProjector.from_pretrained(folder)
    loaded = RelativeProjector.from_pretrained(folder, verify=False).state_dict()
    intact = small_projector().state_dict()
    changed = [name for name in intact if not torch.equal(loaded[name], intact[name])]
    assert len(changed) == 1 and torch.isfinite(loaded[changed[0]]).all()  # finite, wrong
    os.environ["RELREP_HF_VERIFY"] = "0"
    try:
        RelativeProjector.from_pretrained(folder)  # the environment switch too
    finally:
        del os.environ["RELREP_HF_VERIFY"]


def test_artifacts_saved_before_manifests_load_with_a_warning(tmp_path):
    for kind, (build, load) in ARTIFACTS.items():
        folder = tmp_path / kind
        build().save_pretrained(folder)
        (folder / MANIFEST_NAME).unlink()
        with pytest.warns(UserWarning, match="no manifest.json"):
            load(folder)


def test_metrics_written_after_the_save_are_in_the_manifest(tmp_path):
    from relrep_hf.models.modeling_relative_head import write_head_metrics

    folder = tmp_path / "head"
    small_head().save_pretrained(folder)
    write_head_metrics(folder, {"enc": {"accuracy": 0.5}})
    listed = json.loads((folder / MANIFEST_NAME).read_text())["files"]
    assert {"metrics.json", "README.md", "config.json", "model.safetensors"} <= set(listed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RelativeHeadForClassification.from_pretrained(folder)


HUB_CLIENT = r"""
import json, sys, warnings
from pathlib import Path
import torch
from huggingface_hub import HfApi
from relrep_hf import AnchorSet, RelativeHeadConfig, RelativeProjector, Statistics
from relrep_hf.models.modeling_relative_head import write_head_metrics
from relrep_hf.utils.manifest import CorruptedArtifactError
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification

work, user = Path(sys.argv[1]), sys.argv[2]
api = HfApi()
data = torch.randn(32, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
projector = RelativeProjector.from_statistics(data[:2], Statistics.from_embeddings(data))
projector.push_to_hub(f"{user}/projector")
assert "manifest.json" in api.list_repo_files(f"{user}/projector")

# A Hub snapshot is verified: intact, it loads; corrupted in the cache, it is refused.
loaded = RelativeProjector.from_pretrained(f"{user}/projector")
assert torch.equal(loaded.weight, projector.weight)
anchors = AnchorSet.random(["a", "b", "c"], num_anchors=2)
anchors.push_to_hub(f"{user}/anchors")
assert AnchorSet.from_pretrained(f"{user}/anchors").support == ["a", "b", "c"]
snapshot = Path(api.snapshot_download(f"{user}/projector"))  # the same cache
weights = (snapshot / "model.safetensors").resolve()
data = bytearray(weights.read_bytes()); data[-3] ^= 0xFF; weights.write_bytes(bytes(data))
try:
    RelativeProjector.from_pretrained(f"{user}/projector")
except CorruptedArtifactError as error:
    assert "model.safetensors" in str(error) and "force_download=True" in str(error), error
else:
    raise AssertionError("a corrupted Hub snapshot loaded")
RelativeProjector.from_pretrained(f"{user}/projector", verify=False)  # the opt-out
fixed = RelativeProjector.from_pretrained(f"{user}/projector", force_download=True)
assert torch.equal(fixed.weight, projector.weight)

# Stale files on the Hub: a new head pushed over an evaluated one deletes its metrics.json.
torch.manual_seed(0)
head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=2, num_labels=2))
head.save_pretrained(work / "head")
write_head_metrics(work / "head", {"enc": {"accuracy": 0.987654}})
from relrep_hf.publishing.hub import push_artifact
push_artifact(work / "head", f"{user}/head")
assert "metrics.json" in api.list_repo_files(f"{user}/head")
torch.manual_seed(1)
RelativeHeadForClassification(RelativeHeadConfig(num_anchors=2, num_labels=2)).push_to_hub(f"{user}/head")
files = api.list_repo_files(f"{user}/head")
assert "metrics.json" not in files, files
card = Path(api.hf_hub_download(f"{user}/head", "README.md")).read_text()
assert "0.987654" not in card
RelativeHeadForClassification.from_pretrained(f"{user}/head")
print("ok")
"""


@pytest.mark.slow
def test_hub_snapshots_are_verified_and_pushes_leave_no_stale_files(tmp_path):
    # The client is forked from this process (its process is only the server's other side)
    with LocalHub() as hub:
        out = run_forked_client(hub, HUB_CLIENT, tmp_path, hub.user, home=tmp_path, timeout=300)
    assert out.strip().endswith("ok")
