"""`RelativeProjection` inside a real `SentenceTransformer` (the pretrained MiniLM).

The module's ``encode`` output must equal `RelativeWrapper.encode` of the same projector on the
same texts, before and after ``model.save`` / ``SentenceTransformer(path)``, and after
``model.push_to_hub`` / ``SentenceTransformer(repo)`` against the local Hub server (from a
process forked from this one and pointed at the server, not from this one: the server's
thread would share this process's GIL with a MiniLM-sized upload).
"""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Transformer
from sentence_transformers.sentence_transformer.modules import Pooling
from transformers import AutoModel

from relrep_hf import AnchorSet, RelativeProjector, RelativeWrapper
from relrep_hf.encoding.corpora import load_sentences
from relrep_hf.models.sentence_transformers_module import (
    RelativeProjection,
    add_relative_projection,
    projector_from_sentence_transformer,
)
from tests.fixtures.hub_encoders import run_forked_client
from tests.fixtures.hub_server import LocalHub
from tests.fixtures.minilm import MODEL_PATH

transformers.logging.set_verbosity_error()

NUM_ANCHORS = 24
SUPPORT_SIZE = 64

# the real MiniLM through sentence-transformers in every test
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def texts():
    return list(load_sentences(400)["text"])


@pytest.fixture(scope="module")
def anchor_set(texts):
    generator = torch.Generator().manual_seed(0)
    mixture = torch.softmax(3 * torch.randn(NUM_ANCHORS, SUPPORT_SIZE, generator=generator), 1)
    return AnchorSet(mixture, texts[:SUPPORT_SIZE], strategy="param")  # a stochastic mixture


def mean_pooled_minilm() -> SentenceTransformer:
    """MiniLM as [Transformer, Pooling(mean)]: what `RelativeWrapper` with pooling="mean" runs."""
    transformer = Transformer(MODEL_PATH)
    pooling = Pooling(transformer.get_embedding_dimension(), "mean")
    return SentenceTransformer(modules=[transformer, pooling], device="cpu")


@pytest.fixture(scope="module")
def relative_model(texts, anchor_set):
    """Mean-pooled MiniLM onboarded from its own encode, with the relative module appended."""
    model = mean_pooled_minilm()
    projector = projector_from_sentence_transformer(
        model, anchor_set, texts[SUPPORT_SIZE:], encoder_id="sentence-transformers/all-MiniLM-L6-v2"
    )
    return add_relative_projection(model, projector)


def wrapper_features(projector: RelativeProjector, texts: list[str]) -> torch.Tensor:
    """`RelativeWrapper.encode` in one batch, as the ST encodes below: BERT's float32 output
    moves by ~1e-6 with the padding of the batch a text lands in, and whitening amplifies it."""
    return RelativeWrapper.from_pretrained(MODEL_PATH, projector).encode(texts, batch_size=64)


def test_onboarding_records_pooling_and_id(relative_model):
    config = relative_model[-1].projector.config
    assert (config.pooling, config.layer) == ("mean", -1)
    assert config.encoder_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert config.num_anchors == NUM_ANCHORS and config.hidden_size == 384
    assert relative_model.get_embedding_dimension() == NUM_ANCHORS


def test_encode_equals_wrapper_and_round_trips_save(relative_model, texts, tmp_path):
    sample = texts[-48:]  # never used to build the projector
    projector = relative_model[-1].projector
    expected = wrapper_features(projector, sample)
    relative = relative_model.encode(sample, convert_to_tensor=True, batch_size=64)
    assert relative.shape == (48, NUM_ANCHORS)
    torch.testing.assert_close(relative, expected, atol=1e-5, rtol=0)

    relative_model.save(str(tmp_path / "st"))
    module_folder = tmp_path / "st" / "2_RelativeProjection"
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert modules[-1]["type"] == "relrep_hf.models.sentence_transformers_module.RelativeProjection"
    assert json.loads((module_folder / "relative_projection.json").read_text()) == {
        "module_input_name": "sentence_embedding",
        "module_output_name": "sentence_embedding",
    }
    # only the projector's tensors in the module folder, never the encoder's
    assert set(load_file(module_folder / "model.safetensors")) == {
        "mean",
        "whitening",
        "anchors",
        "weight",
        "bias",
    }
    # the module folder is a projector repo of its own
    assert isinstance(AutoModel.from_pretrained(module_folder), RelativeProjector)

    loaded = SentenceTransformer(str(tmp_path / "st"), trust_remote_code=True, device="cpu")
    assert isinstance(loaded[-1], RelativeProjection)
    torch.testing.assert_close(
        loaded.encode(sample, convert_to_tensor=True, batch_size=64), expected, atol=1e-5, rtol=0
    )
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        SentenceTransformer(str(tmp_path / "st"), device="cpu")  # ST 6's rule for outside code


def test_onboarding_through_normalize_uses_normalized_embeddings(texts, anchor_set, tmp_path):
    """The packaged model ends in Normalize: the projector must describe unit vectors."""
    model = SentenceTransformer(MODEL_PATH, device="cpu")
    assert type(model[-1]).__name__ == "Normalize"
    one_hot = AnchorSet.random(texts[:SUPPORT_SIZE], num_anchors=NUM_ANCHORS, seed=0)
    projector = projector_from_sentence_transformer(model, one_hot, texts[SUPPORT_SIZE:])
    # one-hot anchors are support embeddings: unit rows only if taken after Normalize
    norms = projector.anchors.double().norm(dim=1)
    torch.testing.assert_close(norms, torch.ones_like(norms), atol=1e-5, rtol=0)
    # the pooling is recorded and the Normalize read off the statistics: the wrapper applies both
    assert (projector.config.pooling, projector.config.normalized_embeddings) == ("mean", True)
    add_relative_projection(model, projector)

    sample = texts[-16:]
    wrapped = RelativeWrapper.from_pretrained(MODEL_PATH, projector).encode(
        sample, return_pooled=True
    )
    norms = wrapped.pooled.double().norm(dim=1)  # normalised by the wrapper, as by Normalize
    torch.testing.assert_close(norms, torch.ones_like(norms), atol=1e-5, rtol=0)
    expected = projector(wrapped.pooled)
    relative = model.encode(sample, convert_to_tensor=True)
    torch.testing.assert_close(relative, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(wrapped.relative, expected, atol=1e-5, rtol=0)
    # the saved card describes the model's real output, not the card it was loaded with
    model.save(str(tmp_path / "saved"))
    card = (tmp_path / "saved" / "README.md").read_text()
    assert f"{NUM_ANCHORS}-dimensional" in card and "384 dimensional" not in card
    # a projector built on the unnormalised embeddings would not give these features
    unnormalized = projector_from_sentence_transformer(
        mean_pooled_minilm(), one_hot, texts[SUPPORT_SIZE:]
    )
    assert (unnormalized(wrapped.pooled) - expected).abs().max() > 1e-2


PUSH_AND_PULL = r"""
import sys
from pathlib import Path
import torch
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformer

import relrep_hf.models.sentence_transformers_module  # noqa: F401 (the only relrep_hf line)

saved, texts_file, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
texts = texts_file.read_text().splitlines()
model = SentenceTransformer(str(saved), trust_remote_code=True, device="cpu")
model.push_to_hub("tester/minilm-relative", exist_ok=True)
pulled = SentenceTransformer("tester/minilm-relative", trust_remote_code=True, device="cpu")
save_file({"relative": pulled.encode(texts, convert_to_tensor=True).contiguous()}, str(out))
print("pulled ok")
"""


@pytest.mark.slow
def test_push_to_hub_and_pull(relative_model, texts, tmp_path):
    sample = texts[-24:]
    expected = wrapper_features(relative_model[-1].projector, sample)
    relative_model.save(str(tmp_path / "st"))
    (tmp_path / "texts.txt").write_text("\n".join(sample))
    with LocalHub() as hub:
        args = [tmp_path / "st", tmp_path / "texts.txt", tmp_path / "pulled.safetensors"]
        home = tmp_path / "client"
        stdout = run_forked_client(hub, PUSH_AND_PULL, *args, home=home, timeout=600)
        assert "pulled ok" in stdout
        repo = hub.server.repo("tester/minilm-relative")
        files = set(repo.resolve("main").files)
    assert {"modules.json", "2_RelativeProjection/relative_projection.json"} <= files
    pulled = load_file(tmp_path / "pulled.safetensors")["relative"]
    torch.testing.assert_close(pulled, expected, atol=1e-5, rtol=0)


def test_bad_inputs(relative_model, anchor_set, tmp_path):
    with pytest.raises(ValueError, match="Expected a RelativeProjector"):
        RelativeProjection("org/projector")
    projector = relative_model[-1].projector
    with pytest.raises(ValueError, match="already has a RelativeProjection"):
        add_relative_projection(relative_model, projector)
    with pytest.raises(ValueError, match="already has a RelativeProjection"):
        projector_from_sentence_transformer(relative_model, anchor_set, ["a", "b"])
    small = RelativeProjector.from_statistics(torch.eye(4, dtype=torch.float64), None,
                                              similarity="inner")  # fmt: skip
    with pytest.raises(ValueError, match="takes 4-dimensional embeddings but"):
        add_relative_projection(mean_pooled_minilm(), small)
    references = AnchorSet(torch.full((1, 2), 0.5), [{"index": 0}, {"index": 1}])
    with pytest.raises(ValueError, match="not texts"):
        projector_from_sentence_transformer(mean_pooled_minilm(), references, ["a", "b"])
    with pytest.raises(ValueError, match="safetensors only"):
        RelativeProjection(projector).save(str(tmp_path / "m"), safe_serialization=False)
    RelativeProjection(projector).save(str(tmp_path / "m"))
    config = tmp_path / "m" / "relative_projection.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "scale": 2}))
    with pytest.raises(ValueError, match=r"unknown keys \['scale'\]"):
        RelativeProjection.load(str(tmp_path / "m"))


@pytest.mark.parametrize(
    "old_path",
    [
        "relrep_hf.sentence_transformers_module",  # before the package had layers
        "relrep_hf.training.sentence_transformers_module",  # before it joined models/
    ],
)
def test_a_save_that_names_the_modules_old_path_still_loads(
    relative_model, texts, tmp_path, old_path
):
    """Saves name the module's import path in modules.json; each path it had still imports it
    (a re-export), so folders saved then load."""
    from sentence_transformers import SentenceTransformer

    relative_model.save(str(tmp_path / "st"))
    index = tmp_path / "st" / "modules.json"
    modules = json.loads(index.read_text())
    modules[-1]["type"] = f"{old_path}.RelativeProjection"
    index.write_text(json.dumps(modules))
    loaded = SentenceTransformer(str(tmp_path / "st"), trust_remote_code=True, device="cpu")
    sample = texts[-8:]
    torch.testing.assert_close(
        loaded.encode(sample, convert_to_tensor=True),
        relative_model.encode(sample, convert_to_tensor=True),
        atol=1e-6,
        rtol=0,
    )
