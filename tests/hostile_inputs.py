"""The cases of issue #25 ("Hostile inputs") for the table of bad inputs.

``tests/test_reliability.py`` appends `CASES` to its ``BAD_INPUTS``: each is ``(input, where,
call)`` and ``call(setup)`` (a ``test_reliability.Setup``) must raise an error of relrep_hf's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from relrep_hf import AnchorSet, RelativeProjector, Statistics

SUPPORT = [f"input {i}" for i in range(16)]


def shared_linear(s: Any, spaces: dict | None = None, **rows: Any) -> AnchorSet:
    """A shared linear anchor set over SUPPORT, with rows 0..15 as support unless given."""
    rows = {"support_rows": range(16), **rows}
    return AnchorSet.shared_linear(SUPPORT, spaces or s.spaces, 4, shrinkage=0.15, **rows)


def fitted_run(s: Any, name: str) -> Path:
    """A run folder as `fit` leaves it (run.json with a fit, and an anchor set)."""
    folder = s.folder / name
    (folder / "anchor_set").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"encoders": [], "support_rows": [0]}))
    return folder


def run_with(s: Any, name: str, text: str) -> Path:
    folder = s.folder / name
    folder.mkdir()
    (folder / "run.json").write_text(text)
    return folder


def pipeline() -> Any:
    from relrep_hf.pipeline import steps as pipeline

    return pipeline


def cli(*argv: str) -> None:
    """``relrep-hf ARGV`` as `main` runs it, its error raised (``--debug``)."""
    from relrep_hf.cli import main

    main(["--debug", *argv])


def read_only_parent(s: Any) -> None:
    """A save into a writable folder under a read-only parent (simulated for root, whom
    permissions do not stop: the lock file cannot be created)."""
    import errno
    import os
    from unittest import mock

    real_open = os.open

    def refusing(path, flags, *args, **kwargs):
        if str(path).endswith(".lock"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    with mock.patch("os.open", refusing):
        s.projector.save_pretrained(s.folder / "read-only-parent" / "projector")


CASES: list[tuple[str, str, Callable[[Any], object]]] = [
    # issue #25, item 1: a run folder never silently loses its fit
    ("embedding into a folder that holds a fitted run", "`pipeline.embed` (`relrep-hf embed`)",
     lambda s: pipeline().embed(fitted_run(s, "run-fitted"), ["minilm"], limit=10, test_size=2)),
    # item 3: rows of the shared linear closed form
    ("encoders' embeddings that do not match row for row (120 and 200 rows)",
     "`AnchorSet.shared_linear`",
     lambda s: shared_linear(s, {"e0": s.spaces["e0"][:120], "e1": s.spaces["e1"]})),
    ("a negative support row (-1)", "`AnchorSet.shared_linear`",
     lambda s: shared_linear(s, support_rows=[-1, *range(1, 16)])),
    ("float support rows", "`AnchorSet.shared_linear`",
     lambda s: shared_linear(s, support_rows=[float(i) for i in range(16)])),
    ("a support row out of range", "`AnchorSet.shared_linear`",
     lambda s: shared_linear(s, support_rows=[*range(15), 200])),
    ("fit_rows=[]", "`AnchorSet.shared_linear`", lambda s: shared_linear(s, fit_rows=[])),
    # item 4: run.json
    ("run.json whose embeddings path leaves the run folder", "`pipeline.fit`",
     lambda s: pipeline().fit(run_with(s, "run-escape", json.dumps({"encoders": [
         {"name": "e0", "embeddings": "../../../../etc/passwd"}]})))),
    ("run.json whose encoder name is a path", "`pipeline.evaluate`",
     lambda s: pipeline().evaluate(run_with(s, "run-name", json.dumps({"encoders": [
         {"name": "../x", "embeddings": "embeddings/x.arrow"}]})))),
    ("truncated run.json", "`pipeline.fit`",
     lambda s: pipeline().fit(run_with(s, "run-truncated", '{"encoders": [{"na'))),
    # item 5: onboarding
    ("statistics of another encoder (16-d support, 12-d statistics)",
     "`RelativeProjector.from_anchor_set`",
     lambda s: RelativeProjector.from_anchor_set(
         AnchorSet.random(SUPPORT, 4), torch.randn(16, 16), torch.randn(50, 12))),
    # item 6
    ("torch.empty(0)", "`Statistics.from_embeddings`",
     lambda s: Statistics.from_embeddings(torch.empty(0))),
    ("an empty support list", "`AnchorSet.full_support`", lambda s: AnchorSet.full_support([])),
    ("finite rows of 1e200", "`Statistics.from_embeddings`",
     lambda s: Statistics.from_embeddings(s.data * 1e200)),
    ("batch_size=0", "`Statistics.from_embeddings`",
     lambda s: Statistics.from_embeddings(s.data, batch_size=0)),
    ("support points that are all duplicates of one", "`AnchorSet.kmeans`",
     lambda s: AnchorSet.kmeans(SUPPORT, s.data[:1].repeat(16, 1), 4)),
    ("3 farthest points among 2 distinct support points", "`AnchorSet.farthest_point`",
     lambda s: AnchorSet.farthest_point(SUPPORT, s.data[:2].repeat(8, 1), 3)),
    ("NaN relative features", "`RelativeHeadForClassification.forward`",
     lambda s: s.head()(torch.full((2, 8), float("nan")))),
    ("support inputs that are integers ([1, 2, 3])", "`AnchorSet.random`",
     lambda s: AnchorSet.random([1, 2, 3], 2)),
    ("dtype=torch.int64", "`RelativeProjector.from_anchor_set`",
     lambda s: RelativeProjector.from_anchor_set(AnchorSet.random(SUPPORT, 4), s.data[:16],
                                                 s.stats, dtype=torch.int64)),
    ("--num-anchors 8 with --method full_support", "`relrep-hf fit`",
     lambda s: cli("fit", str(s.folder / "run-none"), "--method", "full_support",
                   "--num-anchors", "8")),
    ("--shrinkage auto with --method param", "`relrep-hf fit`",
     lambda s: cli("fit", str(s.folder / "run-none"), "--method", "param",
                   "--shrinkage", "auto")),
    ("--limit -5", "`relrep-hf embed`",
     lambda s: cli("--quiet", "embed", str(s.folder / "run-limit"), "--limit", "-5")),
    ("--test-size -1", "`relrep-hf embed`",
     lambda s: cli("--quiet", "embed", str(s.folder / "run-test"), "--test-size", "-1")),
    ("a writable folder whose parent is read-only", "`RelativeProjector.save_pretrained`",
     read_only_parent),
    ("--repo-id 'bad id!!'", "`relrep-hf push`",
     lambda s: cli("push", str(s.saved("projector-push")), "--repo-id", "bad id!!")),
]  # fmt: skip
