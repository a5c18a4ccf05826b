import datasets
import pytest
import torch

from relrep_hf import AnchorSet, RelativeProjector, Statistics
from relrep_hf.functional.anchor_strategies import (
    farthest_point_mixture,
    kmeans_mixture,
    random_mixture,
)

SUPPORT = [f"sentence {i}" for i in range(40)]


@pytest.fixture
def anchor_set():
    mixture = torch.softmax(torch.randn(6, 40, generator=torch.Generator().manual_seed(0)), dim=1)
    return AnchorSet(
        mixture,
        SUPPORT,
        encoders=[{"name": "a", "id": "org/a", "revision": "abc", "pooling": "mean", "layer": -1}],
        training={"seed": 3, "coverage_weight": 11.3},
        metrics={"retrieval": {"a->b": {"recall@1": 0.5}}},
    )


def test_anchors_are_the_mixture_of_support_embeddings(anchor_set):
    x = torch.randn(40, 5, dtype=torch.float64)
    expected = anchor_set.mixture.double() @ x
    torch.testing.assert_close(anchor_set.anchors(x), expected)
    # each anchor lies in the convex hull: a weighted mean of support rows
    torch.testing.assert_close(
        anchor_set.anchors(torch.ones(40, 2)), torch.ones(6, 2, dtype=torch.float64)
    )


def test_round_trip_is_exact_and_support_is_datasets_readable(anchor_set, tmp_path):
    anchor_set.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md",
        "anchor_set.json",
        "anchor_set.safetensors",
        "manifest.json",
        "stitching_heatmap.png",
        "support.jsonl",
    ]
    loaded = AnchorSet.from_pretrained(tmp_path)
    assert torch.equal(loaded.mixture, anchor_set.mixture)
    assert loaded.support == SUPPORT
    assert (loaded.encoders, loaded.training, loaded.metrics) == (
        anchor_set.encoders,
        anchor_set.training,
        anchor_set.metrics,
    )
    assert (loaded.repo_id, loaded.revision) == ("", "")  # a local folder has no Hub provenance
    support = datasets.load_dataset(
        "json", data_files=str(tmp_path / "support.jsonl"), split="train"
    )
    assert support["text"] == SUPPORT


def test_image_support_is_stored_as_references(tmp_path):
    support = [{"index": i} for i in (3, 1, 4, 1, 5)]
    reference = {
        "dataset_id": "uoft-cs/cifar100",
        "revision": "abc",
        "split": "train",
        "column": "img",
    }
    anchor_set = AnchorSet(random_mixture(5, 2), support, support_reference=reference)
    anchor_set.save_pretrained(tmp_path)
    loaded = AnchorSet.from_pretrained(tmp_path)
    assert loaded.support == support and loaded.support_reference == reference


def test_random_strategy_picks_distinct_support_points():
    mixture = random_mixture(10, 4, seed=1)
    assert mixture.sum().item() == 4 and set(mixture.unique().tolist()) == {0.0, 1.0}
    assert len(set(mixture.argmax(dim=1).tolist())) == 4
    assert torch.equal(mixture, random_mixture(10, 4, seed=1))
    assert not torch.equal(mixture, random_mixture(10, 4, seed=2))


def test_kmeans_anchors_are_the_centroids_of_their_clusters():
    # two well separated blobs of 10 points: two clusters, each anchor the mean of one blob
    generator = torch.Generator().manual_seed(0)
    blobs = torch.cat(
        [torch.randn(10, 3, generator=generator), 50 + torch.randn(10, 3, generator=generator)]
    )
    mixture = kmeans_mixture(blobs, 2, seed=0)
    assert mixture.shape == (2, 20)
    anchors = mixture.double() @ blobs.double()
    expected = torch.stack([blobs[:10].double().mean(0), blobs[10:].double().mean(0)])
    if anchors[0, 0] > anchors[1, 0]:
        anchors = anchors.flip(0)
    torch.testing.assert_close(anchors, expected)


def test_farthest_point_sampling_by_hand():
    # 1-D points 0, 1, 2, 10 (1-D whitening only rescales distances). From 10 the farthest
    # is 0; then the distances to {10, 0} are 1 -> 1 and 2 -> 2, so 2 comes next.
    # From 0: 10, then 2 -> min(2, 8) = 2 beats 1 -> 1.
    points = torch.tensor([[0.0], [1.0], [2.0], [10.0]])
    expected = {3: [3, 0, 2], 0: [0, 3, 2]}
    seen = set()
    for seed in range(30):
        order = farthest_point_mixture(points, 3, seed=seed).argmax(dim=1).tolist()
        if order[0] in expected:
            assert order == expected[order[0]]
            seen.add(order[0])
    assert seen == {0, 3}


def test_strategies_as_anchor_sets_through_one_code_path():
    x = torch.randn(30, 4)
    texts = [str(i) for i in range(30)]
    for anchor_set in (
        AnchorSet.random(texts, 5),
        AnchorSet.kmeans(texts, [x, x @ torch.randn(4, 6)], 5),
        AnchorSet.farthest_point(texts, x, 5),
    ):
        projector = RelativeProjector.from_anchor_set(anchor_set, x, Statistics.from_embeddings(x))
        assert projector(x).shape == (30, 5)


def test_onboarding_records_the_anchor_set_provenance(anchor_set):
    anchor_set.repo_id, anchor_set.revision = "org/anchors", "0" * 40
    x = torch.randn(40, 5)
    projector = RelativeProjector.from_anchor_set(anchor_set, x, x)
    assert (projector.config.anchor_set_id, projector.config.anchor_set_revision) == (
        "org/anchors",
        "0" * 40,
    )


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: random_mixture(3, 5), "support set has 3 inputs, fewer than the 5 anchors"),
        (lambda: AnchorSet(torch.full((2, 3), 0.5), ["a", "b", "c"]), "probability simplex"),
        (lambda: AnchorSet(torch.eye(3)[:2], ["a", "b"]), "K=3 support inputs but 2"),
        (lambda: AnchorSet(torch.ones(3), ["a", "b", "c"]), r"shape \[m, K\]"),
        (
            lambda: kmeans_mixture([torch.randn(5, 2), torch.randn(6, 2)], 2),
            "one row per support input",
        ),
    ],
)
def test_bad_anchor_sets(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_bad_support_embeddings(anchor_set):
    with pytest.raises(ValueError, match=r"shape \[K=40, d\]"):
        anchor_set.anchors(torch.randn(39, 5))
    bad = torch.randn(40, 5)
    bad[7, 1] = float("nan")
    with pytest.raises(ValueError, match="row 7"):
        anchor_set.anchors(bad)
    with pytest.raises(ValueError, match="has 7 anchors but the anchor set has 6"):
        anchor_set.check_compatible(7, what="head")


def test_corrupted_and_incomplete_folders(anchor_set, tmp_path):
    anchor_set.save_pretrained(tmp_path)
    weights = tmp_path / "anchor_set.safetensors"
    weights.write_bytes(weights.read_bytes()[:50])
    with pytest.raises(OSError, match="corrupted or truncated"):
        AnchorSet.from_pretrained(tmp_path, verify=False)  # past the manifest
    anchor_set.save_pretrained(tmp_path)
    (tmp_path / "anchor_set.json").write_text("{not json")
    with pytest.raises(OSError, match="corrupted or truncated"):
        AnchorSet.from_pretrained(tmp_path, verify=False)
    (tmp_path / "support.jsonl").unlink()
    with pytest.raises(OSError, match=r"not an anchor set: it lacks support\.jsonl"):
        AnchorSet.from_pretrained(tmp_path)


def test_repr_is_a_few_lines_not_the_support(anchor_set):
    text = repr(anchor_set)
    assert len(text.splitlines()) <= 10 and len(text) < 400
    assert "method: param" in text and "num_anchors: 6" in text and "support_size: 40" in text
    assert "encoders: a\n" in text and f"fingerprint: {anchor_set.fingerprint}" in text
    assert "shrinkage: 0.15" in text and SUPPORT[0] not in text
    fitted = AnchorSet.shared_linear(
        SUPPORT, {"x": torch.randn(40, 4), "y": torch.randn(40, 3)}, 4, support_rows=range(40)
    )
    assert "method: shared_linear" in repr(fitted) and "encoders: x, y" in repr(fitted)
    assert str(fitted) == repr(fitted)
