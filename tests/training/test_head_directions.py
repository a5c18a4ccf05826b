"""Swappable heads: `HeadTrainer` on several encoders' features chooses how many leading
features the head reads by leave-one-encoder-out transfer (`relrep_hf.training.head_directions`)."""

from __future__ import annotations

import pytest
import torch
import transformers

from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.training.head_directions import candidates_for, choose_num_directions
from relrep_hf.training.head_trainer import HeadTrainer, HeadTrainingArguments

transformers.logging.set_verbosity_error()

M, N = 24, 300


def encoders(shared: slice, private: slice, seed: int = 0) -> tuple[dict, torch.Tensor]:
    """Three encoders' features of the same N rows (3 classes): the columns in ``shared``
    carry the same class centres in every encoder; those in ``private`` carry strong centres
    of the encoder's own (they do not transfer); the rest is noise."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(N) % 3
    common = 2.0 * torch.randn(3, M, generator=generator)
    features = {}
    for name in ("a", "b", "c"):
        own = 6.0 * torch.randn(3, M, generator=generator)
        x = torch.randn(N, M, generator=generator)
        x[:, shared] += common[labels][:, shared]
        x[:, private] += own[labels][:, private]
        features[name] = x
    return features, labels


def trainer(tmp_path, features, labels, **overrides) -> HeadTrainer:
    torch.manual_seed(0)
    head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=M, num_labels=3))
    args = HeadTrainingArguments(
        str(tmp_path), num_train_epochs=5, learning_rate=1e-2, per_device_train_batch_size=32,
        disable_tqdm=True, save_final_model=False, eval_strategy="no",
        direction_candidates=(4,), **overrides,
    )  # fmt: skip
    return HeadTrainer(head, args, features, labels)


@pytest.mark.slow
def test_fewer_directions_when_the_later_ones_do_not_transfer(tmp_path):
    features, labels = encoders(shared=slice(0, 4), private=slice(4, M))
    run = trainer(tmp_path, features, labels)
    run.train()
    head = run.model
    assert head.config.num_directions == 4
    scores = head.config.direction_selection["held_out_weighted_f1"]
    assert set(scores) == {"4", str(M)} and scores["4"] > scores[str(M)] + 0.1
    assert head.config.direction_selection["encoders"] == ["a", "b", "c"]
    x = features["a"][:5]
    changed = x.clone()
    changed[:, 4:] = 100.0  # the directions it does not read
    with torch.no_grad():
        torch.testing.assert_close(head(x).logits, head(changed).logits)


@pytest.mark.slow
def test_every_direction_when_the_later_ones_carry_the_shared_signal(tmp_path):
    features, labels = encoders(shared=slice(4, M), private=slice(0, 0))
    run = trainer(tmp_path, features, labels)
    run.train()
    assert run.model.config.num_directions == M
    assert run.train_dataset.relative.shape == (3 * N, M)  # rows stacked, labels repeated
    assert torch.equal(run.train_dataset.labels, labels.repeat(3))


def test_no_choice_with_one_encoder_or_when_told(tmp_path):
    features, labels = encoders(shared=slice(0, 4), private=slice(4, M))
    single = trainer(tmp_path / "one", features["a"], labels)
    assert single.choose_directions() is None and single.model.config.num_directions is None
    off = trainer(tmp_path / "off", features, labels, choose_directions=False)
    assert off.choose_directions() is None and off.model.config.input_width == M


@pytest.mark.slow
def test_the_choice_is_saved_and_loaded(tmp_path):
    features, labels = encoders(shared=slice(0, 4), private=slice(4, M))
    run = trainer(tmp_path, features, labels)
    run.train()
    run.model.save_pretrained(tmp_path / "head")
    loaded = RelativeHeadForClassification.from_pretrained(tmp_path / "head")
    assert loaded.config.num_directions == 4 and loaded.norm.normalized_shape == (4,)
    assert loaded.config.direction_selection == run.model.config.direction_selection
    with torch.no_grad():
        torch.testing.assert_close(loaded(features["c"]).logits, run.model(features["c"]).logits)


def test_choose_num_directions_needs_two_encoders_and_candidates_include_m():
    features, labels = encoders(shared=slice(0, 4), private=slice(4, M))
    config = RelativeHeadConfig(num_anchors=M, num_labels=3)
    with pytest.raises(ValueError, match="needs the features of 2 or more encoders, got 1"):
        choose_num_directions(config, {"a": features["a"]}, labels, training={})
    assert candidates_for(300) == [16, 32, 48, 64, 96, 128, 192, 256, 300]
    assert candidates_for(20) == [16, 20]


def test_bad_encoder_features(tmp_path):
    features, labels = encoders(shared=slice(0, 4), private=slice(4, M))
    with pytest.raises(ValueError, match="train_relative is an empty mapping"):
        trainer(tmp_path, {}, labels)
    with pytest.raises(
        ValueError, match=r"train_labels has 300 rows but train_relative\['b'\] has 299"
    ):
        trainer(tmp_path, {"a": features["a"], "b": features["b"][:299]}, labels)
    with pytest.raises(ValueError, match=r"num_directions must be an int in \[1, num_anchors=24\]"):
        RelativeHeadConfig(num_anchors=M, num_directions=25)


@pytest.mark.slow
def test_a_tolerance_keeps_the_most_directions_scoring_near_the_best():
    features, labels = encoders(shared=slice(0, 4), private=slice(4, M))
    config = RelativeHeadConfig(num_anchors=M, num_labels=3)
    training = HeadTrainingArguments(
        "unused", num_train_epochs=5, learning_rate=1e-2, per_device_train_batch_size=32
    ).to_dict()
    best, record = choose_num_directions(config, features, labels, training=training, grid=(4,))
    assert best == 4
    scores = record["held_out_weighted_f1"]
    gap = scores["4"] - scores[str(M)]
    loose, _ = choose_num_directions(
        config, features, labels, training=training, grid=(4,), tolerance=gap + 1e-6
    )
    tight, _ = choose_num_directions(
        config, features, labels, training=training, grid=(4,), tolerance=gap / 2
    )
    assert (loose, tight) == (M, 4)
    with pytest.raises(ValueError, match="direction_tolerance must be >= 0"):
        HeadTrainingArguments("unused", direction_tolerance=-0.1)
