"""GGUF encoders: a tiny Llama and a tiny Gemma3 written to GGUF files (F32 and F16 tensors, see
tests/fixtures/gguf_models.py), loaded through `RelativeWrapper`, ``relrep-hf embed`` and onboarding.

The reference is the float32 transformers model the files were written from, run with the
tokenizer transformers rebuilds from the file: an F32 file must give the same relative features
(to 1e-5), an F16 file the same up to half precision's rounding of the weights.
"""

from __future__ import annotations

import json
import os
import shutil
import struct

import datasets
import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from relrep_hf import AnchorSet, RelativeProjector, RelativeWrapper, Statistics
from relrep_hf.cli import main
from relrep_hf.encoding.corpora import load_sentences
from relrep_hf.encoding.encoders import EncoderSpec
from relrep_hf.encoding.extraction import embeddings_tensor
from relrep_hf.encoding.gguf_encoders import (
    converted_gguf_folder,
    gguf_metadata_value,
    gguf_quantization,
    load_gguf_encoder,
    split_gguf_path,
)
from relrep_hf.encoding.packaged_encoders import smollm2_gguf_path
from tests.fixtures.gguf_models import (
    byte_level_vocab,
    sentencepiece_vocab,
    tiny_gemma3,
    tiny_llama,
    write_gguf,
)
from tests.fixtures.hub_encoders import run_forked_client
from tests.fixtures.hub_server import LocalHub

transformers.logging.set_verbosity_error()

ARCHS = ("llama", "gemma3")
NUM_ANCHORS = 12
ROWS = 240  # corpus rows for the run folder


@pytest.fixture(scope="module")
def texts():
    return list(load_sentences(ROWS)["text"])


@pytest.fixture(scope="module")
def models(tmp_path_factory, texts):
    """Per architecture: the float32 reference model, its folder of GGUF files, its tokenizer."""
    root = tmp_path_factory.mktemp("gguf")
    built = {}
    for arch in ARCHS:
        if arch == "llama":
            tokens = byte_level_vocab()
            model = tiny_llama(len(tokens))
        else:
            tokens = sentencepiece_vocab(texts)
            model = tiny_gemma3(len(tokens))
        folder = root / arch
        folder.mkdir()
        for dtype in ("F32", "F16"):
            write_gguf(model, tokens, folder / f"tiny-{arch}-{dtype}.gguf", dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=f"tiny-{arch}-F32.gguf")
        reference = root / f"{arch}-float32"  # the same model as a transformers folder
        model.save_pretrained(reference)
        tokenizer.save_pretrained(reference)
        built[arch] = {"model": model, "folder": folder, "tokenizer": tokenizer, "tokens": tokens,
                       "reference": reference}  # fmt: skip
    return built


def reference_projector(built: dict, texts: list[str]) -> RelativeProjector:
    """A WIP projector from the float32 model's last-token embeddings."""
    identity = RelativeProjector.from_statistics(
        torch.eye(32), None, similarity="inner", pooling="last"
    )
    pooled = RelativeWrapper(built["model"], identity, built["tokenizer"]).encode(texts)
    anchors = AnchorSet.random(texts[:48], num_anchors=NUM_ANCHORS, seed=0).anchors(pooled[:48])
    return RelativeProjector.from_statistics(
        anchors, Statistics.from_embeddings(pooled.double()), pooling="last"
    )


@pytest.mark.parametrize("arch", ARCHS)
def test_wrapper_on_gguf_equals_the_float32_model(models, texts, arch, tmp_path):
    built = models[arch]
    projector = reference_projector(built, texts)
    sample = texts[-40:]
    expected = RelativeWrapper(built["model"], projector, built["tokenizer"]).encode(sample)
    scale = expected.abs().max().item()
    for dtype, tolerance in (("F32", 1e-5), ("F16", 2e-2 * scale)):
        name = f"tiny-{arch}-{dtype}.gguf"
        wrapper = RelativeWrapper.from_pretrained(str(built["folder"]), projector, gguf_file=name)
        # the tokenizer came from the file: the folder holds nothing else
        assert sorted(p.name for p in built["folder"].iterdir()) == sorted(
            f"tiny-{arch}-{d}.gguf" for d in ("F16", "F32")
        )
        tokens = wrapper.tokenizer.convert_ids_to_tokens(list(range(len(built["tokens"]))))
        assert tokens == built["tokens"]
        relative = wrapper.encode(sample)
        difference = (relative - expected).abs().max().item()
        assert difference <= tolerance, (dtype, difference, scale)
        if dtype == "F16":
            assert difference > 0  # the half-precision weights were really used

        # provenance: file and quantisation in the saved config and card
        wrapper.save_pretrained(tmp_path / dtype)
        config = json.loads((tmp_path / dtype / "config.json").read_text())
        assert (config["encoder_gguf_file"], config["encoder_quantization"]) == (name, dtype)
        card = (tmp_path / dtype / "README.md").read_text()
        assert f"| quantisation | `{dtype}` |" in card and f'gguf_file="{name}"' in card


def test_gguf_mismatch_is_an_error(models, texts):
    built = models["llama"]
    projector = reference_projector(built, texts)
    projector.config.encoder_gguf_file = "tiny-llama-F16.gguf"
    projector.config.encoder_quantization = "F16"
    folder = str(built["folder"])
    with pytest.raises(ValueError, match="built on the encoder's GGUF file 'tiny-llama-F16.gguf'"):
        RelativeWrapper.from_pretrained(folder, projector, gguf_file="tiny-llama-F32.gguf")
    with pytest.warns(UserWarning, match="another quantisation embeds differently"):
        RelativeWrapper.from_pretrained(
            folder, projector, gguf_file="tiny-llama-F32.gguf", strict=False
        )
    assert RelativeWrapper.from_pretrained(folder, projector, gguf_file="tiny-llama-F16.gguf")


def test_quantization_is_read_from_the_file(models, tmp_path):
    folder = models["gemma3"]["folder"]
    assert gguf_quantization(str(folder / "tiny-gemma3-F16.gguf")) == "F16"
    assert gguf_quantization(str(folder / "tiny-gemma3-F32.gguf")) == "F32"
    # read once per file version: a file replaced at the same path is read again
    copy = tmp_path / "model.gguf"
    shutil.copyfile(folder / "tiny-gemma3-F16.gguf", copy)
    assert gguf_quantization(str(copy)) == "F16"
    shutil.copyfile(folder / "tiny-gemma3-F32.gguf", copy)
    os.utime(copy, ns=(1, 1))  # another modification time even on a coarse clock
    assert gguf_quantization(str(copy)) == "F32"


def test_the_header_scan_reads_every_scalar_as_ggufs_reader_does(models):
    import gguf

    for path in (models[kind]["folder"] / f"tiny-{kind}-F16.gguf" for kind in ("gemma3", "llama")):
        reader = gguf.GGUFReader(str(path))
        arrays = scalars = 0
        for name, field in reader.fields.items():
            if name.startswith("GGUF."):  # the reader's own entries, not metadata
                continue
            if field.types[0] == gguf.GGUFValueType.ARRAY:  # skipped, not returned
                arrays += 1
                assert gguf_metadata_value(str(path), name) is None
                continue
            scalars += 1
            assert gguf_metadata_value(str(path), name) == pytest.approx(field.contents()), name
        assert arrays and scalars  # the vocabulary's arrays stand before keys read after them
    assert gguf_metadata_value(str(path), "no.such.key") is None


def test_a_damaged_gguf_header_is_a_clear_error(models, tmp_path):
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes((models["gemma3"]["folder"] / "tiny-gemma3-F16.gguf").read_bytes()[:300])
    with pytest.raises(ValueError, match="truncated or corrupted GGUF file"):
        gguf_metadata_value(str(truncated), "no.such.key")
    huge = tmp_path / "huge.gguf"  # a key whose length is 2**62 bytes: refused, not allocated
    huge.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**62) + bytes(40))
    with pytest.raises(ValueError, match="truncated or corrupted GGUF file"):
        gguf_metadata_value(str(huge), "no.such.key")
    (tmp_path / "text.gguf").write_text("not a model")
    with pytest.raises(ValueError, match="is not a GGUF file"):
        gguf_quantization(str(tmp_path / "text.gguf"))


def test_spec_grammar(models):
    spec = EncoderSpec.parse("org/tiny-GGUF/sub/tiny.Q4_K_M.gguf@v1:last:-2")
    assert (spec.model_id, spec.gguf_file, spec.revision, spec.pooling, spec.layer) == (
        "org/tiny-GGUF",
        "sub/tiny.Q4_K_M.gguf",
        "v1",
        "last",
        -2,
    )
    assert str(spec) == "org/tiny-GGUF/sub/tiny.Q4_K_M.gguf@v1:last:-2"
    assert spec.name == "tiny.Q4_K_M-last-L-2"
    local = models["llama"]["folder"] / "tiny-llama-F16.gguf"
    spec = EncoderSpec.parse(f"{local}:last")
    assert (spec.model_id, spec.gguf_file) == (str(local.parent), "tiny-llama-F16.gguf")
    assert EncoderSpec.parse("gpt2:last").gguf_file is None
    with pytest.raises(ValueError, match="no such local file, and not a Hub path"):
        split_gguf_path(str(local.parent / "missing.gguf"))
    with pytest.raises(ValueError, match="no such local file, and not a Hub path"):
        split_gguf_path("model.gguf")


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_cli_embed_and_onboard_gguf(models, arch, tmp_path):
    """``relrep-hf embed`` of the F32 file gives the float32 model's embeddings; onboarding the
    F16 file gives the projector that onboarding the float32 model gives, to F16's rounding."""
    built = models[arch]
    f32, f16 = (f"{built['folder']}/tiny-{arch}-{d}.gguf:last" for d in ("F32", "F16"))
    run = tmp_path / "run"
    common = ["--limit", str(ROWS), "--test-size", "40", "--batch-size", "32"]
    assert main(["--quiet", "embed", str(run), "--encoder", f32, "--encoder",
                 f"{built['reference']}:last", *common]) == 0  # fmt: skip
    entries = json.loads((run / "run.json").read_text())["encoders"]
    gguf_entry, reference_entry = entries
    assert gguf_entry["encoder_gguf_file"] == f"tiny-{arch}-F32.gguf"
    assert gguf_entry["encoder_quantization"] == "F32"
    spaces = [
        embeddings_tensor(datasets.Dataset.from_file(str(run / e["embeddings"]))) for e in entries
    ]
    torch.testing.assert_close(spaces[0], spaces[1], atol=1e-5, rtol=0)

    fit = ["--num-anchors", str(NUM_ANCHORS), "--support-size", "48", "--num-train-epochs", "1"]
    fit = ["--method", "param", *fit]  # the paper's anchors, as the test of onboarding needs none
    assert main(["--quiet", "fit", str(run), "--held-out", reference_entry["name"], *fit]) == 0
    saved = RelativeProjector.from_pretrained(run / "projectors" / gguf_entry["name"])
    assert saved.config.encoder_gguf_file == f"tiny-{arch}-F32.gguf"
    assert main(["--quiet", "onboard", str(run), "--encoder", f16]) == 0
    name = EncoderSpec.parse(f16).name
    onboarded = RelativeProjector.from_pretrained(run / "projectors" / name)
    assert (onboarded.config.encoder_gguf_file, onboarded.config.encoder_quantization) == (
        f"tiny-{arch}-F16.gguf",
        "F16",
    )
    reference = RelativeProjector.from_pretrained(run / "projectors" / reference_entry["name"])
    sample = spaces[1][:64]
    expected = reference(sample)
    difference = (onboarded(sample) - expected).abs().max().item()
    assert 0 < difference <= 2e-2 * expected.abs().max().item()


HUB_CLIENT = r"""
import json, sys
from pathlib import Path
from huggingface_hub import HfApi
from safetensors.torch import save_file

from relrep_hf import RelativeWrapper
from relrep_hf.encoding.encoders import EncoderSpec, load_encoder

folder, projector, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
texts = json.loads(sys.argv[4])
HfApi().create_repo("tester/tiny-llama-GGUF", exist_ok=True)
HfApi().upload_folder(folder_path=str(folder), repo_id="tester/tiny-llama-GGUF")
wrapper = RelativeWrapper.from_pretrained(
    "tester/tiny-llama-GGUF", projector, gguf_file="tiny-llama-F16.gguf"
)
save_file({"relative": wrapper.encode(texts).contiguous()}, str(out / "relative.safetensors"))
wrapper.save_pretrained(out / "projector")
_, _, provenance = load_encoder(EncoderSpec.parse("tester/tiny-llama-GGUF/tiny-llama-F16.gguf:last"))
print(json.dumps(provenance))
"""


@pytest.mark.slow
def test_gguf_from_the_hub_records_repo_commit_file_and_quantisation(models, texts, tmp_path):
    built = models["llama"]
    projector = reference_projector(built, texts)
    projector.save_pretrained(tmp_path / "projector")
    sample = texts[-12:]
    local = RelativeWrapper.from_pretrained(
        str(built["folder"]), projector, gguf_file="tiny-llama-F16.gguf"
    ).encode(sample)
    with LocalHub() as hub:  # the client forked: a fresh interpreter's imports are not the case
        args = [
            str(built["folder"]),
            str(tmp_path / "projector"),
            str(tmp_path),
            json.dumps(sample),
        ]
        stdout = run_forked_client(hub, HUB_CLIENT, *args, home=tmp_path / "client", timeout=600)
        commit = hub.branch_head("tester/tiny-llama-GGUF")
    expected = {
        "encoder_id": "tester/tiny-llama-GGUF",
        "encoder_revision": commit,
        "encoder_gguf_file": "tiny-llama-F16.gguf",
        "encoder_quantization": "F16",
    }
    assert json.loads(stdout.strip().splitlines()[-1]) == expected
    saved = json.loads((tmp_path / "projector" / "config.json").read_text())
    assert {key: saved[key] for key in expected} == expected
    relative = load_file(tmp_path / "relative.safetensors")["relative"]
    torch.testing.assert_close(relative, local, atol=1e-6, rtol=0)


def hidden_states(model, tokenizer, sample: list[str]) -> list[torch.Tensor]:
    """Every layer's hidden states of each text, one text at a time (no padding)."""
    outputs = []
    with torch.no_grad():
        for text in sample:
            output = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True)
            outputs.append(torch.stack(output.hidden_states))  # (layers + 1, 1, T, d)
    return outputs


def assert_same_encoder(loaded, direct, sample: list[str], atol: float = 1e-6) -> None:
    """The same token ids, hidden states (to ``atol``), name and commit as the direct load."""
    (model, tokenizer), (direct_model, direct_tokenizer) = loaded, direct
    assert tokenizer(sample)["input_ids"] == direct_tokenizer(sample)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(list(range(len(direct_tokenizer)))) == (
        direct_tokenizer.convert_ids_to_tokens(list(range(len(direct_tokenizer))))
    )

    def name_and_commit(config):
        return config.name_or_path, getattr(config, "_commit_hash", None)

    assert name_and_commit(model.config) == name_and_commit(direct_model.config)
    assert not model.training
    pairs = zip(hidden_states(model, tokenizer, sample),
                hidden_states(direct_model, direct_tokenizer, sample), strict=True)  # fmt: skip
    for ours, theirs in pairs:
        torch.testing.assert_close(ours, theirs, atol=atol, rtol=0)


@pytest.mark.parametrize("dtype", ["F32", "F16"])
def test_a_gguf_file_is_converted_once_and_loads_the_same(
    models, texts, dtype, tmp_path, monkeypatch
):
    """The first load converts and saves a transformers folder, parsing the file once where
    transformers' own load parses it for the config, the tokenizer and the weights; the second
    reads the folder (no GGUF quantizer left on the model): both equal transformers' own load."""
    import gguf

    parsed = []  # the path of every GGUFReader made

    class CountedReader(gguf.GGUFReader):
        def __init__(self, path, *args, **kwargs):
            parsed.append(os.path.basename(path))
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", CountedReader)
    mapped = []  # the (architecture, depth) of every tensor-name map built

    def counted_names(arch, n_blocks):
        mapped.append((arch, n_blocks))
        return gguf.TensorNameMap(arch, n_blocks)

    monkeypatch.setattr(gguf, "get_tensor_name_map", counted_names)
    built = models["llama"]
    source, name = str(built["folder"]), f"tiny-llama-{dtype}.gguf"
    direct = (AutoModel.from_pretrained(source, gguf_file=name),
              AutoTokenizer.from_pretrained(source, gguf_file=name))  # fmt: skip
    assert len(parsed) >= 3, parsed  # why: transformers' own load parses again and again
    assert len(mapped) > 1, mapped  # and builds the names' map again for every submodule
    sample = texts[:6]
    parsed.clear(), mapped.clear()
    first = load_gguf_encoder(source, name, cache_dir=tmp_path)
    assert parsed == [name]  # one parse for the config, the tokenizer and the weights
    assert len(mapped) == 1  # one map of the weights' names
    assert gguf.GGUFReader is CountedReader  # put back as it was
    assert gguf.get_tensor_name_map is counted_names
    folder = converted_gguf_folder(os.path.join(source, name), tmp_path)
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # no staging left
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    assert first[0].hf_quantizer is not None  # this load came from the file itself
    second = load_gguf_encoder(source, name, cache_dir=tmp_path)
    assert getattr(second[0], "hf_quantizer", None) is None  # read from the converted folder
    for loaded in (first, second):
        assert_same_encoder(loaded, direct, sample)


def test_a_changed_gguf_file_is_converted_again(models, tmp_path):
    built = models["llama"]
    copy = tmp_path / "model.gguf"
    shutil.copy(built["folder"] / "tiny-llama-F32.gguf", copy)
    before = converted_gguf_folder(str(copy), tmp_path / "cache")
    shutil.copy(built["folder"] / "tiny-llama-F16.gguf", copy)  # another file at the same path
    assert converted_gguf_folder(str(copy), tmp_path / "cache") != before


def test_a_damaged_converted_folder_is_rebuilt(models, texts, tmp_path, caplog):
    """Bad input: a converted folder whose weights are cut short is converted again, with a
    warning, and the load equals transformers' own."""
    built = models["llama"]
    source, name = str(built["folder"]), "tiny-llama-F32.gguf"
    load_gguf_encoder(source, name, cache_dir=tmp_path)
    folder = converted_gguf_folder(os.path.join(source, name), tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with caplog.at_level("WARNING", logger="relrep_hf.encoding.gguf_encoders"):
        loaded = load_gguf_encoder(source, name, cache_dir=tmp_path)
    assert "Converting" in caplog.text and "does not load" in caplog.text
    direct = (AutoModel.from_pretrained(source, gguf_file=name),
              AutoTokenizer.from_pretrained(source, gguf_file=name))  # fmt: skip
    assert_same_encoder(loaded, direct, texts[:4])
    assert (
        getattr(load_gguf_encoder(source, name, cache_dir=tmp_path)[0], "hf_quantizer", None)
        is None
    )


@pytest.mark.slow
def test_the_packaged_smollm2_converted_equals_transformers_gguf_load(texts, tmp_path):
    """The packaged SmolLM2-135M Q4_1 file: the converted folder's embeddings equal transformers'
    own GGUF load's to 1e-6 on a few texts. The first `load_gguf_encoder` is that load
    (``AutoModel`` / ``AutoTokenizer.from_pretrained(folder, gguf_file=...)``: its GGUF quantizer
    is on the model, and the package's folder holds no tokenizer to fall back on), so it is the
    reference: one GGUF load in the test, not two (the test took 58 s of CPU with two, 38 s). The
    tiny Llama's test above compares both loads with a separate direct load."""
    pytest.importorskip("gguf")
    path = smollm2_gguf_path()
    source, name = os.path.split(path)
    assert not any(n.startswith("tokenizer") for n in os.listdir(source))  # no fallback there
    direct = load_gguf_encoder(source, name, cache_dir=tmp_path)  # converts
    assert direct[0].hf_quantizer is not None  # transformers' GGUF load itself
    assert (direct[0].config._name_or_path, direct[0].config._commit_hash) == (source, None)
    loaded = load_gguf_encoder(source, name, cache_dir=tmp_path)
    assert getattr(loaded[0], "hf_quantizer", None) is None
    assert_same_encoder(loaded, direct, texts[:3])
