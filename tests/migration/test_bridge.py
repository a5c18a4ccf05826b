"""The bridge inside a real `SentenceTransformer`: two tiny BERTs of different widths (built from
configs, with MiniLM's tokenizer) stand for the old encoder (24-d, the index's) and the new one
(16-d). The bridge's map is fitted from the new model's encode output to the old one's; appended
to the new model, ``encode`` must give exactly ``map(new.encode(texts))``, 24-d, before and
after ``save`` / ``SentenceTransformer(folder)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Transformer
from sentence_transformers.sentence_transformer.modules import Pooling
from transformers import AutoTokenizer, BertConfig, BertModel

from relrep_hf.encoding.corpora import load_sentences
from relrep_hf.migration.bridge import (
    Bridge,
    BridgeError,
    append_bridge,
    bridge_embeddings,
    fit_bridge,
    save_bridged_model,
)
from relrep_hf.migration.map import MIGRATION_MAP_FILE, MigrationMap
from relrep_hf.utils.manifest import CorruptedArtifactError
from tests.fixtures.minilm import MODEL_PATH

transformers.logging.set_verbosity_error()
pytestmark = pytest.mark.usefixtures("one_torch_thread")

OLD_DIM, NEW_DIM = 24, 16
FIT_ROWS = 160


def tiny_sentence_transformer(folder: Path, width: int, seed: int) -> SentenceTransformer:
    """A one-layer BERT of ``width`` (random weights, MiniLM's tokenizer) saved to ``folder``,
    as [Transformer, Pooling(mean)]."""
    tokenizer = AutoTokenizer.from_pretrained(MODEL_PATH)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=width, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=2 * width,
                        max_position_embeddings=128)  # fmt: skip
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    transformer = Transformer(str(folder), max_seq_length=64)
    return SentenceTransformer(modules=[transformer, Pooling(width, "mean")], device="cpu")


@pytest.fixture(scope="module")
def texts():
    return list(load_sentences(FIT_ROWS + 24)["text"])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoders")
    return {
        "old": tiny_sentence_transformer(root / "old", OLD_DIM, seed=0),
        "new": tiny_sentence_transformer(root / "new", NEW_DIM, seed=1),
    }


@pytest.fixture(scope="module")
def bridge_map(models, texts):
    rows = {name: m.encode(texts[:FIT_ROWS], convert_to_tensor=True) for name, m in models.items()}
    return fit_bridge(rows["new"], rows["old"], source_name="new", target_name="old")


def test_fit_bridge_maps_new_into_old_and_scores_queries(bridge_map):
    assert (bridge_map.in_features, bridge_map.out_features) == (NEW_DIM, OLD_DIM)
    assert bridge_map.info["direction"] == "queries"
    assert (bridge_map.info["source"], bridge_map.info["target"]) == ("new", "old")


def test_encode_lands_in_the_old_space_and_round_trips_save(models, bridge_map, texts, tmp_path):
    sample = texts[FIT_ROWS:]  # not among the fitted rows
    new = models["new"]
    expected = bridge_map(new.encode(sample, convert_to_tensor=True))
    bridged = SentenceTransformer(modules=[*new, Bridge(bridge_map)], device="cpu")
    assert bridged.get_embedding_dimension() == OLD_DIM
    out = bridged.encode(sample, convert_to_tensor=True)
    assert out.shape == (len(sample), OLD_DIM)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)

    folder = save_bridged_model(bridged, tmp_path / "bridged")
    modules = json.loads((folder / "modules.json").read_text())
    assert modules[-1]["type"] == "relrep_hf.migration.bridge.Bridge"
    module_folder = folder / modules[-1]["path"]
    assert json.loads((module_folder / "bridge.json").read_text()) == {
        "module_input_name": "sentence_embedding",
        "module_output_name": "sentence_embedding",
    }
    # only the map's tensors in the module's folder, never the encoder's
    assert set(load_file(module_folder / MIGRATION_MAP_FILE)) == {"weight", "bias"}
    assert sorted(p.name for p in module_folder.iterdir()) == [
        "README.md", "bridge.json", "manifest.json", MIGRATION_MAP_FILE
    ]  # fmt: skip
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # no lock left
    # the module's folder is a migration map of its own
    torch.testing.assert_close(
        MigrationMap.from_pretrained(module_folder).weight, bridge_map.weight
    )

    loaded = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    assert isinstance(loaded[-1], Bridge)
    torch.testing.assert_close(loaded.encode(sample, convert_to_tensor=True), expected, atol=1e-5, rtol=0)  # fmt: skip


def test_append_bridge_takes_a_saved_map_and_refuses_a_second_bridge(models, bridge_map, tmp_path):
    bridge_map.save_pretrained(tmp_path / "map")
    model = append_bridge(
        SentenceTransformer(modules=[*models["new"]], device="cpu"), tmp_path / "map"
    )
    assert isinstance(model[-1], Bridge) and model.get_embedding_dimension() == OLD_DIM
    with pytest.raises(BridgeError, match="already has a Bridge"):
        append_bridge(model, bridge_map)
    double = MigrationMap(bridge_map.weight.double(), bridge_map.bias.double())
    model = append_bridge(SentenceTransformer(modules=[*models["new"]], device="cpu"), double)
    assert model[-1].migration_map.weight.dtype == torch.float32  # stored in the model's dtype
    assert double.weight.dtype == torch.float64  # and the caller's map left as it was
    with pytest.raises(BridgeError, match="holds a MigrationMap, got str"):
        Bridge("me/new-to-old")
    with pytest.raises(BridgeError, match="safetensors only"):
        model[-1].save(str(tmp_path / "unsafe"), safe_serialization=False)


def test_a_map_fitted_on_another_model_is_refused(models, bridge_map):
    reverse = MigrationMap(bridge_map.weight.T.contiguous(), torch.zeros(NEW_DIM))  # 24-d -> 16-d
    with pytest.raises(
        BridgeError, match="takes 24-d embeddings but the model's encode gives 16-d"
    ):
        append_bridge(SentenceTransformer(modules=[*models["new"]], device="cpu"), reverse)
    with pytest.raises(BridgeError, match="takes 24-d embeddings"):
        Bridge(reverse)({"sentence_embedding": torch.ones(2, NEW_DIM)})


def test_a_corrupted_map_file_is_refused_on_load(models, bridge_map, tmp_path):
    bridged = SentenceTransformer(modules=[*models["new"], Bridge(bridge_map)], device="cpu")
    folder = save_bridged_model(bridged, tmp_path / "bridged")
    module = folder / json.loads((folder / "modules.json").read_text())[-1]["path"]
    data = bytearray((module / MIGRATION_MAP_FILE).read_bytes())
    data[-3] ^= 0x01  # inside the tensors' data: the header still parses, the floats change
    (module / MIGRATION_MAP_FILE).write_bytes(bytes(data))
    with pytest.raises(CorruptedArtifactError, match="does not match the sha256 digest"):
        SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")


def test_out_with_user_files_is_refused_and_left_alone(models, bridge_map, tmp_path):
    bridged = SentenceTransformer(modules=[*models["new"], Bridge(bridge_map)], device="cpu")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(BridgeError, match="no sentence-transformers model"):
        save_bridged_model(bridged, tmp_path / "mine")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    # a sentence-transformers folder (a previous bridged model) is replaced whole
    save_bridged_model(models["new"], tmp_path / "st")
    save_bridged_model(bridged, tmp_path / "st")
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert modules[-1]["type"] == "relrep_hf.migration.bridge.Bridge"


def test_applied_in_the_embeddings_dtype_on_their_device(device):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    bias = torch.randn(3, generator=generator, dtype=torch.float64)
    bridge = Bridge(MigrationMap(weight, bias)).to(device)  # buffers move with .to()
    embeddings = torch.randn(5, 4, generator=generator).to(device)  # float32
    out = bridge({"sentence_embedding": embeddings})["sentence_embedding"]
    assert out.dtype == torch.float32 and out.device.type == device.type
    expected = embeddings.double() @ weight.to(device) + bias.to(device)  # float64 reference
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=0)
    assert bridge.migration_map.weight.dtype == torch.float64  # the map itself is kept


def test_non_finite_outputs_raise():
    bridge_map = MigrationMap(torch.full((4, 3), 1e4), torch.zeros(3))
    with pytest.raises(BridgeError, match="too narrow for the map"):
        bridge_embeddings(bridge_map, torch.full((2, 4), 10.0, dtype=torch.float16))
    nan = torch.ones(2, 4)
    nan[1, 2] = float("nan")
    with pytest.raises(BridgeError, match="already hold NaN"):
        bridge_embeddings(bridge_map, nan)
