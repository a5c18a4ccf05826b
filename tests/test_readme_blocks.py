"""Every ```python block of README.md and docs/*.md runs as pasted, in a fresh process in an
empty folder (forked from a fresh interpreter that imported torch, transformers, datasets and the
like, and nothing of relrep_hf: `WarmInterpreter`, 12-14 CPU s less a block); a block that
cannot run alone says so in the page (``<!-- fragment: reason -->`` on the line before it) and
is named in FRAGMENTS below, so a new fragment is a visible decision."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.forked import PRELOAD, WarmInterpreter

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
FRAGMENT_MARK = re.compile(r"<!-- fragment: (.+?) -->\n$")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
FENCED = re.compile(r"^```.*?^```", re.S | re.M)

# The blocks that do not run alone, by name (page § heading, #n for a heading's n-th block).
FRAGMENTS = {
    "docs/distributed.md § Launching",
    "docs/distributed.md § Statistics in your own loop",
    "docs/distributed.md § The cluster recipe",
    "docs/heads.md § The documented path",
    "docs/heads.md § In transformers.pipeline #2",
    "docs/migration.md § Fit the map",
    "docs/migration.md § Move the stored vectors",
    "docs/migration.md § Database stores",
    "docs/migration.md § The bridge: no rewrite at all",
    "docs/usage.md § Using relrep_hf",
    "docs/usage.md § Using relrep_hf #2",
    "docs/usage.md § Encoders",
}


@dataclass(frozen=True)
class Block:
    name: str
    code: str
    fragment_reason: str | None


def doc_blocks() -> list[Block]:
    """Every python block of the pages, named by its page and section."""
    blocks = []
    for page in PAGES:
        text = page.read_text("utf-8")
        seen: dict[str, int] = {}
        for match in BLOCK.finditer(text):
            before = text[: match.start()]
            headings = HEADING.findall(FENCED.sub("", before))  # not the comments in code
            section = f"{page.relative_to(ROOT)} § {headings[-1] if headings else page.name}"
            seen[section] = seen.get(section, 0) + 1
            name = section if seen[section] == 1 else f"{section} #{seen[section]}"
            mark = FRAGMENT_MARK.search(before)
            blocks.append(Block(name, match.group(1), mark.group(1) if mark else None))
    return blocks


BLOCKS = doc_blocks()
RUNNABLE = [block for block in BLOCKS if block.fragment_reason is None]


def test_the_fragments_are_the_ones_listed_and_say_why():
    marked = {block.name for block in BLOCKS if block.fragment_reason is not None}
    assert marked == FRAGMENTS, (
        f"marked in the pages but not listed: {sorted(marked - FRAGMENTS)}; listed but not "
        f"marked: {sorted(FRAGMENTS - marked)}"
    )
    assert all(len(block.fragment_reason or "x" * 20) >= 20 for block in BLOCKS)
    assert "README.md § Use it" in {block.name for block in RUNNABLE}  # the quickstart runs


# The blocks' children also start with transformers (its models and pipelines) and datasets
# imported: a block's imports took 4.6 CPU s a child without them, 0.6 with them. The Auto
# classes are then registered as `import relrep_hf` after transformers registers them; the
# import hook's path, and every import order, are test_init's cases.
BLOCK_PRELOAD = (*PRELOAD, "transformers.modeling_utils", "transformers.pipelines", "datasets")


@pytest.fixture(scope="module")
def warm():
    with WarmInterpreter(preload=BLOCK_PRELOAD) as interpreter:
        yield interpreter


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_the_block_runs_as_pasted(block, tmp_path, warm):
    """README.md's quickstart embeds 2,000 sentences with MiniLM: about a minute on 2 cores."""
    returncode, _, stderr = warm.run(block.code, cwd=tmp_path, timeout=900)
    assert returncode == 0, f"{block.name} failed:\n{stderr[-4000:]}"
