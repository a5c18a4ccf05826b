"""A small local server that speaks the Hugging Face Hub HTTP API, for tests.

Point a client at it with ``HF_ENDPOINT=<hub.endpoint>`` (``huggingface_hub`` reads the variable at
import time, so clients normally run in a subprocess: see :func:`hub_env`). Pure standard library.

Endpoints (``{type}`` is ``models``, ``datasets`` or ``spaces``; ``{rev}`` is a branch, a tag or a
commit sha, URL-encoded with ``safe=""`` as huggingface_hub sends it, e.g. ``release%2Fv1``)::

    GET      /api/whoami-v2
    GET      /api/agent-harnesses                     empty registry (asked for if telemetry is on)
    POST     /api/repos/create                        409 + "url" if it exists (exist_ok: client)
    DELETE   /api/repos/delete
    POST     /api/validate-yaml                       only checks that the front matter is closed
    GET      /api/{type}/{repo_id}[/revision/{rev}]   info: sha, siblings, private, config, ...
    GET      /api/{type}/{repo_id}/tree/{rev}[/{path}]  ?recursive=true; Link-header pagination
    POST     /api/{type}/{repo_id}/paths-info/{rev}   form body paths=...&paths=...
    GET      /api/{type}/{repo_id}/refs
    GET      /api/{type}/{repo_id}/commits/{rev}
    POST     /api/{type}/{repo_id}/preupload/{rev}    every file gets uploadMode "regular"
    POST     /api/{type}/{repo_id}/commit/{rev}       NDJSON: header, file, deletedFile/Folder
    POST     /api/{type}/{repo_id}/tag/{rev}          body {"tag": ...}
    POST     /api/{type}/{repo_id}/branch/{branch}    body {"startingPoint": ...} (default main)
    GET|HEAD /[{type}/]{repo_id}/resolve/{rev}/{path} ETag (quoted git blob sha1), X-Repo-Commit,
                                                      Content-Length, Range (206/416)
    POST     /_localhub/fail-next                     not the Hub's: arms a fault from a client
                                                      process, JSON with fail_next's arguments

Because preupload answers "regular", file contents travel base64-encoded inside the commit and
clients never use LFS or Xet (an ``lfsFile`` commit operation gets 422). Errors use the Hub's
status codes, ``X-Error-Code`` (RepoNotFound, RevisionNotFound, EntryNotFound), ``X-Error-Message``
and a JSON body ``{"error": ...}``. An unknown token gets 401 on every request, anonymous writes
401, writes outside one's namespace 403; private repos are 404 RepoNotFound to all but their
owner. Every commit is kept, so old shas stay downloadable; new repos start with an "initial
commit" holding ``.gitattributes``, as on the Hub.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import itertools
import json
import os
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

DEFAULT_TOKENS = {"hf_test_token": "tester", "hf_other_token": "other"}
LFS_EXTENSIONS = ("bin", "h5", "onnx", "pt", "pth", "safetensors", "npy", "npz", "zip", "png")
GITATTRIBUTES = "".join(f"*.{e} filter=lfs diff=lfs merge=lfs -text\n" for e in LFS_EXTENSIONS)
REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_counter = itertools.count()


def git_blob_sha(data: bytes) -> str:
    """The git object id of a blob (``git hash-object``): the oid and ETag of a regular file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class HubError(Exception):
    def __init__(self, status: int, message: str, code=None, headers=None, **body_extra):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}
        self.body = {"error": message, **body_extra}


@dataclass
class Commit:
    sha: str
    parent: str | None
    files: dict[str, bytes]
    title: str
    message: str
    author: str
    date: str = field(default_factory=_now)


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    created: str = field(default_factory=_now)

    def add_commit(self, branch, parent, files, title, message, author) -> Commit:
        seed = f"{self.repo_id}\n{parent}\n{sorted(files)}\n{title}\n{_now()}\n{next(_counter)}"
        sha = hashlib.sha1(seed.encode()).hexdigest()
        self.commits[sha] = Commit(sha, parent, files, title, message, author)
        self.branches[branch] = sha
        return self.commits[sha]

    def resolve(self, rev: str) -> Commit:
        """A branch, a tag, or a (unique prefix of a) commit sha."""
        sha = self.branches.get(rev) or self.tags.get(rev)
        if sha is None and re.fullmatch(r"[0-9a-f]{7,40}", rev):
            matches = [s for s in self.commits if s.startswith(rev)]
            sha = matches[0] if len(matches) == 1 else None
        if sha is None:
            raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return self.commits[sha]


@dataclass
class Fault:
    method: str
    path_prefix: str
    status: int
    drop: bool
    times: int
    message: str


class HubServer(ThreadingHTTPServer):
    """The HTTP server with its state: repos, tokens, organizations, faults, a request log."""

    daemon_threads = True
    tree_page_size = 1000  # entries per page of /tree (the Hub's); lower it to test pagination

    def __init__(self, address=("127.0.0.1", 0), tokens=None, orgs=None):
        super().__init__(address, HubHandler)
        self.tokens: dict[str, str] = dict(DEFAULT_TOKENS if tokens is None else tokens)
        self.orgs = {org: set(members) for org, members in (orgs or {}).items()}
        self.repos: dict[tuple[str, str], Repo] = {}  # (repo_type, repo_id) -> Repo
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, int]] = []  # (method, raw path, status or -1: dropped)
        self.lock = threading.RLock()

    @property
    def endpoint(self) -> str:
        return "http://{}:{}".format(*self.server_address[:2])

    def fail_next(
        self, method="*", path_prefix="/", *, status=500, drop=False, times=1, message=""
    ):
        """Make the next ``times`` requests with this method (``*``: any) and raw path prefix fail.

        The server answers ``status``, or with ``drop=True`` reads the request and closes the
        connection without answering (an interrupted upload). A failed commit creates nothing.
        """
        message = message or f"Injected fault ({status})"
        with self.lock:
            self.faults.append(Fault(method.upper(), path_prefix, status, drop, times, message))

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.method in ("*", method) and path.startswith(fault.path_prefix):
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                    return fault
        return None

    def repo(self, repo_id: str, repo_type: str = "model") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def branch_head(self, repo_id: str, branch: str = "main", repo_type: str = "model") -> str:
        return self.repo(repo_id, repo_type).branches[branch]

    def history(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> list[str]:
        """Shas of the commits reachable from ``revision``, newest first."""
        repo = self.repo(repo_id, repo_type)
        shas = [repo.resolve(revision).sha]
        while parent := repo.commits[shas[-1]].parent:
            shas.append(parent)
        return shas


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: avoid 40 ms ACK stalls
    server: HubServer

    def log_message(self, format, *args):  # quiet
        pass

    def _dispatch(self) -> None:
        method, url = self.command, urlsplit(self.path)
        self.query = parse_qs(url.query)
        self.body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = self.server.take_fault(method, url.path)
        if fault is not None and fault.drop:
            self.close_connection = True  # answer nothing; the socket is closed
            self.server.requests.append((method, self.path, -1))
            return
        self.status, self.reply_headers = 200, {}
        try:
            if fault is not None:
                raise HubError(fault.status, fault.message)
            self.user = self._authenticate()
            with self.server.lock:
                body = self._route(method, url.path)
        except HubError as e:
            self.status, self.reply_headers, body = e.status, e.headers, e.body
            self.reply_headers |= {"X-Error-Message": e.message}
            if e.code:
                self.reply_headers["X-Error-Code"] = e.code
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
            self.reply_headers.setdefault("Content-Type", "application/json; charset=utf-8")
        self.server.requests.append((method, self.path, self.status))
        self.send_response(self.status)
        for key, value in self.reply_headers.items():
            self.send_header(key, str(value).encode("latin-1", "replace").decode("latin-1"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _dispatch

    def _json(self) -> dict:
        try:
            return json.loads(self.body or b"{}")
        except ValueError as e:
            raise HubError(400, f"Invalid JSON body: {e}") from None

    def _flag(self, name: str) -> bool:
        return self.query.get(name, ["0"])[0].lower() in ("1", "true")

    def _authenticate(self) -> str | None:
        auth = self.headers.get("Authorization")
        if not auth:
            return None
        user = self.server.tokens.get(auth.removeprefix("Bearer ").strip())
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return user

    def _can_write(self, namespace: str) -> bool:
        members = self.server.orgs.get(namespace, ())
        return self.user is not None and (self.user == namespace or self.user in members)

    def _get_repo(self, repo_type: str, repo_id: str, write: bool = False) -> Repo:
        repo, namespace = self.server.repos.get((repo_type, repo_id)), repo_id.split("/")[0]
        if repo is None or (repo.private and not self._can_write(namespace)):
            raise HubError(404, "Repository not found", "RepoNotFound")
        if write and self.user is None:
            raise HubError(401, "You must be authenticated to access this resource")
        if write and not self._can_write(namespace):
            raise HubError(403, f"You don't have the rights to write to {repo_id}")
        return repo

    # -- routing ----------------------------------------------------------------------------

    def _route(self, method: str, path: str):
        parts = path.strip("/").split("/")
        simple = {
            ("GET", "/api/whoami-v2"): self._whoami,
            ("GET", "/api/agent-harnesses"): lambda: {"standardEnvVars": [], "harnesses": {}},
            ("POST", "/api/repos/create"): self._create_repo,
            ("DELETE", "/api/repos/delete"): self._delete_repo,
            ("POST", "/api/validate-yaml"): self._validate_yaml,
            ("POST", "/_localhub/fail-next"): lambda: self.server.fail_next(**self._json()) or {},
        }
        if (method, path) in simple:
            return simple[(method, path)]()
        if parts[0] == "api" and len(parts) >= 4 and parts[1] in REPO_TYPES:
            repo_type, repo_id = REPO_TYPES[parts[1]], "/".join(parts[2:4])
            action = parts[4] if len(parts) > 4 else ""
            return self._repo_api(method, repo_type, repo_id, action, parts[5:])
        repo_type = "model"
        if parts[0] in REPO_TYPES and len(parts) > 5 and parts[3] == "resolve":
            repo_type, parts = REPO_TYPES[parts[0]], parts[1:]
        if len(parts) > 4 and parts[2] == "resolve" and method in ("GET", "HEAD"):
            return self._resolve(repo_type, "/".join(parts[:2]), parts[3], parts[4:])
        raise HubError(404, f"Not found: {method} {path}")

    def _repo_api(self, method: str, repo_type: str, repo_id: str, action: str, rest: list):
        rev = unquote(rest[0]) if rest else "main"
        args = (repo_type, repo_id, rev)
        routes = {
            ("GET", ""): lambda: self._info(repo_type, repo_id, "main"),
            ("GET", "revision"): lambda: self._info(*args),
            ("GET", "tree"): lambda: self._tree(*args, unquote("/".join(rest[1:]))),
            ("POST", "paths-info"): lambda: self._paths_info(*args),
            ("GET", "refs"): lambda: self._refs(repo_type, repo_id),
            ("GET", "commits"): lambda: self._commits(*args),
            ("POST", "preupload"): lambda: self._preupload(*args),
            ("POST", "commit"): lambda: self._commit(*args),
            ("POST", "tag"): lambda: self._create_ref(*args, kind="tag"),
            ("POST", "branch"): lambda: self._create_ref(*args, kind="branch"),
            ("GET", "resolve"): lambda: self._resolve(repo_type, repo_id, rest[0], rest[1:]),
        }
        routes[("HEAD", "resolve")] = routes[("GET", "resolve")]
        if (method, action) not in routes or (action == "resolve" and len(rest) < 2):
            raise HubError(404, f"Not found: {method} {self.path}")
        return routes[(method, action)]()

    # -- account and repos ------------------------------------------------------------------

    def _whoami(self):
        if self.user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        orgs = [{"type": "org", "name": o} for o, m in self.server.orgs.items() if self.user in m]
        user, auth = self.user, {"displayName": "local", "role": "write"}
        return {
            "type": "user", "id": hashlib.md5(user.encode()).hexdigest()[:24], "name": user,
            "fullname": user, "email": f"{user}@localhost", "emailVerified": True,
            "isPro": False, "canPay": False, "orgs": orgs,
            "auth": {"type": "access_token", "accessToken": auth},
        }  # fmt: skip

    def _create_repo(self):
        if self.user is None:
            raise HubError(401, "You must be authenticated to create a repo")
        payload = self._json()
        name, namespace = payload.get("name", ""), payload.get("organization") or self.user
        repo_type = payload.get("type") or "model"
        if repo_type not in URL_PREFIX or not NAME_RE.fullmatch(name) or "--" in name:
            raise HubError(400, f"Invalid repo type or name: {repo_type} {name!r}")
        if not self._can_write(namespace):
            message = f'You don\'t have the rights to create a {repo_type} under "{namespace}"'
            raise HubError(403, message)
        repo_id = f"{namespace}/{name}"
        url = f"{self.server.endpoint}/{URL_PREFIX[repo_type]}{repo_id}"
        if (repo_type, repo_id) in self.server.repos:  # the Hub's 409 also gives the url
            raise HubError(409, f"You already created this {repo_type} repo", url=url)
        private = payload.get("visibility", "private" if payload.get("private") else "public")
        repo = Repo(repo_type, repo_id, private == "private")
        self.server.repos[(repo_type, repo_id)] = repo
        gitattributes = {".gitattributes": GITATTRIBUTES.encode()}
        repo.add_commit("main", None, gitattributes, "initial commit", "", "system")
        return {"url": url, "name": repo_id, "id": repo_id}

    def _delete_repo(self):
        payload = self._json()
        repo_id = f"{payload.get('organization') or self.user}/{payload.get('name')}"
        repo = self._get_repo(payload.get("type") or "model", repo_id, write=True)
        del self.server.repos[(repo.repo_type, repo.repo_id)]
        return {}

    def _validate_yaml(self):
        content = self._json().get("content", "")
        if content.startswith("---") and not re.search(r"\n---\s*(\n|$)", content[3:]):
            self.status = 400
            message = "Invalid metadata: the YAML front matter is not closed by '---'"
            return {"errors": [{"message": message}], "warnings": []}
        return {"errors": [], "warnings": []}

    # -- reading ----------------------------------------------------------------------------

    def _info(self, repo_type: str, repo_id: str, rev: str):
        repo = self._get_repo(repo_type, repo_id)
        commit, blobs = repo.resolve(rev), self._flag("blobs")
        siblings = [
            {"rfilename": p, **({"size": len(d), "blobId": git_blob_sha(d)} if blobs else {})}
            for p, d in sorted(commit.files.items())
        ]
        info = {
            "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24], "id": repo_id,
            "author": repo_id.split("/")[0], "sha": commit.sha, "lastModified": commit.date,
            "createdAt": repo.created, "private": repo.private, "gated": False,
            "disabled": False, "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
            "usedStorage": sum(len(d) for c in repo.commits.values() for d in c.files.values()),
        }  # fmt: skip
        if repo_type == "model":
            info["modelId"] = repo_id
            try:  # like the Hub, a digest of config.json
                config = json.loads(commit.files["config.json"])
                keys = ("architectures", "model_type")
                info["config"] = {k: config[k] for k in keys if k in config}
            except (KeyError, ValueError, TypeError):
                pass
        return info

    @staticmethod
    def _entries(files: dict[str, bytes], folder: str, recursive: bool) -> dict[str, dict]:
        """Tree entries (files and folders) under ``folder``, keyed by path."""
        prefix, out, folders = f"{folder.strip('/')}/".lstrip("/"), {}, set()
        for path, data in files.items():
            rel = path[len(prefix) :].split("/") if path.startswith(prefix) else []
            if len(rel) == 1 or (recursive and rel):
                out[path] = {"type": "file", "oid": git_blob_sha(data), "size": len(data)}
            last_folder = len(rel) if recursive else min(len(rel), 2)
            folders.update(prefix + "/".join(rel[:depth]) for depth in range(1, last_folder))
        for name in folders:
            sub = name + "/"
            inside = sorted((p, git_blob_sha(d)) for p, d in files.items() if p.startswith(sub))
            out[name] = {
                "type": "directory",
                "oid": hashlib.sha1(repr(inside).encode()).hexdigest(),
            }
        return {path: {**entry, "path": path} for path, entry in sorted(out.items())}

    def _tree(self, repo_type: str, repo_id: str, rev: str, path: str):
        commit = self._get_repo(repo_type, repo_id).resolve(rev)
        entries = list(self._entries(commit.files, path, self._flag("recursive")).values())
        if path and not entries:
            headers = {"X-Repo-Commit": commit.sha}
            raise HubError(404, f"{path} does not exist on {rev}", "EntryNotFound", headers)
        start, page_size = int(self.query.get("cursor", ["0"])[0]), self.server.tree_page_size
        if start + page_size < len(entries):
            query = {k: v[0] for k, v in self.query.items()} | {"cursor": start + page_size}
            url = f"{self.server.endpoint}{urlsplit(self.path).path}?{urlencode(query)}"
            self.reply_headers["Link"] = f'<{url}>; rel="next"'
        return entries[start : start + page_size]

    def _paths_info(self, repo_type: str, repo_id: str, rev: str):
        commit = self._get_repo(repo_type, repo_id).resolve(rev)
        paths = parse_qs(self.body.decode()).get("paths", [])
        entries = self._entries(commit.files, "", recursive=True)
        return [entries[p] for p in paths if p in entries]

    def _refs(self, repo_type: str, repo_id: str):
        repo = self._get_repo(repo_type, repo_id)

        def refs(kind, names):
            return [{"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": names[n]} for n in names]

        branches, tags = refs("heads", repo.branches), refs("tags", repo.tags)
        return {"branches": branches, "tags": tags, "converts": [], "pullRequests": []}

    def _commits(self, repo_type: str, repo_id: str, rev: str):
        repo = self._get_repo(repo_type, repo_id)
        commits = [repo.commits[s] for s in self.server.history(repo_id, rev, repo_type)]
        return [
            {"id": c.sha, "title": c.title, "message": c.message, "date": c.date,
             "authors": [{"user": c.author}]}
            for c in commits
        ]  # fmt: skip

    def _resolve(self, repo_type: str, repo_id: str, rev: str, path_parts: list[str]):
        commit = self._get_repo(repo_type, repo_id).resolve(unquote(rev))
        path = unquote("/".join(path_parts))
        self.reply_headers = {"X-Repo-Commit": commit.sha}
        if path not in commit.files:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", self.reply_headers)
        data = commit.files[path]
        self.reply_headers |= {"ETag": f'"{git_blob_sha(data)}"', "Accept-Ranges": "bytes"}
        self.reply_headers["Content-Type"] = "application/octet-stream"
        match = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
        if not match or match.group(1) + match.group(2) == "":
            return data
        first, last = match.groups()
        start = int(first) if first else max(len(data) - int(last), 0)
        end = min(int(last), len(data) - 1) if first and last else len(data) - 1
        if start >= len(data) or start > end:
            unsatisfiable = {"Content-Range": f"bytes */{len(data)}"}
            raise HubError(416, "Range Not Satisfiable", headers=unsatisfiable)
        self.status, self.reply_headers["Content-Range"] = 206, f"bytes {start}-{end}/{len(data)}"
        return data[start : end + 1]

    # -- writing ----------------------------------------------------------------------------

    def _branch_head(self, repo_type: str, repo_id: str, rev: str) -> tuple[Repo, Commit]:
        repo = self._get_repo(repo_type, repo_id, write=True)
        if self._flag("create_pr"):
            raise HubError(400, "Pull requests (create_pr) are not supported by this local hub")
        if rev not in repo.branches:
            raise HubError(404, f"Invalid rev id: {rev} is not a branch", "RevisionNotFound")
        return repo, repo.commits[repo.branches[rev]]

    def _preupload(self, repo_type: str, repo_id: str, rev: str):
        head = self._branch_head(repo_type, repo_id, rev)[1]
        payload = self._json()
        gitignore = payload.get("gitIgnore") or head.files.get(".gitignore", b"").decode()
        patterns = [p.strip() for p in gitignore.splitlines() if p.strip()[:1] not in ("", "#")]
        files = []
        for path in (item["path"] for item in payload.get("files", [])):
            names = (path, path.split("/")[-1])
            ignored = any(fnmatch.fnmatch(n, p) for p in patterns for n in names)
            files.append({"path": path, "uploadMode": "regular", "shouldIgnore": ignored})
            if path in head.files:  # lets the client skip unchanged files
                files[-1]["oid"] = git_blob_sha(head.files[path])
        return {"files": files, "commitOid": head.sha}

    def _commit(self, repo_type: str, repo_id: str, rev: str):
        repo, head = self._branch_head(repo_type, repo_id, rev)
        try:
            lines = [json.loads(line) for line in self.body.splitlines() if line.strip()]
        except ValueError as e:
            raise HubError(400, f"Invalid NDJSON body: {e}") from None
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The first line of a commit must be its header")
        header, files = lines[0]["value"], dict(head.files)
        if header.get("parentCommit") and not head.sha.startswith(header["parentCommit"]):
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        for key, value in ((line.get("key"), line.get("value") or {}) for line in lines[1:]):
            path = value.get("path", "").strip("/")
            if not path or ".." in path.split("/") or path.split("/")[0] == ".git":
                raise HubError(400, f"Invalid path in commit: {path!r}")
            if key == "file":
                content = value.get("content", "")
                base64_encoded = value.get("encoding") == "base64"
                files[path] = base64.b64decode(content) if base64_encoded else content.encode()
            elif key == "deletedFile" and path in files:
                del files[path]
            elif key == "deletedFolder" and any(p.startswith(path + "/") for p in files):
                files = {p: d for p, d in files.items() if not p.startswith(path + "/")}
            elif key in ("deletedFile", "deletedFolder"):
                what = "file" if key == "deletedFile" else "folder"
                message = f"A {what} with this name doesn't exist: {path}"
                raise HubError(404, message, "EntryNotFound")
            else:  # lfsFile included: preupload never asks for LFS
                raise HubError(422, f"Unsupported commit operation {key!r} for {path}")
        summary, description = header.get("summary") or "Update", header.get("description", "")
        commit = repo.add_commit(rev, head.sha, files, summary, description, self.user)
        url = f"{self.server.endpoint}/{URL_PREFIX[repo_type]}{repo_id}/commit/{commit.sha}"
        return {"success": True, "commitOid": commit.sha, "commitUrl": url, "hookOutput": ""}

    def _create_ref(self, repo_type: str, repo_id: str, rev: str, kind: str):
        repo = self._get_repo(repo_type, repo_id, write=True)
        payload = self._json()
        if kind == "tag":  # POST .../tag/{revision} {"tag": name}
            name, target, refs = payload.get("tag", ""), repo.resolve(rev), repo.tags
        else:  # POST .../branch/{name} {"startingPoint": revision}
            name, target = rev, repo.resolve(payload.get("startingPoint") or "main")
            refs = repo.branches
        if name in refs:
            raise HubError(409, f"Reference already exists: {name}")
        if not name or ".." in name or name.startswith("/"):
            raise HubError(400, f"Invalid reference name: {name!r}")
        refs[name] = target.sha
        return {}


class LocalHub:
    """A :class:`HubServer` on a free loopback port, served by a daemon thread.

    ``with LocalHub() as hub:`` gives ``hub.endpoint`` (``http://127.0.0.1:PORT``), ``hub.token``
    (valid, of ``hub.user``), ``hub.server`` and the server's ``fail_next``, ``branch_head``,
    ``history`` and ``requests``. The default tokens are ``hf_test_token`` (user ``tester``) and
    ``hf_other_token`` (user ``other``).
    """

    def __init__(self, tokens=None, orgs=None, host: str = "127.0.0.1", port: int = 0):
        self.server = HubServer((host, port), tokens=tokens, orgs=orgs)
        self.endpoint = self.server.endpoint
        self.token = next(iter(self.server.tokens), None)
        self.user = self.server.tokens.get(self.token)
        self.fail_next, self.branch_head = self.server.fail_next, self.server.branch_head
        self.history, self.requests = self.server.history, self.server.requests
        self._thread: threading.Thread | None = None

    def start(self) -> LocalHub:
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self.server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.server.server_close()

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def hub_env(hub: LocalHub, tmp_path, token: str | None = "", **extra: str) -> dict[str, str]:
    """A copy of ``os.environ`` for a client subprocess of ``hub``, caching under ``tmp_path``.

    ``token=""`` means ``hub.token``; ``token=None`` runs the client anonymously. Other ``HF_*``
    variables of this process are dropped; ``extra`` (e.g. ``HF_HUB_OFFLINE="1"``) is added.
    """
    home = os.path.join(os.fspath(tmp_path), "hf_home")
    drop = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_OFFLINE", "TRANSFORMERS_CACHE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1", "localhost"]))
    env |= {
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": home,
        "HF_HUB_CACHE": os.path.join(home, "hub"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_HUB_ETAG_TIMEOUT": "10",
        "HF_HUB_DOWNLOAD_TIMEOUT": "30",
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }
    if token is not None:
        env["HF_TOKEN"] = token or hub.token
    return env | extra


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", action="append", metavar="TOKEN=USER", help="repeatable")
    args = parser.parse_args(argv)
    tokens = dict(t.split("=", 1) for t in args.token) if args.token else None
    server = HubServer((args.host, args.port), tokens=tokens)
    print(server.endpoint, flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
