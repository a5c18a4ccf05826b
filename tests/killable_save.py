"""Save one artifact over and over into the same folder, until killed.

Used by ``tests/test_reliability.py``, which SIGKILLs it and then checks that the folder holds
exactly one of the versions written. Version ``v`` of an artifact is a deterministic function of
``v`` and records ``v`` (in the projector's ``encoder_revision``, in the anchor set's
``training``), so the checker can rebuild the version it finds and compare every file.

    python tests/killable_save.py projector|anchor_set FOLDER [FIRST_VERSION [COUNT]]

``crash_at`` kills the process itself at its n-th file-system operation under a folder, so
that a test can walk through every point of a save where a crash could land.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from relrep_hf import AnchorSet, RelativeProjector, RelativeProjectorConfig

# Large enough that writing a version takes a few milliseconds (a kill lands mid-write),
# small enough that a test can write dozens of them.
LARGE = {"hidden_size": 384, "num_anchors": 768, "support_size": 4096}
SMALL = {"hidden_size": 16, "num_anchors": 8, "support_size": 32}


def projector_version(version: int, *, hidden_size: int, num_anchors: int, **_: int):
    """A projector whose every tensor depends on ``version`` (it is never used to project)."""
    config = RelativeProjectorConfig(
        hidden_size=hidden_size, num_anchors=num_anchors, encoder_revision=f"version-{version}"
    )
    projector = RelativeProjector(config)
    generator = torch.Generator().manual_seed(version)
    with torch.no_grad():
        for tensor in (*projector.parameters(), *projector.buffers()):
            tensor.copy_(torch.randn(tensor.shape, generator=generator))
    return projector


def anchor_set_version(version: int, *, num_anchors: int, support_size: int, **_: int):
    """An anchor set whose mixture, support inputs and description depend on ``version``."""
    generator = torch.Generator().manual_seed(version)
    logits = torch.randn(num_anchors, support_size, generator=generator)
    return AnchorSet(
        torch.softmax(logits, dim=1),
        [f"support input {i} of version {version}" for i in range(support_size)],
        training={"version": version},
    )


VERSIONS: dict[str, Callable[..., RelativeProjector | AnchorSet]] = {
    "projector": projector_version,
    "anchor_set": anchor_set_version,
}


def version_of(kind: str, folder: str | os.PathLike) -> int:
    """The version saved in ``folder`` (read from the config, which loads on its own)."""
    if kind == "projector":
        revision = RelativeProjectorConfig.from_pretrained(folder).encoder_revision
        return int(revision.removeprefix("version-"))
    return int(AnchorSet.from_pretrained(folder).training["version"])


def save_versions(
    kind: str,
    folder: str | os.PathLike,
    first: int = 0,
    count: int | None = None,
    *,
    sizes: dict[str, int] = LARGE,
    on_saved: Callable[[int], None] | None = None,
) -> None:
    """Save versions ``first, first + 1, ...`` of ``kind`` into ``folder`` (forever if no count)."""
    torch.set_num_threads(1)  # also makes a forked child safe from the parent's thread pools
    versions = itertools.count(first) if count is None else range(first, first + count)
    for version in versions:
        VERSIONS[kind](version, **sizes).save_pretrained(folder)
        if on_saved is not None:
            on_saved(version)


def crash_at(operation: int, root: str | os.PathLike) -> None:
    """SIGKILL this process just before its ``operation``-th (1-based) file-system operation
    on a path under ``root``, as Python's audit events see them (open, mkdir, rename, remove,
    rmtree, link, chmod, scandir...). Writes inside a native library (safetensors) and the
    folder swap (one ``renameat2`` call through ctypes) raise no event: the crash points just
    before and after them stand for them."""
    prefix = os.fsencode(Path(root).resolve())
    seen = 0

    def names_root(value: object) -> bool:
        if isinstance(value, (tuple, list)):
            return any(names_root(item) for item in value)
        if isinstance(value, (str, bytes, os.PathLike)):
            return os.fsencode(os.path.abspath(value)).startswith(prefix)
        return False

    def hook(event: str, args: tuple) -> None:
        nonlocal seen
        on_files = event.startswith(("os.", "shutil.")) or event == "open"
        if on_files and names_root(args):
            seen += 1
            if seen == operation:
                os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)


if __name__ == "__main__":
    kind, folder = sys.argv[1], sys.argv[2]
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    count = int(sys.argv[4]) if len(sys.argv) > 4 else None
    save_versions(kind, folder, first, count, on_saved=lambda v: print(v, flush=True))
