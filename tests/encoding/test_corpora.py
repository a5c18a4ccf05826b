"""Tests for relrep_hf.encoding.corpora: the packaged real sentences and the template generator."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import datasets
import pytest

from relrep_hf.encoding import corpora

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "make_sentences.py"
LABELS = ["concurrency", "files", "network", "numbers", "text"]


def _raw_rows() -> list[dict[str, str]]:
    path = resources.files("relrep_hf").joinpath("data").joinpath("sentences.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- packaged data


def test_data_file_is_small_and_well_formed():
    path = resources.files("relrep_hf").joinpath("data").joinpath("sentences.jsonl")
    assert len(path.read_bytes()) < 1_500_000
    rows = _raw_rows()
    assert all(set(row) == {"text", "label", "source"} for row in rows)
    assert all(isinstance(value, str) and value for row in rows for value in row.values())


def test_counts_and_label_balance():
    counts = Counter(row["label"] for row in _raw_rows())
    assert sorted(counts) == LABELS
    assert sum(counts.values()) >= 3000
    assert min(counts.values()) >= 300
    assert max(counts.values()) <= 2 * min(counts.values())


def test_readme_counts_match_the_file():
    readme = resources.files("relrep_hf").joinpath("data").joinpath("README.md").read_text("utf-8")
    counts = Counter(row["label"] for row in _raw_rows())
    for label, count in counts.items():
        assert f"| `{label}` | {count} |" in readme
    assert f"**{sum(counts.values())}**" in readme
    assert "Python Software Foundation License" in readme


def test_no_duplicates_case_insensitive():
    texts = [row["text"].lower() for row in _raw_rows()]
    assert len(texts) == len(set(texts))


def test_every_sentence_is_prose():
    """An independent check of the prose criteria (not the script's own filter)."""
    for row in _raw_rows():
        text = row["text"]
        words = text.split()
        assert text[0].isupper() and text.endswith("."), text
        assert 6 <= len(words) <= 40, text
        assert not re.search(r">>>|`|::|https?://|www\.", text), text
        assert not re.search(r":(func|meth|class|mod|attr|data|exc|const|ref|pep|rfc):", text)
        assert not re.search(r"[{}\[\]<>=|\\#$@_*]", text), text
        assert sum(ch.isalpha() or ch == " " for ch in text) / len(text) >= 0.9, text
        assert text == " ".join(words), text  # no stray whitespace or newlines


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the repository's scripts/")
def test_every_sentence_passes_the_script_filter():
    spec = importlib.util.spec_from_file_location("make_sentences", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rejected = [row["text"] for row in _raw_rows() if not module.is_prose(row["text"])]
    assert rejected == []
    assert module.is_prose("Return the number of items in the queue right now.")
    assert not module.is_prose(">>> import os")
    assert not module.is_prose("Return os.path.join(a, b) for the given pieces of the path.")
    assert not module.is_prose("See https://example.org for the full list of options here.")
    assert not module.is_prose("too short.")


@pytest.mark.slow
def test_script_is_deterministic_and_reproduces_the_file(tmp_path):
    """Re-running the script on the recorded Python version gives the packaged file again."""
    if not SCRIPT.exists():
        pytest.skip("needs the repository's scripts/")
    readme = resources.files("relrep_hf").joinpath("data").joinpath("README.md").read_text("utf-8")
    recorded = re.search(r"made\s+with Python (\d+\.\d+\.\d+)", readme)
    assert recorded is not None
    running = ".".join(map(str, sys.version_info[:3]))
    if recorded.group(1) != running:
        pytest.skip(f"data made with Python {recorded.group(1)}, running {running}")
    subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    packaged = resources.files("relrep_hf").joinpath("data")
    for name in ("sentences.jsonl", "README.md"):
        assert (tmp_path / name).read_bytes() == packaged.joinpath(name).read_bytes(), name


# --------------------------------------------------------------------------- load_sentences


def test_load_sentences_returns_dataset_with_classlabel():
    ds = corpora.load_sentences()
    assert isinstance(ds, datasets.Dataset)
    assert ds.column_names == ["text", "label", "source"]
    assert isinstance(ds.features["label"], datasets.ClassLabel)
    assert ds.features["label"].names == LABELS == corpora.sentence_labels()
    rows = _raw_rows()
    assert len(ds) == len(rows)
    assert ds[0]["text"] == rows[0]["text"]
    assert ds.features["label"].int2str(ds[0]["label"]) == rows[0]["label"]
    assert ds[0]["source"] == rows[0]["source"]


def test_load_sentences_first_n_rows_cover_all_labels():
    ds = corpora.load_sentences(200)
    assert len(ds) == 200
    assert ds["text"] == [row["text"] for row in _raw_rows()[:200]]
    assert set(ds["label"]) == set(range(len(LABELS)))


def test_load_sentences_label_subset():
    ds = corpora.load_sentences(50, labels=["text", "numbers"])
    assert ds.features["label"].names == ["text", "numbers"]
    assert len(ds) == 50
    assert set(ds["label"]) <= {0, 1}
    expected = [row["text"] for row in _raw_rows() if row["label"] in ("text", "numbers")][:50]
    assert ds["text"] == expected
    names = [ds.features["label"].int2str(i) for i in ds["label"]]
    by_text = {row["text"]: row["label"] for row in _raw_rows()}
    assert names == [by_text[text] for text in ds["text"]]


def test_load_sentences_errors():
    total = len(_raw_rows())
    with pytest.raises(ValueError, match=f"only {total}"):
        corpora.load_sentences(total + 1)
    with pytest.raises(ValueError, match=">= 0"):
        corpora.load_sentences(-1)
    with pytest.raises(ValueError, match="Unknown labels"):
        corpora.load_sentences(labels=["text", "poetry"])
    with pytest.raises(ValueError, match="repeat"):
        corpora.load_sentences(labels=["text", "text"])
    with pytest.raises(ValueError, match="at least one"):
        corpora.load_sentences(labels=[])
    with pytest.raises(TypeError):
        corpora.load_sentences(labels="text")
    with pytest.raises(TypeError):
        corpora.load_sentences(2.5)
    only_text = sum(row["label"] == "text" for row in _raw_rows())
    with pytest.raises(ValueError, match=f"only {only_text}"):
        corpora.load_sentences(only_text + 1, labels=["text"])
    assert len(corpora.load_sentences(0)) == 0


# --------------------------------------------------------------------------- templates


def test_template_default_is_3300_distinct_sentences():
    sentences = corpora.template_sentences()
    assert len(sentences) == 3300
    assert len(set(sentences)) == 3300
    for sentence in sentences:
        assert sentence[0].isupper() and sentence[-1] in ".?", sentence
        assert "  " not in sentence and "{" not in sentence, sentence
        assert not re.search(r"\ba [aeiou]|\ban [^aeiou]", sentence), sentence


def test_template_generation_is_deterministic_per_seed():
    assert corpora.template_sentences(500, seed=3) == corpora.template_sentences(500, seed=3)
    assert corpora.template_sentences(500, seed=3) != corpora.template_sentences(500, seed=4)
    assert corpora.template_sentences() == corpora.template_sentences(3300, seed=0)
    assert corpora.template_sentences(0) == []


def _template_patterns() -> list[re.Pattern[str]]:
    """One regex per template, each slot matching exactly its word list."""

    def slot(match: re.Match[str]) -> str:
        field = match.group(1)
        words = corpora._SLOTS[field.lower().removeprefix("a_")]
        if field.startswith("a_"):
            words = [("an " if w[0] in "aeiou" else "a ") + w for w in words]
        if field[0].isupper():
            words = [w[0].upper() + w[1:] for w in words]
        return "(?:" + "|".join(re.escape(w) for w in words) + ")"

    return [
        re.compile(re.sub(r"\\\{(\w+)\\\}", slot, re.escape(template)) + "$")
        for template in corpora.TEMPLATES
    ]


def test_every_sentence_matches_exactly_one_template_and_templates_are_used_evenly():
    patterns = _template_patterns()
    counts = Counter()
    for sentence in corpora.template_sentences(1200, seed=1):
        matches = [i for i, p in enumerate(patterns) if p.match(sentence)]
        assert len(matches) == 1, (sentence, matches)
        counts[matches[0]] += 1
    assert counts == dict.fromkeys(range(len(corpora.TEMPLATES)), 100)


def test_template_sentences_stay_distinct_at_scale():
    big = corpora.template_sentences(50_000, seed=7)
    assert len(set(big)) == 50_000


def test_template_errors():
    with pytest.raises(ValueError, match=str(corpora.TEMPLATE_CAPACITY)):
        corpora.template_sentences(corpora.TEMPLATE_CAPACITY + 1)
    with pytest.raises(ValueError, match=">= 0"):
        corpora.template_sentences(-1)
    with pytest.raises(TypeError):
        corpora.template_sentences(3.5)
    with pytest.raises(TypeError):
        corpora.template_sentences(10, seed="a")


def test_allocation_respects_capacities(monkeypatch):
    """When a template runs out, the others take over its share; all capacity is usable."""
    monkeypatch.setattr(corpora, "_CAPACITIES", (2, 5, 100))
    monkeypatch.setattr(corpora, "TEMPLATES", ("a", "b", "c"))
    assert corpora._allocate(30) == [2, 5, 23]
    assert corpora._allocate(107) == [2, 5, 100]
    assert corpora._allocate(3) == [1, 1, 1]
