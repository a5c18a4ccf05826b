"""Hostile artifacts: property-based fuzzing of every file a load reads.

Each target starts from a real saved artifact, lets hypothesis break one file (config.json,
the safetensors header, anchor_set.json, support.jsonl, the model card), rewrites the
manifest so that the damage passes the digest check (as a hostile author would), and loads.
Every case must load, or fail with an `OSError` / `ValueError` that names the broken file;
never another exception, never code execution (nothing but JSON and safetensors is read), and
the peak memory of a rejected load must stay under 50 MiB above the baseline (resident set
size, its high-water mark reset before each load through ``/proc/self/clear_refs``; Python's
tracemalloc where that is missing). The number of cases run per target is printed
(``pytest -s``).
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from relrep_hf import AnchorSet, RelativeHeadConfig, RelativeProjector, Statistics
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.publishing.cards import write_folder_card
from relrep_hf.utils.manifest import write_manifest
from tests.fixtures.memory_probe import MIB, RSS, run_measured

LIMIT = 50 * MIB
CASES: Counter[str] = Counter()
REJECTED: Counter[str] = Counter()
PEAK: dict[str, int] = {}  # the largest peak memory of a rejected load, per target
FUZZ = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,  # the same cases on every run, so CI is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HUGE = st.sampled_from([0, -1, 10**9, 10**12, 2**63, 10**30, 1.5, True, "768", None])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)


# ---------------------------------------------------------------------------------------------
# Memory (measured by tests/fixtures/memory_probe.py)
# ---------------------------------------------------------------------------------------------


def check_clean(target: str, load: Callable[[], object], files: tuple[str, ...]) -> None:
    """Run one case: it loads, or fails cleanly (OSError/ValueError naming a file), within
    the memory limit."""
    CASES[target] += 1
    error, peak = run_measured(load)
    if error is not None:
        assert isinstance(error, (OSError, ValueError)), f"{type(error).__name__}: {error}"
        assert any(name in str(error) for name in files), f"names no file: {error}"
        assert peak < LIMIT, f"a rejected load used {peak / MIB:.1f} MiB: {error}"
        REJECTED[target] += 1
        PEAK[target] = max(PEAK.get(target, 0), peak)


# ---------------------------------------------------------------------------------------------
# Artifacts
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("originals")
    data = torch.randn(64, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    RelativeProjector.from_statistics(data[:4], Statistics.from_embeddings(data)).save_pretrained(
        root / "projector"
    )
    torch.manual_seed(0)
    RelativeHeadForClassification(RelativeHeadConfig(num_anchors=4, num_labels=3)).save_pretrained(
        root / "head"
    )
    AnchorSet.random([f"input {i}" for i in range(10)], num_anchors=4).save_pretrained(
        root / "anchors"
    )
    return {name: root / name for name in ("projector", "head", "anchors")}


def fresh_copy(original: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "case"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(original, folder)
    return folder


def hostile(folder: Path) -> Path:
    """The damage is the author's intent: a manifest that matches it."""
    write_manifest(folder)
    return folder


def report(target: str, minimum: int) -> None:
    print(
        f"\nfuzz cases for {target}: {CASES[target]}, {REJECTED[target]} rejected, largest peak "
        f"of a rejected load {PEAK.get(target, 0) / MIB:.2f} MiB ({'RSS' if RSS else 'tracemalloc'})"
    )
    assert CASES[target] >= minimum


# ---------------------------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------------------------

CONFIG_KEYS = ["hidden_size", "num_anchors", "similarity", "shrinkage", "eps", "model_type",
               "num_labels", "hidden_sizes", "id2label", "torch_dtype", "dtype", "layer"]  # fmt: skip


@st.composite
def config_damage(draw):
    key = draw(st.sampled_from(CONFIG_KEYS))
    action = draw(st.sampled_from(["drop", "huge", "any"]))
    value = None if action == "drop" else draw(HUGE if action == "huge" else JSON_VALUES)
    return key, action, value


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["projector", "head"])
@FUZZ
@given(damage=config_damage())
def test_fuzzed_config_json(kind, damage, originals, tmp_path):
    key, action, value = damage
    folder = fresh_copy(originals[kind], tmp_path)
    path = folder / "config.json"
    config = json.loads(path.read_text())
    if action == "drop":
        config.pop(key, None)
    else:
        config[key] = value
    path.write_text(json.dumps(config))
    hostile(folder)
    cls = RelativeProjector if kind == "projector" else RelativeHeadForClassification
    check_clean(f"config.json ({kind})", lambda: cls.from_pretrained(folder), ("config.json",))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["projector", "head"])
def test_config_json_case_counts(kind):
    report(f"config.json ({kind})", 1)


# ---------------------------------------------------------------------------------------------
# safetensors header
# ---------------------------------------------------------------------------------------------


def split_safetensors(data: bytes) -> tuple[dict, bytes]:
    length = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def join_safetensors(header: dict, body: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


@st.composite
def header_damage(draw):
    return draw(
        st.one_of(
            st.tuples(st.just("truncate"), st.integers(0, 4000)),
            st.tuples(st.just("length"), st.sampled_from([0, 1, 7, 2**20, 10**12, 2**64 - 1])),
            st.tuples(st.just("shape"), st.lists(st.integers(-2, 10**6), max_size=3)),
            st.tuples(st.just("dtype"), st.sampled_from(["I64", "BOOL", "U8", "F64", "X9", 3])),
            st.tuples(st.just("offsets"), st.lists(st.integers(-5, 10**9), max_size=3)),
            st.tuples(st.just("extra"), st.text(min_size=1, max_size=6)),
            st.tuples(st.just("missing"), st.integers(0, 10)),
            st.tuples(st.just("entry"), JSON_VALUES),
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["projector", "anchors"])
@FUZZ
@given(damage=header_damage(), which=st.integers(0, 10))
def test_fuzzed_safetensors_header(kind, damage, which, originals, tmp_path):
    folder = fresh_copy(originals[kind], tmp_path)
    name = "model.safetensors" if kind == "projector" else "anchor_set.safetensors"
    path = folder / name
    data = path.read_bytes()
    header, body = split_safetensors(data)
    tensors = sorted(k for k in header if k != "__metadata__")
    tensor = tensors[which % len(tensors)]
    action, value = damage
    if action == "truncate":
        data = data[: min(value, len(data) - 1)]
    elif action == "length":
        data = struct.pack("<Q", value) + data[8:]
    else:
        if action == "shape":
            header[tensor]["shape"] = value
        elif action == "dtype":
            header[tensor]["dtype"] = value
        elif action == "offsets":
            header[tensor]["data_offsets"] = value
        elif action == "extra":
            header[f"extra{value}"] = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
        elif action == "missing":
            del header[tensor]
        else:
            header[tensor] = value
        data = join_safetensors(header, body)
    path.write_bytes(data)
    hostile(folder)
    if kind == "projector":
        load = lambda: RelativeProjector.from_pretrained(folder)  # noqa: E731
    else:
        load = lambda: AnchorSet.from_pretrained(folder)  # noqa: E731
    check_clean(f"safetensors header ({kind})", load, (name,))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["projector", "anchors"])
def test_safetensors_header_case_counts(kind):
    report(f"safetensors header ({kind})", 1)


# ---------------------------------------------------------------------------------------------
# The anchor set's JSON and support file
# ---------------------------------------------------------------------------------------------

ANCHOR_KEYS = ["format_version", "num_anchors", "support_size", "strategy", "support_reference",
               "encoders", "training", "metrics"]  # fmt: skip


@pytest.mark.slow
@FUZZ
@given(
    key=st.sampled_from(ANCHOR_KEYS),
    value=st.one_of(HUGE, JSON_VALUES),
    drop=st.booleans(),
    whole=st.none() | JSON_VALUES,
)
def test_fuzzed_anchor_set_json(key, value, drop, whole, originals, tmp_path):
    folder = fresh_copy(originals["anchors"], tmp_path)
    path = folder / "anchor_set.json"
    description = json.loads(path.read_text())
    if whole is not None and not drop:
        description = whole  # a file that is JSON, but not an object or not ours
    elif drop:
        description.pop(key, None)
    else:
        description[key] = value
    path.write_text(json.dumps(description))
    hostile(folder)
    check_clean("anchor_set.json", lambda: AnchorSet.from_pretrained(folder), ("anchor_set.json",))


@pytest.mark.slow
@FUZZ
@given(
    lines=st.lists(
        st.one_of(
            JSON_VALUES.map(json.dumps),
            st.text(max_size=20).map(lambda t: json.dumps({"text": t})),
            st.text(max_size=20),
            st.binary(max_size=12).map(lambda b: b.decode("latin-1")),
        ),
        max_size=14,
    )
)
def test_fuzzed_support_file(lines, originals, tmp_path):
    folder = fresh_copy(originals["anchors"], tmp_path)
    (folder / "support.jsonl").write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    hostile(folder)
    check_clean("support.jsonl", lambda: AnchorSet.from_pretrained(folder), ("support.jsonl",))


@pytest.mark.slow
def test_anchor_set_case_counts():
    report("anchor_set.json", 1)
    report("support.jsonl", 1)


# ---------------------------------------------------------------------------------------------
# Model cards with broken metadata
# ---------------------------------------------------------------------------------------------

MARKER = "Generated by relrep_hf"


@pytest.mark.slow
@FUZZ
@given(
    metadata=st.one_of(st.text(max_size=40), JSON_VALUES.map(json.dumps)),
    body=st.text(max_size=40),
    generated=st.booleans(),
    fence=st.sampled_from(["---\n", "---", "", "--- \n"]),
)
def test_fuzzed_model_card(metadata, body, generated, fence, originals, tmp_path):
    """Loading never reads the card; regenerating a folder's card (as a push does) either
    keeps a card it did not write or replaces it."""
    folder = fresh_copy(originals["head"], tmp_path)
    readme = folder / "README.md"
    original = readme.read_text()
    marker = next(line for line in original.splitlines() if MARKER in line) if generated else ""
    readme.write_text(f"{fence}{metadata}\n{fence}{body}\n{marker}\n")
    hostile(folder)

    def load_and_regenerate() -> None:
        RelativeHeadForClassification.from_pretrained(folder)
        write_folder_card(folder)

    check_clean("model card", load_and_regenerate, ("README.md",))
    assert CASES["model card"] and readme.is_file()


@pytest.mark.slow
def test_model_card_case_counts():
    report("model card", 1)


@pytest.mark.slow
def test_the_memory_probe_sees_a_large_allocation():
    """The measurement can fail: 200 MiB allocated inside the load shows up. Probed in a fresh
    interpreter: after the whole suite, this process's allocator state hid it (0 MiB, twice).
    The probe imports torch and the measurement alone (importing this module too took 33 s)."""
    probe = (
        "import torch\n"
        "from tests.fixtures.memory_probe import MIB, run_measured\n"
        "error, peak = run_measured(lambda: torch.ones(200 * MIB // 4).sum())\n"
        "print(error is None, peak)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    peak = int(out[-1])
    assert out[-2] == "True" and (peak > 150 * MIB if RSS else peak >= 0), peak / MIB
    _, peak = run_measured(lambda: math.prod([1]))
    assert peak < LIMIT


# ---------------------------------------------------------------------------------------------
# No code runs: no pickle, no remote code without trust_remote_code=True
# ---------------------------------------------------------------------------------------------


class _Payload:
    """Unpickling this creates a file: the proof that a pickle was loaded."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_loading_never_unpickles_nor_runs_remote_code(originals, tmp_path):
    import pickle

    from transformers import AutoModel

    marker = tmp_path / "code-ran"
    # a pickle instead of safetensors: refused before anything reads it
    folder = fresh_copy(originals["projector"], tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    hostile(folder)
    with pytest.raises(OSError, match="never from a pickle"):
        RelativeProjector.from_pretrained(folder)
    # remote code named by config.json's auto_map: never imported without trust_remote_code
    folder = fresh_copy(originals["projector"], tmp_path)
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.Evil", "AutoConfig": "modeling_evil.Cfg"}
    (folder / "config.json").write_text(json.dumps(config))
    hostile(folder)
    RelativeProjector.from_pretrained(folder)  # our class: auto_map is not followed
    with contextlib.suppress(OSError, ValueError):  # loads our class, or refuses
        AutoModel.from_pretrained(folder)  # no trust_remote_code: transformers must not run it
    assert not marker.exists()
