"""The registry of encoder kinds: a new kind is one entry, and the whole pipeline takes it.

A toy kind, ``toy:DIM`` (deterministic hashed features of each text's words), is registered in
one `EncoderKind`, then embedded, fitted on, onboarded; the run, the projectors and the anchor
set's card name it. It is unregistered afterwards, so the other tests never see it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from relrep_hf import EncoderKind, register_encoder_kind, unregister_encoder_kind
from relrep_hf.anchors.shared_linear.arguments import SharedLinearArguments
from relrep_hf.encoding.array_encoders import cached_embeddings
from relrep_hf.encoding.encoder_kinds import (
    ENCODER_KINDS,
    ENCODER_KINDS_HELP,
    Embedded,
    EmbedRequest,
    encoder_kinds_help,
    parse_encoder,
)
from relrep_hf.encoding.encoders import ArraySpec, EncoderSpec
from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.pipeline.run_folder import read_run, run_embeddings
from relrep_hf.pipeline.steps import embed, fit, onboard

TOY_HELP = "a toy encoder 'toy:DIM' (hashed word features)"


@dataclass(frozen=True)
class ToySpec:
    dim: int
    kind = "toy"

    @property
    def name(self) -> str:
        return f"toy{self.dim}"

    def __str__(self) -> str:
        return f"toy:{self.dim}"


def toy_features(texts: Sequence[str], dim: int) -> np.ndarray:
    """Each text's words hashed into ``dim`` signed buckets: the same text, the same row."""
    rows = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in zip(rows, texts, strict=True):
        for word in text.lower().split():
            digest = hashlib.sha256(word.encode()).digest()
            row[digest[0] % dim] += 1.0 if digest[1] % 2 else -1.0
    return rows


def parse_toy(text: str) -> ToySpec:
    match = re.fullmatch(r"toy:(\d+)", text)
    if not match:
        raise ValueError(f"Invalid encoder spec {text!r}: expected 'toy:DIM'.")
    return ToySpec(int(match[1]))


def embed_toy(group: Sequence[tuple[ToySpec, str]], request: EmbedRequest) -> list[Embedded]:
    results = []
    for spec, column in group:
        key = {"kind": "toy", "dim": spec.dim, "rows": request.data._fingerprint, "column": column}
        embedded = cached_embeddings(
            request.data,
            key,
            {"encoder_kind": "toy", "column": column},
            lambda: [toy_features(request.data[column], spec.dim)],  # noqa: B023
            cache_dir=request.cache_dir,
        )
        results.append(Embedded(spec, embedded, {"encoder_id": "", "encoder_revision": ""}))
    return results


TOY = EncoderKind("toy", TOY_HELP, parse_toy, embed_toy, prefix="toy")


@pytest.fixture
def toy_kind():
    register_encoder_kind(TOY)
    yield TOY
    unregister_encoder_kind("toy")


def test_a_toy_kind_is_one_entry_and_runs_end_to_end(toy_kind, tmp_path):
    assert parse_encoder("toy:24#text") == (ToySpec(24), "text")
    assert TOY_HELP in encoder_kinds_help()
    run_dir = tmp_path / "run"
    specs = ["toy:32", "toy:24", "toy:20"]
    run = embed(run_dir, specs, limit=80, test_size=20, show_progress=False)
    entries = {e["name"]: e for e in run["encoders"]}
    assert entries["toy32"]["encoder_kind"] == "toy"
    assert entries["toy32"]["encoder_source"] == "toy:32" and entries["toy24"]["dim"] == 24
    texts = run_dir.joinpath("run.json")
    spaces = run_embeddings(run_dir, json.loads(texts.read_text()))
    assert spaces["toy32"].shape == (80, 32) and spaces["toy32"].abs().sum() > 0
    fit(run_dir, held_out=["toy20"], args=SharedLinearArguments("unused", num_anchors=8))
    anchor_set = AnchorSet.from_pretrained(run_dir / "anchor_set")
    assert [e["name"] for e in anchor_set.encoders] == ["toy32", "toy24"]
    assert "`toy24`" in (run_dir / "anchor_set" / "README.md").read_text()
    projector = onboard(run_dir, "toy:16", show_progress=False)
    assert projector.config.encoder_kind == "toy"
    assert projector.config.encoder_source == "toy:16"
    card = (run_dir / "projectors" / "toy16" / "README.md").read_text()
    assert "| encoder kind | `toy` |" in card
    onboarded = read_run(run_dir)["encoders"][-1]
    assert onboarded["name"] == "toy16" and onboarded["onboarded"]


def test_the_toy_kind_is_gone_after_its_test():
    assert "toy" not in ENCODER_KINDS and "toy" not in ENCODER_KINDS_HELP
    with pytest.raises(ValueError, match="Accepted kinds: a transformers model"):
        parse_encoder("toy:8:x")


def test_a_kind_is_registered_once(toy_kind):
    with pytest.raises(ValueError, match="registered already"):
        register_encoder_kind(toy_kind)
    clash = EncoderKind("other", "another kind", parse_toy, embed_toy, prefix="toy")
    with pytest.raises(ValueError, match="prefix 'toy'"):
        register_encoder_kind(clash)


def test_a_kind_says_whether_its_embedding_reads_a_device(toy_kind):
    """The model kinds run on `EmbedRequest.device`; the array kinds read none (a Ray actor of
    one starts without torch: tests/test_init.py); a kind a user registers reads it unless it
    says otherwise."""
    reads = {name: kind.uses_device for name, kind in ENCODER_KINDS.items()}
    assert reads == {"transformers": True, "gguf": True, "sentence-transformers": False,
                     "callable": False, "precomputed": False, "toy": True}  # fmt: skip


def test_each_spec_finds_its_kind():
    kinds = {
        "minilm:mean": "transformers",
        "bert-base-uncased@main:cls:-1": "transformers",
        "smollm2:last": "gguf",
        "st:org/model": "sentence-transformers",
        "st:org/a=b": "sentence-transformers",
        "py:relrep_hf.packaged_encoders:use_multilingual": "callable",
        "old=vectors.npy": "precomputed",
    }
    for spec, kind in kinds.items():
        parsed, _ = parse_encoder(spec)
        assert parsed.kind == kind, spec
        assert str(parsed).startswith(spec.split(":")[0]) or kind == "precomputed"
    assert isinstance(parse_encoder("old=v.npy")[0], ArraySpec)
    assert isinstance(parse_encoder("minilm")[0], EncoderSpec)


def test_the_help_lists_every_kind_in_order():
    assert ENCODER_KINDS_HELP == (
        "a transformers model ID[@REVISION][:POOLING][:LAYER] ('minilm:mean', 'gpt2:last:6'), a "
        "GGUF file REPO_ID/FILE.gguf or path/to/FILE.gguf ('smollm2:last' is the packaged "
        "SmolLM2-135M), a sentence-transformers model 'st:FOLDER_OR_ID', a Python callable "
        "'py:module:function' (texts -> [N, d] array), or precomputed embeddings NAME=FILE "
        "(.npy, .safetensors or a datasets folder; --embeddings); any of them + '#COLUMN' to "
        "read another dataset column"
    )
