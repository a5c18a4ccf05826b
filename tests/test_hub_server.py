"""Tests of the local Hub server (tests/hub_server.py) with the real clients.

``huggingface_hub`` and ``transformers`` run in subprocesses whose ``HF_ENDPOINT`` points at a
:class:`LocalHub`; each subprocess runs many checks and exits non-zero on the first failure.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

try:
    from hub_server import LocalHub, git_blob_sha, hub_env
except ImportError:  # tests/ imported as a package
    from tests.hub_server import LocalHub, git_blob_sha, hub_env

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def hub():
    with LocalHub() as running:
        yield running


def run_client(script: str, env: dict, *args: str, timeout: float = 120) -> str:
    """Run ``script`` in a fresh interpreter; fail the test with its output if it fails."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"client failed:\n{proc.stdout}\n{proc.stderr[-6000:]}"
    return proc.stdout


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the protocol itself, with a bare HTTP client -----------------------------------------------


def call(hub, method, path, body=None, token=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", hub.server.server_address[1], timeout=10)
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if isinstance(body, (dict, list)):
        body, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, dict(resp.headers), resp.read()
    finally:
        conn.close()


def ndjson(*items) -> bytes:
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


def add_file(path: str, data: bytes) -> dict:
    content = base64.b64encode(data).decode()
    return {"key": "file", "value": {"path": path, "content": content, "encoding": "base64"}}


def test_raw_protocol(hub):
    token, other = hub.token, "hf_other_token"
    blob, commit_url = "/tester/raw/resolve/main/d/b.bin", "/api/models/tester/raw/commit/main"

    def create(payload, who=token):
        return call(hub, "POST", "/api/repos/create", payload, who)

    def ranged(spec):
        return call(hub, "GET", blob, headers={"Range": spec})

    status, _, body = create({"name": "raw"})
    assert status == 200 and json.loads(body)["url"] == f"{hub.endpoint}/tester/raw"
    assert create({"name": "raw"})[0] == 409
    data = bytes(range(256)) * 4
    header = {"key": "header", "value": {"summary": "add blob", "description": ""}}
    status, _, body = call(
        hub, "POST", commit_url, ndjson(header, add_file("d/b.bin", data)), token
    )
    sha = json.loads(body)["commitOid"]
    assert status == 200 and len(sha) == 40 and hub.branch_head("tester/raw") == sha

    # resolve: GET and HEAD carry the same metadata; HEAD has no body
    for method in ("GET", "HEAD"):
        status, headers, body = call(hub, method, blob)
        assert status == 200 and headers["X-Repo-Commit"] == sha
        assert headers["ETag"] == f'"{git_blob_sha(data)}"' and headers["Content-Length"] == "1024"
        assert body == (data if method == "GET" else b"")
    assert call(hub, "GET", f"/tester/raw/resolve/{sha}/d/b.bin")[2] == data
    # ranges, as used to resume downloads
    status, headers, body = ranged("bytes=1000-")
    assert (status, body, headers["Content-Range"]) == (206, data[1000:], "bytes 1000-1023/1024")
    assert ranged("bytes=2-5")[2] == data[2:6] and ranged("bytes=-3")[2] == data[-3:]
    assert ranged("bytes=5000-")[0] == 416

    # errors: status, X-Error-Code, X-Error-Message and a JSON body
    expected = {
        "/tester/nope/resolve/main/x": (404, "RepoNotFound"),
        "/tester/raw/resolve/nope/d/b.bin": (404, "RevisionNotFound"),
        "/tester/raw/resolve/main/missing": (404, "EntryNotFound"),
        "/api/models/tester/raw/revision/nope": (404, "RevisionNotFound"),
        "/api/models/tester/raw/tree/main/nope": (404, "EntryNotFound"),
    }
    for path, (code, error_code) in expected.items():
        status, headers, body = call(hub, "GET", path)
        assert (status, headers.get("X-Error-Code")) == (code, error_code), path
        assert json.loads(body)["error"] == headers["X-Error-Message"]
    assert call(hub, "GET", "/tester/raw/resolve/main/missing")[1]["X-Repo-Commit"] == sha

    # auth: bad token 401, anonymous write 401, foreign namespace 403, private repos hidden
    status, headers, _ = call(hub, "GET", "/api/models/tester/raw", token="hf_wrong")
    assert status == 401
    assert headers["X-Error-Message"] == "Invalid credentials in Authorization header"
    assert call(hub, "POST", commit_url, ndjson(header))[0] == 401
    assert call(hub, "POST", commit_url, ndjson(header), other)[0] == 403
    assert create({"name": "x", "organization": "tester"}, other)[0] == 403
    assert create({"name": "hidden", "visibility": "private"})[0] == 200
    assert call(hub, "GET", "/api/models/tester/hidden", token=token)[0] == 200
    for who in (None, other):
        status, headers, _ = call(hub, "GET", "/api/models/tester/hidden", token=who)
        assert (status, headers["X-Error-Code"]) == (404, "RepoNotFound")

    # fault injection: a status, then a dropped connection; neither creates a commit
    commit = ndjson(header, add_file("c.txt", b"c"))
    hub.fail_next("POST", "/api/models/tester/raw/commit/", status=503)
    assert call(hub, "POST", commit_url, commit, token)[0] == 503
    hub.fail_next("POST", "/api/models/tester/raw/commit/", drop=True)
    with pytest.raises(http.client.RemoteDisconnected):
        call(hub, "POST", commit_url, commit, token)
    assert hub.branch_head("tester/raw") == sha and len(hub.history("tester/raw")) == 2
    assert call(hub, "POST", commit_url, commit, token)[0] == 200  # the faults are used up


# -- huggingface_hub --------------------------------------------------------------------------

ROUND_TRIP = r"""
import json, os, sys
from pathlib import Path
import numpy as np
from safetensors.numpy import save_file
from huggingface_hub import CommitOperationCopy, HfApi, hf_hub_download, snapshot_download

work = Path(sys.argv[1])
api = HfApi()
assert api.whoami()["name"] == "tester"
repo_id = api.create_repo("round-trip").repo_id
assert repo_id == "tester/round-trip", repo_id
assert api.create_repo("round-trip", exist_ok=True).repo_id == repo_id

folder = work / "folder"
(folder / "code").mkdir(parents=True)
save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, str(folder / "model.safetensors"))
(folder / "config.json").write_text(json.dumps({"model_type": "bert", "version": 1}))
(folder / "README.md").write_text("---\nlicense: mit\ntags:\n- relrep\n---\n# Card\n")
(folder / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(3000))
(folder / "code" / "anchors.py").write_text("ANCHORS = 3\n")
expected = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

first = api.upload_folder(folder_path=folder, repo_id=repo_id, commit_message="first").oid
info = api.model_info(repo_id, files_metadata=True)
assert info.id == repo_id and info.sha == first and info.private is False, info
sizes = {s.rfilename: s.size for s in info.siblings}
assert sizes == {".gitattributes": sizes[".gitattributes"], **{p: len(d) for p, d in expected.items()}}
assert info.config == {"model_type": "bert"}, info.config
assert sorted(api.list_repo_files(repo_id)) == sorted([".gitattributes", *expected])
top = {f.path for f in api.list_repo_tree(repo_id)}
assert "code" in top and "code/anchors.py" not in top, top
for path, data in expected.items():
    assert Path(hf_hub_download(repo_id, path)).read_bytes() == data, path

api.create_tag(repo_id, tag="v1.0")
api.create_tag(repo_id, tag="release/1")  # slash: URL-encoded by the client
second = api.upload_file(path_or_fileobj=b'{"version": 2}', path_in_repo="config.json", repo_id=repo_id).oid
assert second != first
for rev, version in [(first, 1), ("v1.0", 1), ("release/1", 1), ("main", 2), (second, 2), (None, 2)]:
    path = hf_hub_download(repo_id, "config.json", revision=rev)
    assert json.loads(Path(path).read_text())["version"] == version, (rev, path)
refs = api.list_repo_refs(repo_id)
assert {t.name: t.target_commit for t in refs.tags} == {"v1.0": first, "release/1": first}
assert [(b.name, b.target_commit) for b in refs.branches] == [("main", second)]
assert [c.commit_id for c in api.list_repo_commits(repo_id)][:2] == [second, first]

api.create_branch(repo_id, branch="dev", revision="v1.0")
api.upload_file(path_or_fileobj=b"dev only", path_in_repo="dev.txt", repo_id=repo_id, revision="dev")
assert "dev.txt" in api.list_repo_files(repo_id, revision="dev")
assert "dev.txt" not in api.list_repo_files(repo_id)
assert json.loads(Path(hf_hub_download(repo_id, "config.json", revision="dev")).read_text())["version"] == 1

snap = Path(snapshot_download(repo_id))
assert snap.name == second
assert json.loads((snap / "config.json").read_text()) == {"version": 2}
for path in expected.keys() - {"config.json"}:
    assert (snap / path).read_bytes() == expected[path], path
old = Path(snapshot_download(repo_id, revision="v1.0"))
assert old.name == first and (old / "config.json").read_bytes() == expected["config.json"]

# server-side copy, file and folder deletion, paths-info
copy = CommitOperationCopy(src_path_in_repo="code/anchors.py", path_in_repo="code/copy.py")
api.create_commit(repo_id, [copy], commit_message="copy")
assert hf_hub_download(repo_id, "code/copy.py", force_download=True).endswith("copy.py")
info = api.get_paths_info(repo_id, ["code", "code/copy.py", "nope"])
assert [(type(i).__name__, i.path) for i in info] == [("RepoFolder", "code"), ("RepoFile", "code/copy.py")]
api.delete_file("plot.png", repo_id)
api.delete_folder("code", repo_id)
assert sorted(api.list_repo_files(repo_id)) == [".gitattributes", "README.md", "config.json", "model.safetensors"]
assert "code/anchors.py" in api.list_repo_files(repo_id, revision=second)  # history is kept

# datasets are repos of their own kind
ds = api.create_repo("round-trip", repo_type="dataset").repo_id
api.upload_file(path_or_fileobj=b"a,b\n1,2\n", path_in_repo="data/train.csv", repo_id=ds, repo_type="dataset")
assert Path(hf_hub_download(ds, "data/train.csv", repo_type="dataset")).read_bytes() == b"a,b\n1,2\n"
assert api.dataset_info(ds).sha == api.list_repo_commits(ds, repo_type="dataset")[0].commit_id
print(json.dumps({"first": first, "second": second, "head": api.model_info(repo_id).sha}))
"""

OFFLINE = r"""
import json, sys
from pathlib import Path
from huggingface_hub import hf_hub_download, snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError

first, second = sys.argv[1:3]
repo_id = "tester/round-trip"

def version(revision):
    return json.loads(Path(hf_hub_download(repo_id, "config.json", revision=revision)).read_text())


assert version(second) == {"version": 2}
assert version(first)["version"] == version("v1.0")["version"] == version("release/1")["version"] == 1
assert Path(hf_hub_download(repo_id, "code/copy.py")).read_text() == "ANCHORS = 3\n"  # via refs/main
assert Path(snapshot_download(repo_id, revision=second)).name == second
assert (Path(snapshot_download(repo_id, revision="v1.0")) / "code" / "anchors.py").exists()
try:
    hf_hub_download(repo_id, "never-downloaded.txt")
except LocalEntryNotFoundError:
    pass
else:
    raise AssertionError("offline mode served a file it never saw")
print("offline ok")
"""


def test_huggingface_hub_round_trip_and_offline_cache(hub, tmp_path):
    env = hub_env(hub, tmp_path)
    hub.server.tree_page_size = 2  # the client must follow the Link headers
    try:
        shas = json.loads(run_client(ROUND_TRIP, env, str(tmp_path)).strip().splitlines()[-1])
    finally:
        hub.server.tree_page_size = 1000
    assert any("cursor=" in path for _, path, _ in hub.requests)
    assert hub.branch_head("tester/round-trip") == shas["head"]
    history = hub.history("tester/round-trip")
    assert history[-3:-1] == [shas["second"], shas["first"]] and len(history) == 6
    # everything travelled inline: no LFS batch, no Xet token request
    paths = [path for _, path, _ in hub.requests]
    assert not [p for p in paths if "lfs" in p or "xet" in p], paths

    n_requests = len(hub.requests)
    out = run_client(
        OFFLINE, hub_env(hub, tmp_path, HF_HUB_OFFLINE="1"), shas["first"], shas["second"]
    )
    assert "offline ok" in out
    assert len(hub.requests) == n_requests  # served from the cache alone


FAILURES = r"""
import json, os, sys, urllib.request
from pathlib import Path
import httpx2
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError, RemoteEntryNotFoundError,
    RepositoryNotFoundError, RevisionNotFoundError,
)

endpoint, closed_port, work = os.environ["HF_ENDPOINT"], sys.argv[1], Path(sys.argv[2])
api, other, anon = HfApi(), HfApi(token="hf_other_token"), HfApi(token=False)


def expect(exc_type, fn, status=None):
    try:
        fn()
    except exc_type as e:
        if status is not None:
            assert e.response.status_code == status, (e.response.status_code, status, e)
        return e
    except Exception as e:
        raise AssertionError(f"expected {exc_type.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {exc_type.__name__}, nothing was raised")


def fail_next(**fault):
    req = urllib.request.Request(f"{endpoint}/_localhub/fail-next", json.dumps(fault).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()


repo_id = api.create_repo("faults").repo_id
api.upload_file(path_or_fileobj=b"v1", path_in_repo="data.txt", repo_id=repo_id)
head = api.model_info(repo_id).sha

# 401: invalid token (not disguised as a missing repo); anonymous writes
e = expect(HfHubHTTPError, lambda: HfApi(token="hf_wrong").whoami(), 401)
e = expect(HfHubHTTPError, lambda: HfApi(token="hf_wrong").model_info(repo_id), 401)
assert not isinstance(e, RepositoryNotFoundError)
expect(HfHubHTTPError, lambda: anon.create_repo("anonymous-repo"), 401)
expect(HfHubHTTPError, lambda: api.create_repo("faults"), 409)

# 403: someone else's namespace, and someone else's (public, readable) repo
expect(HfHubHTTPError, lambda: api.create_repo("other/not-mine"), 403)
theirs = other.create_repo("public").repo_id
other.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=theirs)
assert Path(hf_hub_download(theirs, "x.txt")).read_bytes() == b"x"
assert anon.model_info(theirs).sha is not None
expect(HfHubHTTPError, lambda: api.upload_file(path_or_fileobj=b"y", path_in_repo="y.txt", repo_id=theirs), 403)
expect(HfHubHTTPError, lambda: api.create_tag(theirs, tag="mine"), 403)

# private repos exist only for their owner
secret = other.create_repo("secret", private=True).repo_id
other.upload_file(path_or_fileobj=b"s", path_in_repo="s.txt", repo_id=secret)
assert other.model_info(secret).private is True
expect(RepositoryNotFoundError, lambda: api.model_info(secret), 404)
expect(RepositoryNotFoundError, lambda: anon.model_info(secret), 404)
expect(RepositoryNotFoundError, lambda: hf_hub_download(secret, "s.txt"), 404)

# missing repo, revision, file
expect(RepositoryNotFoundError, lambda: api.model_info("tester/no-such-repo"), 404)
expect(RepositoryNotFoundError, lambda: hf_hub_download("tester/no-such-repo", "x.txt"), 404)
expect(RevisionNotFoundError, lambda: hf_hub_download(repo_id, "data.txt", revision="no-such-rev"), 404)
expect(RevisionNotFoundError, lambda: api.model_info(repo_id, revision="no-such-rev"), 404)
expect(RevisionNotFoundError, lambda: api.list_repo_files(repo_id, revision="no-such-rev"), 404)
e = expect(RemoteEntryNotFoundError, lambda: hf_hub_download(repo_id, "missing.txt"), 404)
assert isinstance(e, EntryNotFoundError)
assert api.file_exists(repo_id, "data.txt") and not api.file_exists(repo_id, "missing.txt")
assert api.repo_exists(repo_id) and not api.repo_exists("tester/no-such-repo")
assert not api.revision_exists(repo_id, "no-such-rev")

# a stale parent_commit is refused (412)
ops = [CommitOperationAdd(path_in_repo="data.txt", path_or_fileobj=b"stale")]
stale = api.list_repo_commits(repo_id)[-1].commit_id
expect(HfHubHTTPError, lambda: api.create_commit(repo_id, ops, commit_message="x", parent_commit=stale), 412)

# injected 500 and dropped connection on commit: errors, and main does not move
commit = f"/api/models/{repo_id}/commit/"
fail_next(method="POST", path_prefix=commit, status=500)
expect(HfHubHTTPError, lambda: api.upload_file(path_or_fileobj=b"v2", path_in_repo="data.txt", repo_id=repo_id), 500)
assert api.model_info(repo_id).sha == head
fail_next(method="POST", path_prefix=commit, drop=True)
ops = [CommitOperationAdd(path_in_repo="data.txt", path_or_fileobj=b"v2")]
expect(httpx2.RemoteProtocolError, lambda: api.create_commit(repo_id, ops, commit_message="lost"))
assert api.model_info(repo_id).sha == head
assert Path(hf_hub_download(repo_id, "data.txt")).read_bytes() == b"v1"
# upload_folder's pipeline retries its commit after a transport error: exactly one new commit
(work / "up").mkdir()
(work / "up" / "data.txt").write_bytes(b"v3")
fail_next(method="POST", path_prefix=commit, drop=True)
new = api.upload_folder(folder_path=work / "up", repo_id=repo_id).oid
assert [c.commit_id for c in api.list_repo_commits(repo_id)][:2] == [new, head]
assert Path(hf_hub_download(repo_id, "data.txt")).read_bytes() == b"v3"

# unreachable endpoint: API calls raise a connection error, downloads fall back to the cache
gone = f"http://127.0.0.1:{closed_port}"
expect(httpx2.ConnectError, lambda: HfApi(endpoint=gone).model_info(repo_id))
expect(httpx2.ConnectError, lambda: HfApi(endpoint=gone).create_repo("unreachable"))
assert Path(hf_hub_download(repo_id, "data.txt", endpoint=gone)).read_bytes() == b"v3"
print(json.dumps({"head": new}))
"""


def test_huggingface_hub_errors_and_faults(hub, tmp_path):
    out = run_client(FAILURES, hub_env(hub, tmp_path), str(closed_port()), str(tmp_path))
    head = json.loads(out.strip().splitlines()[-1])["head"]
    assert hub.branch_head("tester/faults") == head
    assert len(hub.history("tester/faults")) == 3  # initial, v1, the retried upload_folder
    dropped = [path for _, path, status in hub.requests if status == -1 and "/faults/" in path]
    assert dropped == ["/api/models/tester/faults/commit/main"] * 2


# -- transformers ---------------------------------------------------------------------------

PUSH = r"""
import sys, torch
from safetensors.torch import save_file
from transformers import BertConfig, BertModel

torch.manual_seed(0)
config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32)
model = BertModel(config)
model.save_pretrained(sys.argv[1] + "/save", push_to_hub=True, repo_id="tiny-bert")
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, sys.argv[1] + "/main.safetensors")
with torch.no_grad():
    for p in model.parameters():
        p.add_(1.0)
info = model.push_to_hub("tester/tiny-bert", revision="dev", commit_message="shifted")
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, sys.argv[1] + "/dev.safetensors")
print(info.oid)
"""

PULL = r"""
import sys, torch
from safetensors.torch import load_file
from transformers import AutoModel, BertModel

dev_sha = sys.stdin.readline().strip()  # imports above overlap with the push
for revision in ("main", "dev", dev_sha):
    model = AutoModel.from_pretrained("tester/tiny-bert", revision=revision)
    assert type(model) is BertModel and model.config.hidden_size == 16
    ref = load_file(sys.argv[1] + ("/main.safetensors" if revision == "main" else "/dev.safetensors"))
    state = model.state_dict()
    assert set(ref) <= set(state), set(ref) ^ set(state)
    for name, tensor in ref.items():
        assert torch.equal(state[name], tensor), (revision, name)
print("pull ok")
"""


@pytest.mark.slow
def test_transformers_push_to_hub_and_from_pretrained(hub, tmp_path):
    # The loader is a fresh process with an empty cache; it starts now to import torch meanwhile.
    pull = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(PULL), str(tmp_path)],
        env=hub_env(hub, tmp_path / "pull", OMP_NUM_THREADS="1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        push_env = hub_env(hub, tmp_path / "push", OMP_NUM_THREADS="1")
        dev_sha = run_client(PUSH, push_env, str(tmp_path)).strip().splitlines()[-1]
        assert hub.branch_head("tester/tiny-bert", "dev") == dev_sha
        repo = hub.server.repo("tester/tiny-bert")
        main_files = repo.commits[repo.branches["main"]].files
        assert {"config.json", "model.safetensors", "README.md"} <= set(main_files)
        out, err = pull.communicate(dev_sha + "\n", timeout=120)
    finally:
        pull.kill()
        pull.wait()
    assert pull.returncode == 0 and "pull ok" in out, f"loader failed:\n{out}\n{err[-6000:]}"


def test_command_line_server():
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "hub_server.py"), "--port", "0", "--token", "hf_cli=cli"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        endpoint = proc.stdout.readline().strip()
        assert endpoint.startswith("http://127.0.0.1:")
        req = urllib.request.Request(
            f"{endpoint}/api/whoami-v2", headers={"Authorization": "Bearer hf_cli"}
        )
        assert json.loads(urllib.request.urlopen(req, timeout=10).read())["name"] == "cli"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_local_hub_stops_cleanly():
    with LocalHub(tokens={"t": "u"}) as local:
        port = local.server.server_address[1]
        assert (local.token, local.user) == ("t", "u")
    time.sleep(0.05)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
