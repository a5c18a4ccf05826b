"""Loading encoders: the Hub id and commit a loaded model came from."""

from __future__ import annotations

from transformers import BertConfig, BertModel

from relrep_hf.encoding.encoders import encoder_provenance
from relrep_hf.utils.hub_files import is_commit_hash


def tiny_bert_from_folder(path) -> BertModel:
    """A tiny random BERT saved to ``path`` and loaded back by path (a local folder)."""
    config = BertConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=16,
    )  # fmt: skip
    BertModel(config).save_pretrained(path)
    return BertModel.from_pretrained(path)


def test_encoder_provenance(tmp_path):
    model = tiny_bert_from_folder(tmp_path)
    assert encoder_provenance(model) == ("", "")  # loaded from a local folder
    config = model.config
    original = config.name_or_path
    try:
        config.name_or_path = "sentence-transformers/all-MiniLM-L6-v2"
        assert encoder_provenance(model) == ("sentence-transformers/all-MiniLM-L6-v2", "")
        commit = "0123456789abcdef0123456789abcdef01234567"
        config.name_or_path = (
            f"/root/.cache/huggingface/hub/models--org--my-model/snapshots/{commit}"
        )
        assert encoder_provenance(model) == ("org/my-model", commit)
        config.name_or_path = f"/cache/models--gpt2/snapshots/{commit}/"
        assert encoder_provenance(model) == ("gpt2", commit)
    finally:
        config.name_or_path = original


def test_is_commit_hash():
    assert is_commit_hash("0123456789abcdef0123456789abcdef01234567")
    assert not is_commit_hash("main") and not is_commit_hash("") and not is_commit_hash("0123abc")
