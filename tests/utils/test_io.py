"""Folder saves publish exactly the artifact's files, with the umask's modes, durably.

* A new save replaces the whole folder: an old head's ``metrics.json`` does not survive it
  (issue 15, bug 2), and neither does its accuracy on the card.
* Saved files get the mode of an ordinary new file under the user's umask (not a temporary
  file's 0600).
* Durability: every file is fsynced, then the staging folder, then the swap is made, then the
  parent folder is fsynced. Checked with real ``strace`` of a save in a fresh interpreter
  where strace is installed, and with an ``os.fsync`` spy in this process (which also walks
  the fallback commit that has no ``renameat2``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from relrep_hf import AnchorSet, RelativeHeadConfig, RelativeProjector, Statistics
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    write_head_metrics,
)
from relrep_hf.utils import io as relrep_io
from tests.fixtures import child_env

REPO = Path(__file__).resolve().parents[2]


def projector(seed: int = 0) -> RelativeProjector:
    data = torch.randn(64, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return RelativeProjector.from_statistics(data[:4], Statistics.from_embeddings(data))


def head(seed: int = 0) -> RelativeHeadForClassification:
    torch.manual_seed(seed)
    return RelativeHeadForClassification(RelativeHeadConfig(num_anchors=4, num_labels=3))


def anchor_set() -> AnchorSet:
    return AnchorSet.random([f"text {i}" for i in range(6)], num_anchors=3, seed=0)


# ---------------------------------------------------------------------------------------------
# Exactly the files of the new save (issue 15, bug 2)
# ---------------------------------------------------------------------------------------------


def test_a_new_head_saved_over_an_evaluated_one_keeps_no_stale_metrics(tmp_path):
    folder = tmp_path / "head"
    head(0).save_pretrained(folder)
    write_head_metrics(folder, {"encoder-a": {"accuracy": 0.987654}})
    assert "0.987654" in (folder / "README.md").read_text()
    (folder / "notes.txt").write_text("not part of any artifact")

    head(1).save_pretrained(folder)

    fresh = tmp_path / "fresh"
    head(1).save_pretrained(fresh)
    # the head's own stale file is gone; the user's file beside it is kept (issue #37)
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([*(p.name for p in fresh.iterdir()), "notes.txt"])
    assert (folder / "notes.txt").read_text() == "not part of any artifact"
    assert not (folder / "metrics.json").exists()
    assert "0.987654" not in (folder / "README.md").read_text()
    for name in ("config.json", "model.safetensors", "README.md", "manifest.json"):
        assert (folder / name).read_bytes() == (fresh / name).read_bytes(), name
    RelativeHeadForClassification.from_pretrained(folder)


def test_keep_carries_only_the_named_entries_over(tmp_path):
    folder = tmp_path / "anchors"
    anchor_set().save_pretrained(folder)
    (folder / "checkpoint-4").mkdir()
    (folder / "checkpoint-4" / "state.json").write_text("{}")
    (folder / "stale.txt").write_text("old")
    with relrep_io.atomic_directory(folder, keep=("checkpoint-*",)) as staging:
        anchor_set()._save_files(staging)
    assert (folder / "checkpoint-4" / "state.json").read_text() == "{}"
    assert not (folder / "stale.txt").exists()
    (folder / "stale.txt").write_text("the user's")  # an artifact's save keeps it (issue #37)
    anchor_set().save_pretrained(folder, keep=("checkpoint-*",))
    assert (folder / "stale.txt").read_text() == "the user's"
    assert [p.name for p in tmp_path.iterdir()] == ["anchors"]  # nothing left beside it


# ---------------------------------------------------------------------------------------------
# File modes (issue 18, item 3)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(params=[0o022, 0o077], ids=["umask022", "umask077"])
def umask(request):
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def modes(folder: Path) -> dict[str, int]:
    return {
        p.relative_to(folder).as_posix(): stat.S_IMODE(p.stat().st_mode)
        for p in [folder, *folder.rglob("*")]
    }


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_saved_files_get_the_modes_of_ordinary_new_files(umask, tmp_path):
    file_mode, folder_mode = 0o666 & ~umask, 0o777 & ~umask
    projector().save_pretrained(tmp_path / "projector")
    head().save_pretrained(tmp_path / "head")
    write_head_metrics(tmp_path / "head", {"a": {"accuracy": 0.5}})
    anchor_set().save_pretrained(tmp_path / "anchors")
    anchor_set().save_pretrained(tmp_path / "anchors")  # over an existing folder too
    # the main job's files (run.json, report.json, report.md) go through atomic_write_bytes
    relrep_io.atomic_write_bytes(tmp_path / "run" / "report.json", b"{}\n")
    relrep_io.atomic_write_bytes(tmp_path / "run" / "report.json", b"{}\n")
    expected_files = {
        "projector": {"model.safetensors", "config.json", "manifest.json", "README.md"},
        "head": {"model.safetensors", "metrics.json", "manifest.json", "README.md"},
        "anchors": {"anchor_set.safetensors", "anchor_set.json", "support.jsonl"},
        "run": {"report.json"},
    }
    for name, required in expected_files.items():
        found = modes(tmp_path / name)
        assert required <= set(found), (name, sorted(found))
        wrong = {
            path: oct(mode)
            for path, mode in found.items()
            if mode != (folder_mode if (tmp_path / name / path).is_dir() else file_mode)
        }
        assert wrong == {}, f"{name}: modes other than {oct(file_mode)} / {oct(folder_mode)}"


# ---------------------------------------------------------------------------------------------
# Durability: fsync order
# ---------------------------------------------------------------------------------------------

SAVE_UNDER_STRACE = """
import sys, torch
from relrep_hf import RelativeProjector, Statistics
data = torch.randn(64, 8, dtype=torch.float64)
projector = RelativeProjector.from_statistics(data[:4], Statistics.from_embeddings(data))
projector.save_pretrained(sys.argv[1])  # a first save: renamed into place
projector.save_pretrained(sys.argv[1])  # over it: swapped
"""


def check_order(events: list[tuple[str, str]], target: Path, *, swap: str) -> None:
    """Per save: each file of the staging folder fsynced, then the staging folder, then the
    swap (``swap``: the event that commits), then the parent folder."""
    parent = str(target.parent)
    prefix = str(target.parent / f".{target.name}.tmp-")
    commits = [  # renames of a staging folder itself (not of files inside it)
        i
        for i, (kind, path) in enumerate(events)
        if kind == swap and path.startswith(prefix) and "/" not in path[len(prefix) :]
    ]
    assert commits, f"no {swap} in {events}"
    for commit in commits:
        before = events[:commit]
        staging = events[commit][1]
        assert staging.startswith(prefix), events[commit]
        synced = [path for kind, path in before if kind == "fsync"]
        files = {"config.json", "model.safetensors", "manifest.json", "README.md"}
        synced_files = {Path(p).name for p in synced if p.startswith(staging + "/")}
        assert files <= synced_files, f"files not fsynced before the swap: {files - synced_files}"
        last_file = max(i for i, p in enumerate(synced) if p.startswith(staging + "/"))
        assert staging in synced[last_file:], "the staging folder is not fsynced after its files"
        after = [path for kind, path in events[commit + 1 :] if kind == "fsync"]
        assert after and after[0] == parent, f"the parent is not fsynced right after: {after[:3]}"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_fsync_order_of_a_real_save_under_strace(tmp_path):
    target = tmp_path / "projector"
    log = tmp_path / "strace.log"
    env = child_env()
    subprocess.run(
        # --seccomp-bpf: the child stops only at the traced calls, not at each of the ~100,000
        # calls of importing torch (3 s of CPU less, strace >= 5.3)
        ["strace", "-f", "--seccomp-bpf", "-y", "-qq", "-o", str(log),
         "-e", "trace=fsync,fdatasync,rename,renameat,renameat2",
         sys.executable, "-c", textwrap.dedent(SAVE_UNDER_STRACE), str(target)],
        env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    events = []
    for line in log.read_text().splitlines():
        if found := re.search(r"\b(fsync|fdatasync)\(\d+<(.*?)>\)\s+= 0", line):
            events.append(("fsync", found.group(2)))
        elif found := re.search(
            r"\brenameat2\(AT_FDCWD(?:<[^>]*>)?, \"(.*?)\".*RENAME_EXCHANGE", line
        ):
            events.append(("exchange", found.group(1)))
        elif found := re.search(r"\brename(?:at2?)?\((?:AT_FDCWD(?:<[^>]*>)?, )?\"(.*?)\"", line):
            events.append(("rename", found.group(1)))
    assert any(kind == "exchange" for kind, _ in events), "the second save made no swap"
    first_save = events[: next(i for i, e in enumerate(events) if e[0] == "exchange")]
    check_order(first_save, target, swap="rename")
    check_order(events, target, swap="exchange")


@pytest.fixture
def spy(monkeypatch):
    """Record fsyncs (by path) and the commit's renames, in order, in this process."""
    events: list[tuple[str, str]] = []
    real_fsync, real_rename, real_exchange = os.fsync, os.rename, relrep_io._exchange

    def fsync(fd: int) -> None:
        real_fsync(fd)
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))

    def rename(source, destination) -> None:
        real_rename(source, destination)
        events.append(("rename", str(source)))

    def exchange(first, second) -> bool:
        done = real_exchange(first, second)
        if done:
            events.append(("exchange", str(first)))
        return done

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(relrep_io, "_exchange", exchange)
    return events


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name fds")
def test_fsync_order_with_a_spy(spy, tmp_path):
    target = tmp_path / "projector"
    projector().save_pretrained(target)
    check_order(list(spy), target, swap="rename")
    spy.clear()
    projector().save_pretrained(target)
    check_order(list(spy), target, swap="exchange")


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name fds")
def test_the_fallback_commit_without_renameat2_is_durable_and_complete(spy, monkeypatch, tmp_path):
    monkeypatch.setattr(relrep_io, "_exchange", lambda first, second: False)
    target = tmp_path / "projector"
    projector(0).save_pretrained(target)
    (target / "stale.txt").write_text("old")
    spy.clear()
    projector(1).save_pretrained(target)
    # old folder moved aside (parent fsynced), staging renamed into place (parent fsynced)
    renames = [Path(path).name for kind, path in spy if kind == "rename"]
    assert renames[0] == "projector" and renames[1].startswith(".projector.tmp-"), renames
    check_order(list(spy), target, swap="rename")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["projector"]
    assert (target / "stale.txt").read_text() == "old"  # the user's file is kept (issue #37)
    loaded = RelativeProjector.from_pretrained(target)
    assert torch.equal(loaded.weight, projector(1).weight)


@pytest.mark.slow
def test_an_old_folder_left_aside_by_a_killed_fallback_commit_is_moved_back(tmp_path):
    target = tmp_path / "anchors"
    anchor_set().save_pretrained(target)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    aside = tmp_path / f"{relrep_io._aside_prefix(target)}{dead}-0000"
    os.rename(target, aside)  # as if killed between the two renames of the fallback
    AnchorSet.random(["x", "y", "z"], num_anchors=2).save_pretrained(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["anchors"]
    assert AnchorSet.from_pretrained(target).support == ["x", "y", "z"]


def test_trainer_checkpoints_are_durable(spy, tmp_path):
    from relrep_hf import ParamTrainer, ParamTrainingArguments
    from tests.fixtures.synthetic import affine_spaces

    spaces = affine_spaces(("e0", "e1"), n=200, d=8)
    args = ParamTrainingArguments(
        str(tmp_path / "run"), num_anchors=4, support_size=32, num_train_epochs=2,
        train_batch_size=100, save_strategy="epoch", disable_tqdm=True,
    )  # fmt: skip
    ParamTrainer(args, spaces).train()
    checkpoint = args.checkpoint_dir / "checkpoint-2"  # beside the anchor set
    assert (checkpoint / "trainer_state.json").is_file() or any(checkpoint.iterdir())
    synced = [path for kind, path in spy if kind == "fsync"]
    staging = str(args.checkpoint_dir / ".checkpoint-2.tmp")
    written = {str(p).replace(str(checkpoint), staging) for p in checkpoint.rglob("*")}
    assert written <= set(synced), f"not fsynced: {sorted(written - set(synced))}"
    assert synced.index(staging) > max(synced.index(p) for p in written)
    assert json.loads((tmp_path / "run" / "anchor_set.json").read_text())["num_anchors"] == 4
