"""`view_index`: a GGUF encoder whose views are cached is not loaded again, and anything that
could change its embeddings (another file version, other rows, a broken index) loads it."""

from __future__ import annotations

import json
import os

import datasets
import pytest
import torch
import transformers

from relrep_hf.encoding.encoder_kinds import EmbedRequest, embed_encoders, parse_encoder
from relrep_hf.encoding.extraction import embeddings_tensor
from tests.fixtures.gguf_models import byte_level_vocab, tiny_llama, write_gguf


@pytest.fixture
def gguf_file(tmp_path):
    tokens = byte_level_vocab()
    path = tmp_path / "models" / "tiny.gguf"
    path.parent.mkdir()
    return write_gguf(tiny_llama(len(tokens)), tokens, path)


@pytest.fixture
def loads(monkeypatch):
    """How many times transformers loads a model (the real load runs every time)."""
    calls = []
    original = transformers.AutoModel.from_pretrained.__func__

    def counting(cls, *args, **kwargs):
        calls.append(kwargs.get("gguf_file"))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", classmethod(counting))
    return calls


def embed(gguf_file, cache, rows=12):
    data = datasets.Dataset.from_dict({"text": [f"sentence number {i}" for i in range(rows)]})
    specs = [parse_encoder(f"{gguf_file}:{pooling}")[0] for pooling in ("mean", "last")]
    request = EmbedRequest(data, cache, batch_size=4, show_progress=False)
    return embed_encoders(specs, ["text", "text"], request)


def test_cached_views_of_a_gguf_encoder_load_nothing(gguf_file, tmp_path, loads):
    first = embed(gguf_file, tmp_path / "cache")
    assert len(loads) == 1 and len(list((tmp_path / "cache").glob("relrep-gguf-views-*"))) == 1
    again = embed(gguf_file, tmp_path / "cache")
    assert len(loads) == 1  # read from the cache, no load
    for one, other in zip(first, again, strict=True):
        assert (one.spec, one.provenance, one.extra) == (other.spec, other.provenance, other.extra)
        assert torch.equal(embeddings_tensor(one.dataset), embeddings_tensor(other.dataset))
        assert one.dataset.column_names == other.dataset.column_names


def test_another_file_version_or_other_rows_load_again(gguf_file, tmp_path, loads):
    embed(gguf_file, tmp_path / "cache")
    embed(gguf_file, tmp_path / "cache", rows=13)  # other rows
    assert len(loads) == 2
    os.utime(gguf_file, ns=(1, 1))  # the file replaced (another modification time)
    embed(gguf_file, tmp_path / "cache")
    assert len(loads) == 3


def test_a_broken_index_or_a_deleted_folder_is_a_miss(gguf_file, tmp_path, loads):
    cache = tmp_path / "cache"
    first = embed(gguf_file, cache)
    (index,) = cache.glob("relrep-gguf-views-*")
    good = index.read_text()
    index.write_text("{not json")
    embed(gguf_file, cache)
    assert len(loads) == 2 and index.read_text() == good  # loaded, index rewritten
    record = json.loads(good)["views"][0]
    for edited in ({**record, "spec": record["spec"][:3]}, {**record, "folder": "../elsewhere"}):
        index.write_text(json.dumps({"views": [edited, record]}))  # valid JSON, wrong shape
        embed(gguf_file, cache)
        assert index.read_text() == good  # a miss: loaded again, never an error
    assert len(loads) == 4
    folder = next(p for p in cache.iterdir() if p.name.startswith("relrep-embeddings-"))
    for file in folder.iterdir():
        file.unlink()
    folder.rmdir()
    again = embed(gguf_file, cache)
    assert len(loads) == 5  # the deleted view was extracted again
    for one, other in zip(first, again, strict=True):
        assert torch.equal(embeddings_tensor(one.dataset), embeddings_tensor(other.dataset))
