"""The quality benchmark's small LMs (``benchmarks/small_lms.py``): quick-mode training gives
models that load through the Auto classes and learned something, and the cache is reused."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from benchmarks.spaces.lm_text import training_paragraphs
from benchmarks.spaces.small_lms import QUICK_MODELS, ensure_small_lms, read_record
from relrep_hf.encoding.corpora import load_sentences

# every test reads the session's trained small LMs (minutes to train on a shared machine)
pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]


def test_quick_models_load_through_auto_classes_and_learned(quick_lms):
    _, folders = quick_lms
    assert list(folders) == [spec.name for spec in QUICK_MODELS]
    kinds, vocabs = set(), set()
    for spec in QUICK_MODELS:
        folder = folders[spec.name]
        model = AutoModel.from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        kinds.add(model.config.model_type)
        vocabs.add(len(tokenizer))
        assert len(tokenizer) == model.config.vocab_size == spec.vocab_size
        batch = tokenizer(["The function returns a new list of values."], return_tensors="pt")
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state
        assert hidden.shape == (1, batch["input_ids"].shape[1], spec.width)
        assert torch.isfinite(hidden).all()
        record = read_record(folder)
        # Learned something: the training loss and the held-out perplexity both went down.
        assert record["final_loss"] < record["first_loss"] - 0.3, record
        assert record["held_out_perplexity"] < 0.8 * record["initial_held_out_perplexity"], record
    assert kinds == {"gpt2", "llama"}
    assert len(vocabs) == len(QUICK_MODELS)  # each model has its own tokenizer


def test_second_call_reuses_the_cache(quick_lms):
    cache, folders = quick_lms
    weights = {name: folder / "model.safetensors" for name, folder in folders.items()}
    before = {name: path.stat().st_mtime_ns for name, path in weights.items()}
    again = ensure_small_lms(quick=True, cache_dir=cache, progress=False)
    assert again == folders
    assert {name: path.stat().st_mtime_ns for name, path in weights.items()} == before
    assert sorted(p.name for p in cache.iterdir()) == sorted(f.name for f in folders.values())


def test_training_text_holds_no_evaluation_sentence():
    held_out = load_sentences()["text"]
    paragraphs = training_paragraphs(("huggingface_hub",), exclude=held_out, max_chars=100_000)
    assert sum(map(len, paragraphs)) >= 100_000
    text = "\n".join(paragraphs)
    assert not [s for s in held_out[:500] if s in text]
    assert len(set(paragraphs)) == len(paragraphs)


def test_the_command_reads_the_cached_models_and_prints_their_records(quick_lms, capsys):
    from benchmarks.__main__ import main

    cache, folders = quick_lms
    main(["small_lms", "--quick", "--cache-dir", str(cache), "--json"])
    out = capsys.readouterr().out
    assert all(str(folder) in out for folder in folders.values())
    assert out.count('"final_loss"') == len(QUICK_MODELS)
