"""The quality benchmark's groups of spaces (``benchmarks/spaces.py``) in quick mode: aligned,
finite, genuinely different spaces, and a second load that reads the caches only."""

from __future__ import annotations

import shutil

import pytest
import torch

from benchmarks.spaces import real_encoders
from benchmarks.spaces.groups import GROUPS, QUICK_ROWS, SpaceGroup, load_group
from benchmarks.spaces.real_encoders import QUICK_REAL_ENCODERS
from benchmarks.spaces.small_lms import QUICK_MODELS

REAL_ROWS = 50  # the quick real group's verses here (`cache`)
EXPECTED_SPACES = {
    "real": len(QUICK_REAL_ENCODERS),
    "minilm": 4,
    "small_lms": 2 * len(QUICK_MODELS),
    "affine": 4,
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory, quick_lms):
    """A benchmark cache for this module holding only the quick LMs (trained once per session:
    `quick_lms`, whose training test_small_lms checks); the Hugging Face cache is already a
    fresh temporary folder, see conftest.py. The quick real group on `REAL_ROWS` verses, not
    its 200: what is checked (aligned, finite, distinct, read back) does not depend on the
    count, and multilingual-e5 in 4 bits costs ~0.07 CPU s a verse (15 of the group's 28)."""
    root = tmp_path_factory.mktemp("relrep_cache")
    shutil.copytree(quick_lms[0], root / "small_lms")  # where ensure_small_lms looks by default
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(real_encoders, "QUICK_REAL_ROWS", REAL_ROWS)
        patch.setenv("RELREP_HF_CACHE", str(root))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # tiny models on a shared machine
        try:
            yield root
        finally:
            torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def groups(cache) -> dict[str, SpaceGroup]:
    return {name: load_group(name, quick=True) for name in GROUPS}


def _files(root):
    return {path: path.stat().st_mtime_ns for path in root.rglob("*") if path.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("name", GROUPS)
def test_quick_group_is_aligned_finite_and_distinct(groups, name):
    group = groups[name]
    assert group.name == name
    rows = REAL_ROWS if name == "real" else QUICK_ROWS
    assert len(group.texts) == len(group.labels) == rows
    assert len(group.embeddings) == EXPECTED_SPACES[name]
    for space, embeddings in group.embeddings.items():
        assert embeddings.dtype == torch.float32 and embeddings.dim() == 2, space
        assert embeddings.shape[0] == rows, space
        assert torch.isfinite(embeddings).all(), space
        assert (embeddings.std(dim=0) > 0).all(), space
    # Distinct spaces: no two equal (up to shape).
    spaces = list(group.embeddings.values())
    for i, a in enumerate(spaces):
        for b in spaces[i + 1 :]:
            assert a.shape != b.shape or not torch.allclose(a, b)


@pytest.mark.slow
def test_affine_spaces_are_anisotropic(groups):
    base = groups["minilm"].embeddings["minilm-mean-L-1"]
    for space, latent in groups["affine"].embeddings.items():
        singular = torch.linalg.svdvals(latent - latent.mean(dim=0))
        base_singular = torch.linalg.svdvals(base - base.mean(dim=0))
        # top / median spread: the stretched latents are far more cigar-shaped than MiniLM's
        spread = singular[0] / singular[len(singular) // 2]
        assert spread > 2 * base_singular[0] / base_singular[len(base_singular) // 2], space


@pytest.mark.slow
def test_second_load_reads_the_caches_only(groups, cache):
    import datasets

    hf_cache = datasets.config.HF_DATASETS_CACHE
    before = {**_files(cache), **_files(hf_cache)}
    assert any(p.name == "model.safetensors" for p in before)  # the LMs are in this cache
    assert any(p.name.startswith("affine-") for p in before)
    for name in GROUPS:
        again = load_group(name, quick=True)
        assert again.texts == groups[name].texts
        for space, embeddings in groups[name].embeddings.items():
            assert torch.equal(again.embeddings[space], embeddings), (name, space)
    after = {**_files(cache), **_files(hf_cache)}
    # Nothing retrained or re-extracted: the same files, none rewritten.
    assert {p: t for p, t in after.items() if p in before} == before
    assert not [p for p in after if p not in before and "model.safetensors" in p.name]
    assert not [p for p in after if p not in before and p.name == "embeddings.arrow"]


def test_unknown_group_names_the_valid_ones():
    with pytest.raises(ValueError, match="Invalid space group 'bogus'. Valid: real, minilm"):
        load_group("bogus")
