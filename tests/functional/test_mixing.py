"""The one "same anchor set" rule (`mixing.check_same_anchor_set`) on configs and artifacts."""

import pytest
import torch

from relrep_hf.functional.mixing import check_same_anchor_set, mixed_anchors
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.configuration_relative_projector import RelativeProjectorConfig


def projector_config(**fields) -> RelativeProjectorConfig:
    return RelativeProjectorConfig(**{"hidden_size": 16, "num_anchors": 12, **fields})


def test_fingerprints_decide_for_local_and_hub_anchor_sets_alike():
    a, b = (
        projector_config(anchor_set_fingerprint="aaaa"),
        projector_config(anchor_set_fingerprint="bbbb"),
    )
    with pytest.raises(ValueError, match=r"anchor set aaaa \(fingerprint\).*bbbb"):
        check_same_anchor_set(a, b)
    # The same content under two names (a local copy and its Hub upload) is the same anchor set.
    check_same_anchor_set(
        projector_config(anchor_set_fingerprint="aaaa"),
        projector_config(anchor_set_fingerprint="aaaa", anchor_set_id="org/a"),
    )
    check_same_anchor_set(
        projector_config(
            anchor_set_fingerprint="aaaa", anchor_set_id="org/a", anchor_set_revision="v1"
        ),
        projector_config(
            anchor_set_fingerprint="aaaa", anchor_set_id="org/a", anchor_set_revision="v2"
        ),
    )


def test_without_fingerprints_ids_and_revisions_decide():
    with pytest.raises(ValueError, match=r"anchor set 'org/a' but the target uses 'org/b'"):
        check_same_anchor_set(
            projector_config(anchor_set_id="org/a"), projector_config(anchor_set_id="org/b")
        )
    with pytest.raises(ValueError, match=r"revision 'v1' \(org/a@v1\) but the target uses 'v2'"):
        check_same_anchor_set(
            projector_config(anchor_set_id="org/a", anchor_set_revision="v1"),
            projector_config(anchor_set_id="org/a", anchor_set_revision="v2"),
        )
    # One side unrecorded: nothing to compare, accepted.
    check_same_anchor_set(projector_config(anchor_set_id="org/a"), projector_config())
    check_same_anchor_set(
        projector_config(anchor_set_fingerprint="aaaa"), projector_config(anchor_set_id="org/b")
    )


def test_anchor_count_and_similarity_always_count():
    with pytest.raises(ValueError, match="The head has 8 anchors but the projector has 12"):
        check_same_anchor_set(
            RelativeHeadConfig(num_anchors=8), projector_config(), names=("head", "projector")
        )
    with pytest.raises(ValueError, match="similarity 'wip' but the target uses 'cosine'"):
        check_same_anchor_set(
            projector_config(anchor_set_fingerprint="aaaa"),
            projector_config(anchor_set_fingerprint="aaaa", similarity="cosine"),
        )


def test_mixed_anchors_follow_the_support_rows_device():
    """An anchor set's stored mixture (CPU) meets rows on another device (found on an H200:
    CUDA rows against a CPU mixture raised); ``meta`` stands for that device on every machine."""
    mixture, center = torch.full((2, 3), 1 / 3), torch.zeros(4)
    support = torch.randn(3, 4, device="meta")
    assert mixed_anchors(mixture, support, center).device.type == "meta"
    assert mixed_anchors(mixture, support, None).device.type == "meta"
