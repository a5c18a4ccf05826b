"""Reliability: saves survive SIGKILL, training resumes after one, statistics reduce across
processes, and every bad input gets an error that says what is wrong (docs/bad_inputs.md).

The killed processes are forks of the test process (``tests/fixtures/killable_save.py`` and
``tests/fixtures/killable_train.py`` run standalone too): a fresh interpreter spends ~10 s importing
torch and transformers, a fork none, and SIGKILL ends either the same way.

Regenerate the table of bad inputs with ``python -m tests.test_reliability``.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

from relrep_hf import (
    ANCHOR_METHODS,
    AnchorSet,
    HeadTrainer,
    HeadTrainingArguments,
    ParamTrainer,
    ParamTrainingArguments,
    RelativeHeadConfig,
    RelativeHeadForClassification,
    RelativeProjector,
    RelativeProjectorConfig,
    RelativeWrapper,
    Statistics,
    register_anchor_method,
    register_similarity,
    translate,
)
from relrep_hf.encoding.array_encoders import array_embeddings
from relrep_hf.encoding.encoder_kinds import (
    ENCODER_KINDS,
    encoder_kind,
    parse_encoder,
    register_encoder_kind,
)
from relrep_hf.encoding.encoders import ArraySpec, EncoderSpec
from relrep_hf.encoding.extraction import extract_embeddings
from relrep_hf.encoding.gguf_encoders import gguf_quantization
from relrep_hf.evaluation.zero_shot import EncoderData, ZeroShotStitching
from relrep_hf.functional import relative_projection, whitening_matrix
from relrep_hf.pipeline.steps import demo_sizes, load_dataset_for_run
from relrep_hf.translation.inverse import relative_inverse, relative_inverses
from relrep_hf.utils.lazy_imports import stub_names
from tests.fixtures import (
    artifact_inputs,
    bridge_inputs,
    child_env,
    database_inputs,
    device_inputs,
    distributed_statistics,
    hostile_inputs,
    killable_save,
    killable_train,
    migration_inputs,
    quickstart_inputs,
    reembed_inputs,
    store_limits_inputs,
    store_safety_inputs,
    store_space_inputs,
    trainer_inputs,
)
from tests.fixtures.forked import after_fork

REPO = Path(__file__).resolve().parents[1]
BAD_INPUTS_DOC = REPO / "docs" / "bad_inputs.md"
KILLED = -signal.SIGKILL  # a multiprocessing exit code

needs_fork = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork and SIGKILL"
)


def start(target: Callable[..., object], *args: object) -> multiprocessing.Process:
    """``target(*args)`` in a forked child process."""
    process = multiprocessing.get_context("fork").Process(target=_child, args=(target, args))
    process.start()
    return process


def _child(target: Callable[..., object], args: tuple) -> None:
    after_fork()  # one torch thread, tqdm locks of its own
    target(*args)


def finish(process: multiprocessing.Process, timeout: float = 120) -> int:
    """Wait for ``process`` (killing it after ``timeout`` s); its exit code."""
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
        pytest.fail(f"child process {process.pid} did not finish in {timeout} s")
    return process.exitcode


def kill(process: multiprocessing.Process) -> int:
    os.kill(process.pid, signal.SIGKILL)
    return finish(process)


# ---------------------------------------------------------------------------------------------
# Atomic saves under SIGKILL
# ---------------------------------------------------------------------------------------------


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


class References:
    """Version ``v`` of an artifact, and every file of it as saved by the test process."""

    def __init__(self, kind: str, sizes: dict[str, int], root: Path):
        self.kind, self.sizes, self.root = kind, sizes, root
        self.files: dict[int, dict[str, bytes]] = {}
        self.artifacts: dict[int, RelativeProjector | AnchorSet] = {}

    def artifact(self, version: int) -> RelativeProjector | AnchorSet:
        if version not in self.artifacts:  # built once: a check reads it, never changes it
            self.artifacts[version] = killable_save.VERSIONS[self.kind](version, **self.sizes)
        return self.artifacts[version]

    def __getitem__(self, version: int) -> dict[str, bytes]:
        if version not in self.files:
            folder = self.root / str(version) / "artifact"  # same name as the checked folder
            self.artifact(version).save_pretrained(folder)
            self.files[version] = files_of(folder)
        return self.files[version]


def check_holds_one_version(
    folder: Path,
    references: References,
    candidates: set[int],
    extra: dict[str, bytes],
    old: int | None = None,
) -> int:
    """Assert ``folder`` holds exactly one of ``candidates`` (every file, byte for byte), and
    that it loads. Returns the version. The ``extra`` files that the saves do not write were
    put beside version ``old`` by the user: they are there whichever version the folder holds
    (a save replaces the artifact's files and keeps the user's, issue #37)."""
    version = killable_save.version_of(references.kind, folder)
    assert version in candidates, f"found version {version}, expected one of {sorted(candidates)}"
    found = files_of(folder)
    artifact = {name: data for name, data in found.items() if name not in extra}
    assert artifact == references[version], f"{folder} mixes files of different saves"
    kept = {name: found[name] for name in extra if name in found}
    assert kept == extra, f"a file of the user's was lost (version {version}, old {old})"
    if references.kind == "projector":
        loaded = RelativeProjector.from_pretrained(folder).weight
        expected = references.artifact(version).weight
    else:
        loaded = AnchorSet.from_pretrained(folder).mixture
        expected = references.artifact(version).mixture
    assert torch.equal(loaded, expected)
    return version


def strays(folder: Path) -> list[str]:
    """What lies beside ``folder``: temporary folders of saves that did not finish."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name != folder.name)


def save_until_crash(kind: str, root: Path, operation: int, version: int) -> None:
    killable_save.crash_at(operation, root)
    killable_save.save_versions(kind, root / "artifact", version, 1, sizes=killable_save.SMALL)


@pytest.mark.slow
@needs_fork
@pytest.mark.parametrize("kind", ["projector", "anchor_set"])
@pytest.mark.parametrize("existing", [True, False], ids=["over a previous save", "first save"])
def test_a_crash_at_any_point_of_a_save_leaves_the_old_or_the_new_version(kind, existing, tmp_path):
    """SIGKILL the saving process before each of its file-system operations in turn, from the
    first mkdir to the last removal, and check the folder after every one of those crashes."""
    references = References(kind, killable_save.SMALL, tmp_path / "references")
    root = tmp_path / "root"
    folder = root / "artifact"
    extra = {"notes.txt": b"written by the user", "logs/run.txt": b"kept across saves"}
    if not existing:
        extra = {}
    # The previous save, made once and copied before each crash (the same bytes as a save)
    previous = tmp_path / "previous" / "artifact"
    if existing:
        killable_save.save_versions(kind, previous, 0, 1, sizes=killable_save.SMALL)
        for name, data in extra.items():
            (previous / name).parent.mkdir(exist_ok=True)
            (previous / name).write_bytes(data)
    states = []
    for operation in range(1, 200):
        shutil.rmtree(root, ignore_errors=True)
        if existing:
            shutil.copytree(previous, folder)
        exitcode = finish(start(save_until_crash, kind, root, operation, 1))
        assert exitcode in (0, KILLED)
        if not folder.exists():
            states.append("absent")
        else:
            version = check_holds_one_version(
                folder, references, {0, 1} if existing else {1}, extra, old=0
            )
            states.append("old" if version == 0 else "new")
        # The next save works, and removes what the killed one left beside the folder.
        killable_save.save_versions(kind, folder, 2, 1, sizes=killable_save.SMALL)
        assert strays(folder) == []
        check_holds_one_version(folder, references, {2}, extra)
        if exitcode == 0:
            break
    else:
        pytest.fail("the save never finished")
    # Crashes landed on both sides of the commit, which is a single step.
    assert states[0] == ("old" if existing else "absent") and states[-1] == "new"
    assert states == sorted(states, key=lambda state: state == "new")
    assert len(states) >= 8


def save_forever(kind: str, folder: Path, first: int) -> None:
    killable_save.save_versions(kind, folder, first, sizes=killable_save.LARGE)


@pytest.mark.slow
@needs_fork
@pytest.mark.parametrize("kind", ["projector", "anchor_set"])
def test_saves_killed_at_random_moments_leave_a_loadable_version(kind, tmp_path):
    """A process saves a few-MB artifact into one folder in a loop; SIGKILL it at staggered
    random moments, every other one aimed at a save in progress; check the folder, start a new
    saver on it, again."""
    references = References(kind, killable_save.LARGE, tmp_path / "references")
    folder = tmp_path / "root" / "artifact"
    killable_save.save_versions(kind, folder, 0, 1, sizes=killable_save.LARGE)
    rng = random.Random(f"kills of {kind}")
    last, mid_save = 0, 0
    for round_ in range(1, 9):
        first = 1000 * round_
        before = set(strays(folder))
        saver = start(save_forever, kind, folder, first)
        if round_ % 2:  # building a version, saving it, or between two
            time.sleep(0.03 * round_ + rng.uniform(0.0, 0.05))
        else:  # soon after a save has created its temporary folder
            deadline = time.monotonic() + 60
            while not set(strays(folder)) - before and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(rng.uniform(0.0, 0.01))
        assert kill(saver) == KILLED
        mid_save += bool(set(strays(folder)) - before)  # its temporary folder is left
        last = check_holds_one_version(
            folder, references, {last, *range(first, first + 10_000)}, {}
        )
    assert mid_save >= 2, "fewer than 2 kills landed while a save was in progress"
    killable_save.save_versions(kind, folder, 1, 1, sizes=killable_save.LARGE)
    assert strays(folder) == []  # the temporary folders of the killed savers are gone
    check_holds_one_version(folder, references, {1}, {})


# ---------------------------------------------------------------------------------------------
# Training resumes after SIGKILL
# ---------------------------------------------------------------------------------------------


def complete_checkpoints(output_dir: Path) -> list[int]:
    checkpoints = output_dir.with_name(f"{output_dir.name}-checkpoints")  # beside the output
    return sorted(
        int(p.parent.name.split("-")[1])
        for p in checkpoints.glob("checkpoint-*/trainer_state.json")
    )


@pytest.mark.slow
@needs_fork
def test_training_killed_after_a_checkpoint_resumes_to_the_uninterrupted_result(tmp_path):
    full, killed = tmp_path / "full", tmp_path / "killed"
    assert finish(start(killable_train.train, str(full))) == 0

    trainer = start(killable_train.train, str(killed))
    deadline = time.monotonic() + 120
    while not complete_checkpoints(killed):
        assert trainer.is_alive(), "training ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint after 120 s"
        time.sleep(0.005)
    time.sleep(random.Random(0).uniform(0.0, 0.3))  # a few epochs later, maybe mid-checkpoint
    assert kill(trainer) == KILLED
    assert not (killed / "anchor_set.safetensors").exists(), "the run finished before the kill"
    resumed_from = complete_checkpoints(killed)[-1]
    total_steps = killable_train.EPOCHS * killable_train.STEPS_PER_EPOCH
    assert 0 < resumed_from < total_steps

    assert finish(start(killable_train.train, str(killed), True)) == 0
    resumed, uninterrupted = AnchorSet.from_pretrained(killed), AnchorSet.from_pretrained(full)
    torch.testing.assert_close(resumed.mixture, uninterrupted.mixture, rtol=0, atol=1e-6)
    runtime = resumed.metrics["train"]
    steps_run = round(runtime["train_runtime"] * runtime["train_steps_per_second"])
    assert steps_run == total_steps - resumed_from  # it resumed, it did not start over


# ---------------------------------------------------------------------------------------------
# Distributed statistics
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_statistics_all_reduced_over_uneven_shards_equal_those_of_all_rows(tmp_path):
    """A real 2-process CPU run (gloo): each rank streams its shard in its own batch size."""
    env = child_env()
    script = REPO / "tests" / "fixtures" / "distributed_statistics.py"
    out = tmp_path / "stats"
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(script), str(out)],
        env=env, capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [torch.load(f"{out}-{rank}.pt") for rank in (0, 1)]
    data = distributed_statistics.rows()
    expected = Statistics.from_embeddings(data)
    for name, bounds in distributed_statistics.SHARDINGS.items():
        local_counts = [ranks[rank][name]["local_count"] for rank in (0, 1)]
        assert local_counts == [bounds[1] - bounds[0], bounds[2] - bounds[1]]
        reduced = [Statistics.from_dict(ranks[rank][name]) for rank in (0, 1)]
        # Every rank merges in rank order: the same float64 result, bit for bit.
        assert torch.equal(reduced[0].mean, reduced[1].mean)
        assert torch.equal(reduced[0].scatter, reduced[1].scatter)
        assert reduced[0].count == distributed_statistics.N
        scale = expected.scatter.abs().max().item()
        torch.testing.assert_close(reduced[0].mean, expected.mean, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(
            reduced[0].scatter, expected.scatter, rtol=1e-10, atol=1e-10 * scale
        )


# ---------------------------------------------------------------------------------------------
# Bad inputs: every case raises, and docs/bad_inputs.md lists what it raises
# ---------------------------------------------------------------------------------------------


class Setup:
    """Small, deterministic artifacts that the bad-input cases break."""

    def __init__(self, folder: Path):
        self.folder = folder
        generator = torch.Generator().manual_seed(0)
        self.data = torch.randn(200, 8, generator=generator, dtype=torch.float64)
        self.stats = Statistics.from_embeddings(self.data)
        self.projector = self.projector_of(self.data[:8], anchor_set_id="org/anchors-a")
        self.spaces = {"e0": self.data[:, :4].float(), "e1": self.data[:, 4:].float()}
        self.encoder, self.tokenizer = tiny_text_encoder()

    def projector_of(self, anchors: torch.Tensor, **config: str) -> RelativeProjector:
        stats = self.stats
        if anchors.shape[1] != stats.dim:  # another encoder
            other = torch.randn(50, anchors.shape[1], generator=torch.Generator().manual_seed(2))
            stats = Statistics.from_embeddings(other)
        return RelativeProjector.from_statistics(anchors, stats, pooling="mean", **config)

    def saved(self, name: str) -> Path:
        """The projector (``name`` starting with "projector") or an anchor set, saved afresh."""
        folder = self.folder / name
        if name.startswith("projector"):
            self.projector.save_pretrained(folder)
        else:
            AnchorSet.random([f"input {i}" for i in range(16)], 4).save_pretrained(folder)
        return folder

    def saved_head(self, name: str) -> Path:
        folder = self.folder / name
        self.head().save_pretrained(folder)
        return folder

    def trainer(self, spaces: dict[str, torch.Tensor] | None = None, *, name: str = "param",
                **overrides: object) -> ParamTrainer:  # fmt: skip
        values = dict(num_anchors=4, support_size=16, num_train_epochs=1, train_batch_size=64,
                      save_strategy="no", disable_tqdm=True)  # fmt: skip
        args = ParamTrainingArguments(str(self.folder / name), **{**values, **overrides})
        return ParamTrainer(args, self.spaces if spaces is None else spaces)

    def wrapper(self, projector: RelativeProjector | None = None, **kwargs: object):
        return RelativeWrapper(self.encoder, projector or self.projector, self.tokenizer, **kwargs)

    def head(self, num_anchors: int = 8) -> RelativeHeadForClassification:
        config = RelativeHeadConfig(num_anchors=num_anchors, num_labels=2,
                                    anchor_set_id="org/anchors-a")  # fmt: skip
        return RelativeHeadForClassification(config)


def tiny_text_encoder() -> tuple[BertModel, PreTrainedTokenizerFast]:
    """A 1-layer, 8-dimensional BERT and a 4-word whitespace tokenizer."""
    vocab = {"[PAD]": 0, "[UNK]": 1, "a": 2, "b": 3}
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]"
    )
    torch.manual_seed(0)
    config = BertConfig(vocab_size=4, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=16, max_position_embeddings=16)  # fmt: skip
    return BertModel(config).eval(), tokenizer


def with_nan(x: torch.Tensor, row: int = 3) -> torch.Tensor:
    x = x.clone()
    x[row, 1] = float("nan")
    return x


def with_inf(x: torch.Tensor, row: int = 3) -> torch.Tensor:
    x = x.clone()
    x[row, 0] = float("inf")
    return x


def truncated(path: Path, keep: int) -> Path:
    path.write_bytes(path.read_bytes()[:keep])
    return path.parent


def corrupted(path: Path) -> Path:
    path.write_bytes(b"\x00" * 8 + b"not a safetensors header")
    return path.parent


def resized(path: Path, **sizes: int) -> Path:
    path.write_text(json.dumps({**json.loads(path.read_text()), **sizes}))
    return path.parent


def edited_projector(name: str, **change: int) -> Callable[[Setup], object]:
    """Load a saved projector whose config.json has ``change``, with the manifest check off."""
    return lambda s: RelativeProjector.from_pretrained(
        resized(s.saved(f"projector-{name}") / "config.json", **change), verify=False
    )


def flipped(path: Path, offset: int) -> Path:
    """``path`` with the bits of the byte at ``offset`` inverted."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    return path.parent


def long_header(path: Path) -> Path:
    """A safetensors file whose header length claims far more bytes than the file has."""
    data = path.read_bytes()
    path.write_bytes((10**12).to_bytes(8, "little") + data[8:])
    return path.parent


def truncated_lines(path: Path, keep: int) -> Path:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:keep]))
    return path.parent


def saved_while_locked(s: Setup) -> None:
    from relrep_hf.utils.locking import folder_lock

    folder = s.folder / "projector-locked"
    with folder_lock(folder):  # as another process's save would hold it
        s.projector.save_pretrained(folder)


def without(path: Path) -> Path:
    path.unlink()
    return path.parent


def st_module():
    """relrep_hf.models.sentence_transformers_module, imported only when a case needs it."""
    from relrep_hf.models import sentence_transformers_module

    return sentence_transformers_module


def st_dense(in_features: int, out_features: int):
    """A SentenceTransformer of one Dense module (no encoder): encode gives out_features."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense

    return SentenceTransformer(modules=[Dense(in_features, out_features)], device="cpu")


def saved_st_module(s: Setup) -> Path:
    folder = s.folder / "st-module"
    st_module().RelativeProjection(s.projector).save(str(folder))
    return folder


def gguf_file_mismatch(s: Setup):
    """A projector of a tiny Llama's F16 file, loaded with the F32 file of the same model."""
    from tests.fixtures.gguf_models import byte_level_vocab, tiny_llama, write_gguf

    folder = s.folder / "gguf"
    folder.mkdir(exist_ok=True)
    tokens = byte_level_vocab()
    write_gguf(tiny_llama(len(tokens)), tokens, folder / "tiny-F32.gguf")
    projector = s.projector_of(torch.randn(4, 32, dtype=torch.float64),
                               encoder_gguf_file="tiny-F16.gguf", encoder_quantization="F16")  # fmt: skip
    return RelativeWrapper.from_pretrained(str(folder), projector, gguf_file="tiny-F32.gguf")


def resumed_with_changed_arguments(s: Setup):
    run = dict(name="resumed", save_strategy="steps", save_steps=1, num_train_epochs=2)
    s.trainer(**run).train()
    return s.trainer(**run, learning_rate=0.1).train(resume_from_checkpoint=True)


def gguf_file_of(s: Setup, data: bytes) -> str:
    path = s.folder / "model.gguf"
    path.write_bytes(data)
    return str(path)


def singular_statistics() -> Statistics:
    """Rows +-e1, +-e2 in 3-d: mean 0 and scatter diag(2, 2, 0), exactly."""
    eye = torch.eye(3, dtype=torch.float64)
    return Statistics.from_embeddings(torch.stack([eye[0], -eye[0], eye[1], -eye[1]]))


@dataclass(frozen=True)
class BadInput:
    input: str
    where: str
    call: Callable[[Setup], object]


X = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
SUPPORT = [f"input {i}" for i in range(16)]

BAD_INPUTS = [
    # non-finite values
    BadInput("NaN in an embedding", "`RelativeProjector.forward`",
             lambda s: s.projector(with_nan(X))),
    BadInput("Inf in a batch of embeddings", "`Statistics.update`",
             lambda s: s.stats.update(with_inf(X))),
    BadInput("NaN in the embeddings to estimate statistics from", "`Statistics.from_embeddings`",
             lambda s: Statistics.from_embeddings(with_nan(s.data, 150))),
    BadInput("NaN in one encoder's training embeddings", "`ParamTrainer.train`",
             lambda s: s.trainer({**s.spaces, "e1": with_nan(s.spaces["e1"], 77)}).train()),
    BadInput("NaN in the anchors", "`RelativeProjector.from_statistics`",
             lambda s: s.projector_of(with_nan(s.data[:4], 0))),
    BadInput("finite embeddings too large for a float16 projector", "`RelativeProjector.forward`",
             lambda s: copy.deepcopy(s.projector).half()(torch.full((2, 8), 6e4,
                                                                     dtype=torch.float16))),
    BadInput("integer embeddings", "`Statistics.from_embeddings`",
             lambda s: Statistics.from_embeddings(torch.ones(5, 3, dtype=torch.int64))),
    # dimensions
    BadInput("embeddings of another dimension than the projector's", "`RelativeProjector.forward`",
             lambda s: s.projector(torch.randn(6, 9))),
    BadInput("a batch of another dimension", "`Statistics.update`",
             lambda s: s.stats.update(torch.randn(6, 9))),
    BadInput("statistics of different dimensions", "`Statistics.merge`",
             lambda s: s.stats.merge(Statistics.empty(9))),
    BadInput("statistics of another dimension than the anchors", "`RelativeProjector.from_statistics`",
             lambda s: RelativeProjector.from_statistics(s.data[:4, :6], s.stats)),
    BadInput("encoder hidden size other than the projector's", "`RelativeWrapper`",
             lambda s: s.wrapper(s.projector_of(torch.randn(4, 16, dtype=torch.float64)))),
    BadInput("encoders embedding different numbers of rows", "`ParamTrainer`",
             lambda s: s.trainer({"e0": s.spaces["e0"], "e1": s.spaces["e1"][:-1]})),
    BadInput("a dataset column whose rows differ in length", "`ParamTrainer`",
             lambda s: s.trainer(datasets.Dataset.from_dict(
                 {"e0": [[0.0] * 8] * 63 + [[0.0] * 7], "e1": s.spaces["e1"][:64].tolist()})
             ).train()),
    # too few rows, singular covariance
    BadInput("statistics of a single embedding", "`RelativeProjector.from_statistics`",
             lambda s: RelativeProjector.from_statistics(
                 s.data[:4], Statistics.from_embeddings(s.data[:1]))),
    BadInput("singular covariance, no shrinkage", "`whitening_matrix`",
             lambda s: whitening_matrix(singular_statistics(), shrinkage=0.0, eps=0.0)),
    BadInput("shrinkage outside [0, 1]", "`RelativeProjectorConfig`",
             lambda s: RelativeProjectorConfig(hidden_size=8, num_anchors=4, shrinkage=1.5)),
    BadInput("fewer support points than anchors", "`ParamTrainer`",
             lambda s: s.trainer(num_anchors=32)),
    BadInput("support_size larger than the data", "`ParamTrainer`",
             lambda s: s.trainer(support_size=500)),
    BadInput("a float anchor count", "`AnchorSet.random`",
             lambda s: AnchorSet.random(SUPPORT, 2.0)),
    BadInput("a float anchor count", "`AnchorSet.shared_linear`",
             lambda s: AnchorSet.shared_linear(SUPPORT, {k: v[:16] for k, v in s.spaces.items()},
                                               4.5, support_rows=range(16))),
    BadInput("a boolean count", "`ParamTrainingArguments`",
             lambda s: ParamTrainingArguments("out", num_train_epochs=True)),
    BadInput("unknown optimizer", "`ParamTrainingArguments`",
             lambda s: ParamTrainingArguments("out", optimizer="sgd")),
    BadInput("training shrinkage outside [0, 1] (also `relrep-hf fit --shrinkage`)",
             "`ParamTrainingArguments`",
             lambda s: ParamTrainingArguments("out", shrinkage=1.5)),
    BadInput("support_size of 0", "`ParamTrainingArguments`",
             lambda s: ParamTrainingArguments("out", support_size=0)),
    # anchor sets, projectors and heads that do not belong together
    BadInput("support embeddings of another anchor set (K differs)",
             "`RelativeProjector.from_anchor_set`",
             lambda s: RelativeProjector.from_anchor_set(
                 AnchorSet.random(SUPPORT, 4), s.data[:20], s.stats)),
    BadInput("anchor set with another number of anchors than the projector",
             "`AnchorSet.check_compatible`",
             lambda s: AnchorSet.random(SUPPORT, 3).check_compatible(
                 s.projector.config.num_anchors, what="projector")),
    BadInput("mixture rows off the probability simplex", "`AnchorSet`",
             lambda s: AnchorSet(torch.full((2, 3), 0.5), ["a", "b", "c"])),
    BadInput("mixture and support lists of different sizes", "`AnchorSet`",
             lambda s: AnchorSet(torch.full((2, 3), 1 / 3), ["a", "b"])),
    BadInput("head of another number of anchors", "`RelativeWrapper.with_head`",
             lambda s: s.wrapper().with_head(s.head(num_anchors=5))),
    BadInput("head of another anchor set (same number of anchors)", "`RelativeWrapper.with_head`",
             lambda s: s.wrapper(s.projector_of(s.data[8:16], anchor_set_id="org/anchors-b"))
             .with_head(s.head())),
    BadInput("relative features of another width", "`RelativeHeadForClassification.forward`",
             lambda s: s.head()(torch.randn(2, 5))),
    BadInput("source and target projectors of different anchor sets", "`translate`",
             lambda s: translate(
                 X, s.projector, s.projector_of(s.data[8:16], anchor_set_id="org/anchors-b"))),
    BadInput("relative features of the wrong size", "`relative_inverse(projector)(relative)`",
             lambda s: relative_inverse(s.projector)(torch.randn(2, 5))),
    BadInput("inverting distance features", "`relative_inverse`",
             lambda s: relative_inverse(
                 RelativeProjector.from_statistics(s.data[:4], None, similarity="euclidean"))),
    BadInput("a negative ridge among a path of ridges", "`relative_inverses`",
             lambda s: relative_inverses(s.projector, ridges=(0.0, -1.0))),
    # broken files
    BadInput("corrupted model.safetensors", "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(
                 corrupted(s.saved("projector-corrupted") / "model.safetensors"))),
    BadInput("truncated model.safetensors", "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(
                 truncated(s.saved("projector-truncated") / "model.safetensors", 200))),
    BadInput("config.json sizes that disagree with the tensors",
             "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(
                 resized(s.saved("projector-resized") / "config.json", num_anchors=5))),
    BadInput("truncated anchor_set.safetensors", "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained(
                 truncated(s.saved("anchors-truncated") / "anchor_set.safetensors", 100))),
    BadInput("anchor set folder without support.jsonl", "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained(
                 without(s.saved("anchors-incomplete") / "support.jsonl"))),
    # silent corruption: the manifest of sha256 digests written at save time
    BadInput("one byte flipped inside the tensor data of model.safetensors",
             "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(
                 flipped(s.saved("projector-flipped") / "model.safetensors", -3))),
    BadInput("one byte flipped inside support.jsonl", "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained(
                 flipped(s.saved("anchors-flipped") / "support.jsonl", 3))),
    BadInput("manifest.json that is not JSON", "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(
                 truncated(s.saved("projector-manifest") / "manifest.json", 10))),
    BadInput("a file that the manifest lists is missing", "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained(without(s.saved("anchors-card") / "README.md"))),
    # hostile or broken files, checked before anything is built (manifest check off)
    BadInput("corrupted model.safetensors, verify=False", "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(
                 corrupted(s.saved("projector-corrupted-nv") / "model.safetensors"),
                 verify=False)),
    BadInput("safetensors header longer than the file, verify=False",
             "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(
                 long_header(s.saved("projector-header") / "model.safetensors"), verify=False)),
    BadInput("hidden_size = 10**9 in config.json, verify=False",
             "`RelativeProjector.from_pretrained`", edited_projector("huge", hidden_size=10**9)),
    BadInput("config.json sizes that disagree with the tensors, verify=False",
             "`RelativeProjector.from_pretrained`", edited_projector("resized-nv", num_anchors=5)),
    BadInput("num_labels = 10**9 in a head's config.json, verify=False",
             "`RelativeHeadForClassification.from_pretrained`",
             lambda s: RelativeHeadForClassification.from_pretrained(
                 resized(s.saved_head("head-huge") / "config.json", num_labels=10**9),
                 verify=False)),
    BadInput("config.json of a newer format_version, verify=False",
             "`RelativeProjector.from_pretrained`", edited_projector("newer", format_version=99)),
    BadInput("a projector's config.json given to the head class, verify=False",
             "`RelativeHeadForClassification.from_pretrained`",
             lambda s: RelativeHeadForClassification.from_pretrained(
                 s.saved("projector-as-head"), verify=False)),
    BadInput("anchor_set.json whose encoders is not a list, verify=False",
             "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained(
                 resized(s.saved("anchors-types") / "anchor_set.json", encoders=5),
                 verify=False)),
    BadInput("support.jsonl with fewer rows than the mixture mixes, verify=False",
             "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained(
                 truncated_lines(s.saved("anchors-rows") / "support.jsonl", 3), verify=False)),
    BadInput("an anchor set folder given to the projector class",
             "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(s.saved("anchors-as-projector"))),
    # paths
    BadInput("a local folder that does not exist", "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(str(s.folder / "no" / "such"))),
    BadInput("a local folder that does not exist", "`RelativeHeadForClassification.from_pretrained`",
             lambda s: RelativeHeadForClassification.from_pretrained("./no-such-head")),
    BadInput("a local folder that does not exist", "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained("runs/2026/no-such-anchors")),
    BadInput("a local folder that does not exist", "`RelativeWrapper.from_pretrained`",
             lambda s: RelativeWrapper.from_pretrained("./no-such-encoder", s.saved("projector"))),
    BadInput("a file instead of a folder", "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained(s.saved("anchors-file") / "support.jsonl")),
    # concurrent writers
    BadInput("a save of a folder that another save holds", "`RelativeProjector.save_pretrained`",
             saved_while_locked),
    # names and modes
    BadInput("unknown similarity", "`RelativeProjectorConfig`",
             lambda s: RelativeProjectorConfig(similarity="dot")),
    BadInput("unknown similarity", "`relative_projection`",
             lambda s: relative_projection(X, s.data[:4].float(), similarity="angular")),
    BadInput("invalid pooling", "`RelativeWrapper`",
             lambda s: s.wrapper(pooling="max")),
    BadInput("invalid pooling", "`extract_embeddings`",
             lambda s: extract_embeddings(
                 s.encoder, s.tokenizer, datasets.Dataset.from_dict({"text": ["a b", "b"]}),
                 pooling="max", cache_dir=s.folder / "cache")),
    # wrapper inputs
    BadInput("empty input list", "`RelativeWrapper.encode`",
             lambda s: s.wrapper().encode([])),
    BadInput("an empty string among the texts (no tokens)", "`RelativeWrapper.encode`",
             lambda s: s.wrapper().encode(["a b", "b", ""])),
    BadInput("a single string instead of a list", "`RelativeWrapper.encode`",
             lambda s: s.wrapper().encode("a b")),
    # training runs
    BadInput("resumed run with a changed learning rate", "`ParamTrainer.train`",
             resumed_with_changed_arguments),
    BadInput("resume_from_checkpoint=True without a checkpoint", "`ParamTrainer.train`",
             lambda s: s.trainer().train(resume_from_checkpoint=True)),
    # shared linear anchor sets (closed form) and anchor set fingerprints
    BadInput("one training encoder only", "`AnchorSet.shared_linear`",
             lambda s: AnchorSet.shared_linear(SUPPORT, {"e0": s.spaces["e0"]}, 4,
                                               support_rows=range(16))),
    BadInput("NaN in a training encoder's fit embeddings", "`AnchorSet.shared_linear`",
             lambda s: AnchorSet.shared_linear(
                 SUPPORT, {**s.spaces, "e1": with_nan(s.spaces["e1"], 150)}, 4,
                 support_rows=range(16))),
    BadInput("head of another local anchor set (same number of anchors)",
             "`RelativeWrapper.with_head`",
             lambda s: s.wrapper(local_projector(s, seed=1)).with_head(
                 RelativeHeadForClassification.for_projector(local_projector(s, seed=0),
                                                             num_labels=2))),
    # sentence-transformers
    BadInput("a RelativeProjection of a repo id instead of a projector", "`RelativeProjection`",
             lambda s: st_module().RelativeProjection("org/projector")),
    BadInput("a projector of another embedding size", "`add_relative_projection`",
             lambda s: st_module().add_relative_projection(st_dense(8, 5), s.projector)),
    BadInput("a second RelativeProjection", "`add_relative_projection`",
             lambda s: st_module().add_relative_projection(
                 st_module().add_relative_projection(st_dense(8, 8), s.projector), s.projector)),
    BadInput("onboarding a SentenceTransformer on non-text support",
             "`projector_from_sentence_transformer`",
             lambda s: st_module().projector_from_sentence_transformer(
                 st_dense(8, 8), AnchorSet(torch.full((1, 2), 0.5), [{"index": 0}, {"index": 1}]),
                 ["a", "b"])),
    BadInput("unknown key in relative_projection.json", "`RelativeProjection.load`",
             lambda s: st_module().RelativeProjection.load(str(
                 resized(saved_st_module(s) / "relative_projection.json", scale=2)))),
    # GGUF encoders
    BadInput("a GGUF encoder id that is neither a local file nor a Hub path", "`EncoderSpec.parse`",
             lambda s: EncoderSpec.parse("model.Q4_K_M.gguf:last")),
    BadInput("a GGUF file other than the one the projector was built on",
             "`RelativeWrapper.from_pretrained`", gguf_file_mismatch),
    # any encoder: specs of every kind, callables, precomputed embeddings, local data files
    BadInput("an encoder spec of no known kind", "`parse_encoder` (`relrep-hf embed --encoder`)",
             lambda s: parse_encoder("my model:mean:x")),
    BadInput("a callable spec without its function", "`parse_encoder`",
             lambda s: parse_encoder("py:numpy")),
    BadInput("a callable whose module does not import", "`array_embeddings`",
             lambda s: array_embeddings(ArraySpec("callable", "no_such_module:encode"), THREE)),
    BadInput("a callable that returns no [N, d] array", "`array_embeddings`",
             lambda s: array_embeddings(ArraySpec("callable", "builtins:sorted"), THREE,
                                        cache_dir=s.folder)),
    BadInput("a spec ending in '#' with no column", "`parse_encoder`",
             lambda s: parse_encoder("minilm:mean#")),
    BadInput("precomputed embeddings named with a space", "`parse_encoder` (`--embeddings`)",
             lambda s: parse_encoder("old model=old.npy")),
    BadInput("precomputed embeddings in an unknown format", "`array_embeddings`",
             lambda s: array_embeddings(ArraySpec("precomputed", str(written(s, "old.txt")), "old"),
                                        THREE)),
    BadInput("precomputed embeddings not row-aligned with the texts", "`array_embeddings`",
             lambda s: array_embeddings(ArraySpec("precomputed", str(written(s, "old.npy")), "old"),
                                        THREE.select(range(2)))),
    BadInput("a local data file without the input column", "`relrep-hf embed --dataset FILE.jsonl`",
             lambda s: load_dataset_for_run(str(written(s, "rows.jsonl")), column="sentence")),
    # what a newcomer passes (NumPy, lists, the wrong folder, sizes that do not fit)
    BadInput("a NumPy array of integers", "`RelativeProjector.forward`",
             lambda s: s.projector(np.ones((2, 8), dtype=np.int64))),
    BadInput("a list of rows of different lengths", "`Statistics.from_embeddings`",
             lambda s: Statistics.from_embeddings([[0.0, 1.0], [2.0]])),
    BadInput("class names the head does not know", "`HeadTrainer`",
             lambda s: HeadTrainer(s.head(), HeadTrainingArguments(str(s.folder / "h")),
                                   torch.zeros(2, 8), ["cat", "dog"])),
    BadInput("no encoders' features (an empty mapping)", "`HeadTrainer`",
             lambda s: HeadTrainer(s.head(), HeadTrainingArguments(str(s.folder / "h")),
                                   {}, [0, 1])),
    BadInput("one encoder's features with other rows than the labels", "`HeadTrainer`",
             lambda s: HeadTrainer(s.head(), HeadTrainingArguments(str(s.folder / "h")),
                                   {"e0": torch.zeros(2, 8), "e1": torch.zeros(3, 8)}, [0, 1])),
    BadInput("a negative direction tolerance", "`HeadTrainingArguments`",
             lambda s: HeadTrainingArguments(str(s.folder / "h"), direction_tolerance=-0.1)),
    BadInput("a head reading more directions than it has anchors", "`RelativeHeadConfig`",
             lambda s: RelativeHeadConfig(num_anchors=8, num_directions=9)),
    BadInput("parallel sets of different lengths", "`ZeroShotStitching`",
             lambda s: ZeroShotStitching({n: EncoderData(x, None, x, None, parallel=x[:50 + i])
                                          for i, (n, x) in enumerate(s.spaces.items())},
                                         support=range(8))),
    BadInput("an unknown test encoder", "`ZeroShotStitching.classification`",
             lambda s: ZeroShotStitching({n: EncoderData(x, None, x, None, parallel=x)
                                          for n, x in s.spaces.items()},
                                         support=range(8)).classification(targets=["e9"])),
    BadInput("an anchor set folder", "`RelativeProjector.from_pretrained`",
             lambda s: RelativeProjector.from_pretrained(s.saved("anchors-for-projector"))),
    BadInput("a projector folder", "`AnchorSet.from_pretrained`",
             lambda s: AnchorSet.from_pretrained(s.saved("projector-for-anchors"))),
    BadInput("demo sizes that do not fit the rows", "`relrep-hf demo` (`demo_sizes`)",
             lambda s: demo_sizes(4192, limit=500, support_size=900)),
    # the registry of encoder kinds (issue #32)
    BadInput("an encoder kind registered twice", "`register_encoder_kind`",
             lambda s: register_encoder_kind(ENCODER_KINDS["gguf"])),
    BadInput("an encoder kind no entry registers", "`encoder_kind`",
             lambda s: encoder_kind("toy")),
    BadInput("an anchor method registered twice", "`register_anchor_method`",
             lambda s: register_anchor_method(ANCHOR_METHODS["param"])),
    BadInput("a similarity's name instead of its entry", "`register_similarity`",
             lambda s: register_similarity("cosine")),
    BadInput("a .gguf file that is not GGUF", "`gguf_quantization` (a GGUF encoder's load)",
             lambda s: gguf_quantization(gguf_file_of(s, b"not a model"))),
    BadInput("a GGUF file cut short in its metadata", "`gguf_quantization` (a GGUF encoder's load)",
             lambda s: gguf_quantization(gguf_file_of(s, b"GGUF" + bytes([3, 0, 0, 0]) + bytes(8)
                                                      + bytes([5]) + bytes(7) + bytes(12)))),
    BadInput("a GGUF key whose length is 2^62 bytes", "`gguf_quantization` (a GGUF encoder's load)",
             lambda s: gguf_quantization(gguf_file_of(s, b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**62)
                                                      + bytes(40)))),
    BadInput("a lazy package's `__init__.pyi` missing (an incomplete install)", "`stub_names`",
             lambda s: stub_names(str(s.folder / "__init__.py"))),
]  # fmt: skip


BAD_INPUTS += [BadInput(*case) for case in hostile_inputs.CASES]  # issue #25
BAD_INPUTS += [BadInput(*case) for case in migration_inputs.CASES]  # issue #31
BAD_INPUTS += [BadInput(*case) for case in device_inputs.CASES]  # issues #38, #37
BAD_INPUTS += [BadInput(*case) for case in bridge_inputs.CASES]  # issue #37
BAD_INPUTS += [BadInput(*case) for case in artifact_inputs.CASES]  # issues #36, #37
BAD_INPUTS += [BadInput(*case) for case in database_inputs.CASES]  # issue #37
BAD_INPUTS += [BadInput(*case) for case in trainer_inputs.CASES]  # issue #47 item 4
BAD_INPUTS += [BadInput(*case) for case in quickstart_inputs.CASES]  # issue #47
BAD_INPUTS += [BadInput(*case) for case in reembed_inputs.CASES]  # issue #46 items 1, 2


def shared_linear(s: Setup, num_anchors: int, rows: int | None = None) -> AnchorSet:
    """A shared linear anchor set over SUPPORT (rows 0..15) fitted on ``rows`` rows."""
    return AnchorSet.shared_linear(SUPPORT, s.spaces, num_anchors, support_rows=range(16),
                                   fit_rows=None if rows is None else range(rows))  # fmt: skip


def local_projector(s: Setup, *, seed: int) -> RelativeProjector:
    """The 8-d encoder's projector of a local (unpushed) random anchor set of 8 anchors."""
    anchor_set = AnchorSet.random(SUPPORT, 8, seed=seed)
    return RelativeProjector.from_anchor_set(anchor_set, s.data[:16], s.stats, pooling="mean")


THREE = datasets.Dataset.from_dict({"text": ["one", "two", "three"]})


def written(s: Setup, name: str) -> Path:
    """A small real file in the setup's folder: 3 embeddings (.npy, .txt) or 3 rows (.jsonl)."""
    path = s.folder / name
    if name.endswith(".jsonl"):
        path.write_text("".join(f'{{"text": "{t}"}}\n' for t in THREE["text"]))
    elif name.endswith(".npy"):
        np.save(path, np.ones((3, 4), dtype=np.float32))
    else:
        path.write_text("1 2 3\n")
    return path


def first_sentence(message: str) -> str:
    """Up to the first period followed by a capital (so "e.g. -1" does not end it)."""
    message = " ".join(message.split())
    match = re.search(r"[.!?](?=\s+[A-Z])", message)
    return message if match is None else message[: match.end()]


TABLE_HEAD = ["| input | where | error |", "| --- | --- | --- |"]


def bad_input_row(case: BadInput, setup: object, folder: Path, shown=lambda m: m) -> str:
    """Run one case with ``setup``; the markdown table row of what it raises (``folder``
    shown as <folder>, and ``shown`` replacing what else differs between runs)."""
    try:
        case.call(setup)
    except Exception as error:  # recording whatever each case raises
        text = shown(first_sentence(str(error)).replace(str(folder), "<folder>"))
        text = text.replace("|", r"\|")
        return f"| {case.input} | {case.where} | {type(error).__name__}: {text} |"
    return f"| {case.input} | {case.where} | (no error) |"


def bad_input_table(folder: Path) -> list[str]:
    """Run every case on one setup, in order; the markdown table of what each raises."""
    return table_of(BAD_INPUTS, Setup(folder), folder)


def table_of(cases: list[BadInput], setup: object, folder: Path, shown=lambda m: m) -> list[str]:
    """The markdown table of what each of ``cases`` raises, called with ``setup`` in order."""
    return [*TABLE_HEAD, *(bad_input_row(case, setup, folder, shown) for case in cases)]


# Sections of their own at the end of docs/bad_inputs.md, one module each: its ``SECTION``
# heading, its ``CASES`` and the ``Context(folder)`` they are called with (``close()``, and
# ``shown(message)``: what differs between runs replaced)
SECTIONS = [store_safety_inputs, store_space_inputs, store_limits_inputs]  # issue #46


def section_table(module, folder: Path) -> list[str]:
    """A section's heading and the table of what its cases raise."""
    context = module.Context(folder)
    try:
        cases = [BadInput(*case) for case in module.CASES]
        return [module.SECTION, *table_of(cases, context, folder, context.shown)]
    finally:
        context.close()


def documented_table() -> list[str]:
    """The generated table: the rows before the first ``## `` section."""
    main = BAD_INPUTS_DOC.read_text().split("\n## ", 1)[0]
    return [line for line in main.splitlines() if line.startswith("|")]


def documented_sections(headings: set[str] | None = None) -> list[list[str]]:
    """Each section after the main table: its heading and its table's lines (only those whose
    heading is in ``headings``, when given)."""
    sections = BAD_INPUTS_DOC.read_text().split("\n## ")[1:]
    found = [
        ["## " + lines[0]] + [line for line in lines[1:] if line.startswith("|")]
        for lines in (section.splitlines() for section in sections)
    ]
    return [s for s in found if headings is None or s[0] in headings]


def written_sections(text: str) -> list[str]:
    """The sections written by hand (their rows tested where the feature is), kept as written
    when the generated parts are regenerated."""
    generated = {module.SECTION for module in SECTIONS}
    sections = ["## " + section for section in text.split("\n## ")[1:]]
    return [s.rstrip("\n") for s in sections if s.splitlines()[0] not in generated]


@pytest.mark.slow
def test_bad_input_sections_are_current(tmp_path):
    tables = [section_table(module, tmp_path / str(i)) for i, module in enumerate(SECTIONS)]
    silent = [line for table in tables for line in table if line.endswith("(no error) |")]
    assert silent == [], "these bad inputs raise nothing"
    assert documented_sections({m.SECTION for m in SECTIONS}) == tables, (
        "docs/bad_inputs.md is stale: regenerate it with python -m tests.test_reliability"
    )


@pytest.fixture(scope="module")
def bad_input_setup(tmp_path_factory) -> Setup:
    """One setup for every case, run in the table's order (as `bad_input_table` runs them)."""
    return Setup(tmp_path_factory.mktemp("bad-inputs"))


@pytest.mark.parametrize(
    "case", BAD_INPUTS, ids=[f"row{n:03d}: {case.input}" for n, case in enumerate(BAD_INPUTS, 1)]
)
def test_bad_input_raises_what_its_row_says(case, bad_input_setup):
    """Each row of docs/bad_inputs.md is one case: a failure names its row."""
    row = bad_input_row(case, bad_input_setup, bad_input_setup.folder)
    assert not row.endswith("(no error) |"), "this bad input raises nothing"
    assert row in documented_table(), (
        f"docs/bad_inputs.md does not have this row: regenerate it with python -m "
        f"tests.test_reliability\n{row}"
    )


def test_bad_input_table_has_one_row_per_case_in_order():
    """No row without its case, none missing, in the cases' order (each case's whole row is
    checked by `test_bad_input_raises_what_its_row_says`)."""
    table = documented_table()
    assert table[:2] == TABLE_HEAD
    cases = [f"| {case.input} | {case.where} | " for case in BAD_INPUTS]
    rows = table[2:]
    assert len(rows) == len(cases), (
        "docs/bad_inputs.md is stale: regenerate it with python -m tests.test_reliability"
    )
    stale = [(row, case) for row, case in zip(rows, cases, strict=True) if not row.startswith(case)]
    assert stale == [], (
        "docs/bad_inputs.md is stale: regenerate it with python -m tests.test_reliability"
    )


def write_bad_inputs_doc() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        table = bad_input_table(Path(folder))
        sections = [section_table(m, Path(folder) / str(i)) for i, m in enumerate(SECTIONS)]
    text = BAD_INPUTS_DOC.read_text() if BAD_INPUTS_DOC.exists() else ""
    head = text.split("\n|", 1)[0].rstrip("\n") if text else "# Bad inputs"
    BAD_INPUTS_DOC.parent.mkdir(exist_ok=True)
    parts = [head, "\n".join(table)]
    parts += [section[0] + "\n\n" + "\n".join(section[1:]) for section in sections]
    parts += written_sections(text)
    BAD_INPUTS_DOC.write_text("\n\n".join(parts) + "\n")


if __name__ == "__main__":
    write_bad_inputs_doc()
