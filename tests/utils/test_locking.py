"""Concurrent writers: real processes saving (or pushing) to the same folder (or repo) at once.

The result is always one complete artifact, never a mix; a save that overlapped another is
refused (`FolderLockedError`, or a `HubError` for a push whose branch moved), so no process
reports success for a save that another replaced while it was being written. Successful saves
of two processes never overlap in time, and the folder holds the last one.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from relrep_hf.utils.locking import FolderLockedError, folder_lock, lock_path
from tests.fixtures import killable_save
from tests.fixtures.hub_encoders import fork_client
from tests.fixtures.hub_server import LocalHub
from tests.test_reliability import References, files_of, finish, start

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 12

needs_fork = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork"
)


def saver(kind: str, folder: Path, first: int, go: float, log: Path) -> None:
    """Save versions ``first .. first + ROUNDS - 1``, starting at ``go``; log each outcome and,
    for a save that went through, when it held the folder's lock."""
    from relrep_hf.utils import io as relrep_io

    held: list[float] = []
    real_lock = relrep_io.folder_lock

    @contextlib.contextmanager
    def timed_lock(target):
        with real_lock(target):
            held.append(time.monotonic())
            yield
            held.append(time.monotonic())

    relrep_io.folder_lock = timed_lock  # this child process only
    outcomes = []
    while time.monotonic() < go:
        pass
    for version in range(first, first + ROUNDS):
        artifact = killable_save.VERSIONS[kind](version, **killable_save.LARGE)
        held.clear()
        try:
            artifact.save_pretrained(folder)
            outcomes.append({"version": version, "outcome": "saved", "held": list(held)})
        except FolderLockedError:
            outcomes.append({"version": version, "outcome": "refused"})
    log.write_text(json.dumps(outcomes))


@pytest.mark.slow
@needs_fork
@pytest.mark.parametrize("kind", ["projector", "anchor_set"])
def test_two_processes_saving_one_folder_at_once(kind, tmp_path):
    folder = tmp_path / "root" / "artifact"
    references = References(kind, killable_save.LARGE, tmp_path / "references")
    go = time.monotonic() + 1.0
    logs = [tmp_path / "a.json", tmp_path / "b.json"]
    processes = [start(saver, kind, folder, first, go, log)
                 for first, log in zip((0, 1000), logs, strict=True)]  # fmt: skip
    assert [finish(p, timeout=300) for p in processes] == [0, 0]
    outcomes = [o for log in logs for o in json.loads(log.read_text())]
    saved = sorted((o for o in outcomes if o["outcome"] == "saved"), key=lambda o: o["held"])
    refused = [o for o in outcomes if o["outcome"] == "refused"]
    print(f"{kind}: {len(saved)} saves succeeded, {len(refused)} refused")
    assert saved, "no save succeeded"
    assert refused, "the two processes never saved at the same time: the test proved nothing"
    # successful saves never overlapped: each released the folder before the next took it
    for before, after in zip(saved, saved[1:], strict=False):
        assert before["held"][1] <= after["held"][0], (before, after)
    # the folder holds exactly the last successful save, complete
    version = killable_save.version_of(kind, folder)
    assert version == saved[-1]["version"]
    assert files_of(folder) == references[version]
    assert sorted(p.name for p in folder.parent.iterdir()) == ["artifact"]  # no lock, no staging


@pytest.mark.slow
def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    folder = tmp_path / "artifact"
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from pathlib import Path
            from relrep_hf.utils.locking import folder_lock
            with folder_lock({str(folder)!r}):
                Path({str(ready)!r}).write_text("locked")
                time.sleep(600)
        """)],
        env={"PYTHONPATH": str(REPO), "PATH": ""},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.01)
        with (
            pytest.raises(FolderLockedError, match=rf"It is process {holder.pid} on"),
            folder_lock(folder),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    assert lock_path(folder).exists()  # left by the killed holder...
    with folder_lock(folder):  # ...and free: the kernel released the lock with its process
        pass
    assert not lock_path(folder).exists()


PUSHER = r"""
import json, sys, time
from pathlib import Path
import torch
from relrep_hf import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import write_head_metrics
from relrep_hf.publishing.hub import HubError, push_artifact
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification

work, repo_id, first, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
folders = []
for version in range(first, first + 6):  # even versions carry metrics.json, odd ones do not
    torch.manual_seed(version)
    config = RelativeHeadConfig(num_anchors=4, num_labels=2, anchor_set_revision=str(version))
    folder = work / f"head-{version}"
    RelativeHeadForClassification(config).save_pretrained(folder)
    if version % 2 == 0:
        write_head_metrics(folder, {"enc": {"accuracy": version / 1000}})
    folders.append((version, folder))
(work / "ready").write_text("ready")  # imported and saved: the test says go to both at once
while not go.exists():
    time.sleep(0.001)
outcomes = []
for version, folder in folders:
    try:
        sha = push_artifact(folder, repo_id)
        outcomes.append({"version": version, "sha": sha})
    except HubError as error:
        assert "Another push changed" in str(error), error
        outcomes.append({"version": version, "sha": None})
(work / "outcomes.json").write_text(json.dumps(outcomes))
if len(sys.argv) < 6:
    sys.exit()
check = Path(sys.argv[5])  # this pusher then checks the repo (CHECKER), when the test says so
while not check.exists():
    time.sleep(0.001)
"""

CHECKER = r"""
from huggingface_hub import HfApi
api = HfApi()
head = RelativeHeadForClassification.from_pretrained(repo_id)  # verified against its manifest
version = int(head.config.anchor_set_revision)
files = sorted(api.list_repo_files(repo_id))
commits = [c.commit_id for c in api.list_repo_commits(repo_id)]
# the test process made the Hub answer the next commit with 412, as when a push overtook it
import torch
from relrep_hf import RelativeHeadConfig
from relrep_hf.publishing.hub import HubError
torch.manual_seed(7)
late = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=4, num_labels=2))
try:
    late.push_to_hub(repo_id)
except HubError as error:
    assert "Another push changed" in str(error), error
else:
    raise AssertionError("a push answered 412 reported success")
assert [c.commit_id for c in api.list_repo_commits(repo_id)] == commits
print(json.dumps({"version": version, "files": files, "commits": commits}))
"""


@pytest.mark.slow
@needs_fork
def test_two_processes_pushing_one_repo_at_once(tmp_path):
    with LocalHub() as hub:
        repo_id = f"{hub.user}/head"
        go = tmp_path / "go"  # made once both processes have saved their versions
        check = tmp_path / "check"  # made once both have pushed: pusher a then checks the repo
        pushers = [  # two processes forked from this one: their concurrency is the point
            fork_client(
                hub, PUSHER + CHECKER, tmp_path / name, repo_id, first, go, *checks, home=tmp_path
            )
            for name, first, checks in (("a", 0, [check]), ("b", 100, []))
        ]
        try:
            for step, stage in ((go, "ready"), (check, "outcomes.json")):
                deadline = time.monotonic() + 300
                while not all((tmp_path / name / stage).exists() for name in ("a", "b")):
                    assert time.monotonic() < deadline, f"the pushers wrote no {stage} in 300 s"
                    running = [(tmp_path / name / stage).exists() or p.poll() is None
                               for name, p in zip(("a", "b"), pushers, strict=True)]  # fmt: skip
                    assert all(running), [p.output() for p in pushers if p.poll() is not None]
                    time.sleep(0.01)
                if step == check:
                    # the next commit is answered 412, as when a push overtook it
                    hub.fail_next("POST", f"/api/models/{repo_id}/commit", status=412,
                                  message="A commit has happened since. Please refresh and try again.")  # fmt: skip
                step.write_text("go")
            for pusher in pushers:
                pusher.wait(300)
        finally:  # a pusher left waiting for a step would hold this process's pipes
            for pusher in pushers:
                pusher.kill()
        results = [pusher.output() for pusher in pushers]
        for pusher, (_, err) in zip(pushers, results, strict=True):
            assert pusher.returncode == 0, err[-5000:]
    logs = [tmp_path / name / "outcomes.json" for name in ("a", "b")]
    outcomes = [o for log in logs for o in json.loads(log.read_text())]
    state = json.loads(results[0][0].strip().splitlines()[-1])
    pushed = {o["sha"]: o["version"] for o in outcomes if o["sha"]}
    refused = [o for o in outcomes if not o["sha"]]
    print(f"pushes: {len(pushed)} committed, {len(refused)} refused as overtaken")
    # every reported success is a commit of the branch, and the branch holds nothing else
    assert set(pushed) <= set(state["commits"])
    assert len(state["commits"]) == len(pushed) + 1  # + the repo's initial commit
    # the head of the branch is exactly the last committed version: its files, no others
    last = pushed[state["commits"][0]]
    assert state["version"] == last
    expected = {"README.md", "config.json", "manifest.json", "model.safetensors", ".gitattributes"}
    expected |= {"configuration_relative_head.py", "modeling_relative_head.py"}  # remote code
    if last % 2 == 0:
        expected.add("metrics.json")
    assert set(state["files"]) == expected, state["files"]
