"""Whether an encoder, its preprocessor and a projector belong together, checked on their own."""

import warnings

import pytest
import torch
from transformers import BertConfig, BertModel, ViTConfig, ViTModel

from relrep_hf.models.configuration_relative_projector import RelativeProjectorConfig
from relrep_hf.models.wrapper_parts import (
    check_encoder_identity,
    check_hidden_size,
    check_preprocessor,
    mismatch,
    resolve_pooling_and_layer,
)

COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


@pytest.fixture(scope="module")
def bert() -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16,
    )  # fmt: skip
    return BertModel(config)


def projector_config(**fields) -> RelativeProjectorConfig:
    return RelativeProjectorConfig(**{"hidden_size": 16, "num_anchors": 4, **fields})


def test_mismatch_is_an_error_unless_not_strict():
    with pytest.raises(ValueError, match="wrong. Pass strict=False to override it on purpose."):
        mismatch("wrong.", strict=True)
    with pytest.warns(UserWarning, match="^wrong.$"):
        mismatch("wrong.", strict=False)


def test_hidden_size_and_preprocessor(bert):
    check_hidden_size(bert, projector_config(), "text")
    with pytest.raises(ValueError, match="takes 8-dimensional embeddings but BertModel pools 16"):
        check_hidden_size(bert, projector_config(hidden_size=8), "text")
    with pytest.raises(ValueError, match="BertModel reads text, so it needs a tokenizer"):
        check_preprocessor(bert, object(), "text")
    vit = ViTModel(ViTConfig(image_size=16, patch_size=8, hidden_size=16, num_hidden_layers=1,
                             num_attention_heads=2, intermediate_size=32))  # fmt: skip
    with pytest.raises(ValueError, match="ViTModel reads images, so it needs an image processor"):
        check_preprocessor(vit, object(), "image")


def test_pooling_and_layer_default_to_the_projectors_and_compare_by_position(bert):
    config = projector_config(pooling="cls", layer=3)
    assert resolve_pooling_and_layer(bert, config, None, None, "text", True) == ("cls", 3)
    # Layer -1 of a 3-layer BERT is entry 3 of its 4 hidden states: the same layer.
    assert resolve_pooling_and_layer(bert, config, "cls", -1, "text", True) == ("cls", -1)
    with pytest.raises(ValueError, match="built on 'cls'-pooled embeddings, but pooling='mean'"):
        resolve_pooling_and_layer(bert, config, "mean", None, "text", True)
    with pytest.warns(UserWarning, match="hidden states of layer 3, but layer=1"):
        resolve_pooling_and_layer(bert, config, None, 1, "text", False)
    with pytest.raises(ValueError, match="does not record the pooling"):
        resolve_pooling_and_layer(bert, projector_config(), None, None, "text", True)


def test_encoder_identity_compares_what_both_record():
    config = projector_config(encoder_id="org/enc", encoder_revision=COMMIT_A)
    with pytest.raises(ValueError, match="built for encoder 'org/enc', but the encoder is 'org/x'"):
        check_encoder_identity(config, "org/x", "", True)
    with pytest.raises(ValueError, match=f"revision {COMMIT_A!r} of org/enc"):
        check_encoder_identity(config, "org/enc", COMMIT_B, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_encoder_identity(config, "org/enc", "main", True)  # a branch and a commit: unknown
        check_encoder_identity(config, "", "", True)  # nothing known about the encoder
