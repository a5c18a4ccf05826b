"""The small LMs' training text: English prose paragraphs from the docstrings of installed
Python packages (read with ``ast``, nothing is imported), none holding a held-out sentence."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

_DOCTEST = re.compile(r"^\s*(>>>|\.\.\.)")
_RULE = re.compile(r"^\s*[-=~^*]{3,}\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _docstrings(package: str) -> Iterable[str]:
    """Every module, class and function docstring of an installed package, in file order."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ValueError(f"Package {package!r} is not installed; pip install {package}.")
    for path in sorted(Path(spec.origin).parent.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                docstring = ast.get_docstring(node)
                if docstring:
                    yield docstring


def _prose_paragraphs(docstring: str) -> Iterable[str]:
    """Paragraphs of prose: doctest lines and underlines dropped, whitespace collapsed."""
    for block in re.split(r"\n\s*\n", docstring):
        lines = [
            line for line in block.splitlines() if not (_DOCTEST.match(line) or _RULE.match(line))
        ]
        text = " ".join(" ".join(lines).split())
        words = text.split()
        letters = sum(c.isalpha() or c.isspace() for c in text)
        if len(words) >= 8 and letters >= 0.8 * len(text):
            yield text


def training_paragraphs(
    packages: Sequence[str], *, exclude: Iterable[str] = (), max_chars: int | None = None
) -> list[str]:
    """Distinct prose paragraphs from the packages' docstrings, none holding an ``exclude``
    sentence (the held-out evaluation text), up to ``max_chars`` characters in all."""
    excluded = {" ".join(sentence.split()) for sentence in exclude}
    seen: set[str] = set()
    paragraphs, size = [], 0
    for package in packages:
        for docstring in _docstrings(package):
            for paragraph in _prose_paragraphs(docstring):
                if paragraph in seen or any(s in excluded for s in _SENTENCE_END.split(paragraph)):
                    continue
                seen.add(paragraph)
                paragraphs.append(paragraph)
                size += len(paragraph)
                if max_chars is not None and size >= max_chars:
                    return paragraphs
    return paragraphs


def corpus_id(packages: Sequence[str]) -> dict[str, str]:
    """The packages and their installed versions: what the training text depends on."""
    try:
        return {package: importlib.metadata.version(package) for package in packages}
    except importlib.metadata.PackageNotFoundError as error:
        raise ValueError(
            f"The training text comes from the docstrings of {list(packages)}, but {error.name!r} "
            f"is not installed; pip install {error.name}."
        ) from error
