"""The README fits on a screen and opens with the two set-up commands; every relative link in it
and in docs/ resolves to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text("utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the same page
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{page.name} links to missing files: {broken}"


def test_the_readme_is_short_and_opens_with_the_two_commands():
    text = (ROOT / "README.md").read_text("utf-8")
    assert len(text.splitlines()) <= 150
    first_block = text.split("```bash", 1)[1].split("```", 1)[0]
    assert 'pip install "torch==2.13.0" -e ".[demo]" && relrep-hf demo' in first_block
    assert 'pip install "torch==2.13.0" -e ".[test]"' in first_block
    assert "python -m pytest -q" in first_block
    # .ci/run calls the README's test command
    assert "python -m pytest -q" in (ROOT / ".ci" / "run").read_text("utf-8")
