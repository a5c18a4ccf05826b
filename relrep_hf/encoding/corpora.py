"""Offline text corpora: real English sentences with topic labels, and template sentences.

Why: the library's main job (stitching encoders through relative representations) and its tests
must run without network access. Two corpora ship with the package:

* :func:`load_sentences` - a few thousand real, human-written English sentences taken from the
  docstrings of the Python standard library, each labelled with one of five topics (``text``,
  ``network``, ``files``, ``concurrency``, ``numbers``). The text serves retrieval between encoder
  spaces, the labels the zero-shot classification of stitched heads. How the file was made:
  ``scripts/make_sentences.py`` and ``relrep_hf/data/README.md``.
* :func:`template_sentences` - the template-generated English sentences of the paper's
  small-language-model experiment (section 5.2: 3,300 sentences). The paper does not publish
  its templates; these are our own, deterministic per seed.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datasets

__all__ = [
    "BUNDLED_SENTENCES_ID",
    "TEMPLATES",
    "TEMPLATE_CAPACITY",
    "load_sentences",
    "sentence_labels",
    "template_sentences",
]

# ---------------------------------------------------------------------------------------------
# Real sentences (packaged data)
# ---------------------------------------------------------------------------------------------

BUNDLED_SENTENCES_ID = "relrep_hf/sentences"
"""How runs and cards name the packaged sentences. Not a Hub dataset: cards do not link it."""


@functools.cache
def _sentence_rows() -> tuple[tuple[str, str, str], ...]:
    """(text, label, source) for every line of the packaged ``data/sentences.jsonl``."""
    path = resources.files("relrep_hf").joinpath("data").joinpath("sentences.jsonl")
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            rows.append((record["text"], record["label"], record["source"]))
    return tuple(rows)


def sentence_labels() -> list[str]:
    """The topic labels of :func:`load_sentences`, sorted (the default ``ClassLabel`` order)."""
    return sorted({label for _, label, _ in _sentence_rows()})


def load_sentences(
    n: int | None = None, *, labels: Sequence[str] | None = None
) -> datasets.Dataset:
    """Real English sentences with topic labels, as a ``datasets.Dataset``.

    Columns: ``text`` (str), ``label`` (``ClassLabel``; ``features["label"].names`` gives the
    topics) and ``source`` (the ``module.qualname`` whose docstring holds the sentence).

    Args:
        n: keep the first ``n`` rows (the file is shuffled, so this is a random sample with
            every label); ``None`` keeps all of them.
        labels: keep only these topics; the ``ClassLabel`` then has exactly these names, in
            this order (class ids ``0..len(labels)-1``). ``None`` keeps every topic, with the
            names of :func:`sentence_labels`.

    Raises:
        ValueError: unknown or repeated labels, a negative ``n``, or more rows asked for than
            there are.
    """
    known = sentence_labels()
    if labels is None:
        names = known
    else:
        if isinstance(labels, str):
            raise TypeError(f"labels must be a sequence of label names, not a string: {labels!r}.")
        names = list(labels)
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ValueError(f"Unknown labels {unknown}; the labels are {known}.")
        if len(set(names)) != len(names):
            raise ValueError(f"labels must not repeat a name, got {names}.")
        if not names:
            raise ValueError(f"labels must name at least one of {known}.")
    index = {name: i for i, name in enumerate(names)}
    rows = [row for row in _sentence_rows() if row[1] in index]
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int or None, got {type(n).__name__}.")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}.")
        if n > len(rows):
            which = "" if labels is None else f" with labels {names}"
            raise ValueError(f"Asked for {n} sentences, but there are only {len(rows)}{which}.")
        rows = rows[:n]
    import datasets  # here, so that naming the bundled corpus (cards, CLI) does not load datasets

    features = datasets.Features(
        {
            "text": datasets.Value("string"),
            "label": datasets.ClassLabel(names=names),
            "source": datasets.Value("string"),
        }
    )
    return datasets.Dataset.from_dict(
        {
            "text": [text for text, _, _ in rows],
            "label": [index[label] for _, label, _ in rows],
            "source": [source for _, _, source in rows],
        },
        features=features,
    )


# ---------------------------------------------------------------------------------------------
# Template sentences (the paper's SLM retrieval dataset)
# ---------------------------------------------------------------------------------------------
# Every slot value has a fixed number of words (people: 2, places: 3, the rest: 1, times are
# always delimited by a comma or the final punctuation), so a sentence determines its slot
# values, and every template has its own skeleton of fixed words: distinct indices give
# distinct sentences.

_PEOPLE = (
    "the teacher", "the doctor", "the farmer", "the pilot", "the student", "the baker",
    "the nurse", "the painter", "the lawyer", "the engineer", "the musician", "the gardener",
    "the chef", "the librarian", "the mechanic", "the journalist", "my neighbour", "my sister",
    "my uncle", "my grandmother", "our guide", "our landlord", "her brother", "his cousin",
)  # fmt: skip
_NAMES = (
    "Anna", "Tom", "Maria", "David", "Lucy", "Omar", "Sara", "Peter",
    "Emma", "Hiro", "Nina", "Carlos", "Grace", "Ivan", "Leila", "Marco",
)  # fmt: skip
_VERBS = (  # (base, past, past participle), all transitive
    ("find", "found", "found"), ("buy", "bought", "bought"), ("paint", "painted", "painted"),
    ("carry", "carried", "carried"), ("repair", "repaired", "repaired"),
    ("clean", "cleaned", "cleaned"), ("sell", "sold", "sold"),
    ("borrow", "borrowed", "borrowed"), ("inspect", "inspected", "inspected"),
    ("drop", "dropped", "dropped"), ("wash", "washed", "washed"), ("wrap", "wrapped", "wrapped"),
    ("move", "moved", "moved"), ("hide", "hid", "hidden"), ("lose", "lost", "lost"),
    ("order", "ordered", "ordered"), ("measure", "measured", "measured"),
    ("deliver", "delivered", "delivered"), ("photograph", "photographed", "photographed"),
    ("steal", "stole", "stolen"),
)  # fmt: skip
_OBJECTS = (
    "box", "lamp", "bicycle", "basket", "chair", "camera", "guitar", "umbrella", "kettle",
    "ladder", "blanket", "clock", "jacket", "bottle", "suitcase", "table", "bucket", "mirror",
    "teapot", "carpet",
)  # fmt: skip
_ADJECTIVES = (
    "red", "old", "small", "heavy", "broken", "new", "wooden", "blue", "large", "shiny",
    "dusty", "green", "cheap", "expensive", "tiny", "yellow",
)  # fmt: skip
_PLACES = (
    "in the kitchen", "at the station", "near the river", "in the garden", "at the market",
    "behind the school", "in the library", "on the bridge", "at the harbour", "in the village",
    "near the hospital", "at the airport", "in the park", "on the farm", "in the museum",
    "at the bakery",
)  # fmt: skip
_TIMES = (
    "yesterday", "last week", "on Monday", "this morning", "in the evening", "after lunch",
    "before dawn", "at noon", "last summer", "on Sunday afternoon", "two days ago",
    "late at night",
)  # fmt: skip
_INTRANSITIVE = (  # past tense
    "waited", "slept", "sang", "worked", "laughed", "rested", "danced", "cooked", "read",
    "studied", "smiled", "whistled",
)  # fmt: skip

_SLOTS: dict[str, tuple[str, ...]] = {
    "person": _PEOPLE,
    "name": _NAMES,
    "base": tuple(v[0] for v in _VERBS),
    "past": tuple(v[1] for v in _VERBS),
    "participle": tuple(v[2] for v in _VERBS),
    "obj": _OBJECTS,
    "adj": _ADJECTIVES,
    "place": _PLACES,
    "time": _TIMES,
    "intrans": _INTRANSITIVE,
}

#: The sentence templates. ``{slot}`` is filled from the slot's word list; ``{Slot}`` is the
#: same, capitalised (sentence start); ``{a_adj}`` is an adjective with its article (a/an).
TEMPLATES: tuple[str, ...] = (
    "{Person} {past} the {adj} {obj} {place} {time}.",
    "{Time}, {person} {past} {a_adj} {obj} {place}.",
    "{Person} {intrans} {place} while {name} {past} the {obj}.",
    "{Name} {past} the {obj} because it was {adj}.",
    "{Place}, {name} {past} {a_adj} {obj} for {person}.",
    "{Name} said that the {obj} {place} was {adj}.",
    "After {person} {past} the {obj}, {name} {intrans} {place}.",
    "{Person} wanted to {base} the {adj} {obj} {time}.",
    "The {adj} {obj} was {participle} by {person} {place}.",
    "{Time}, {name} and {person} {intrans} {place}.",
    "{Name} never {past} the {adj} {obj} again.",
    "Why did {person} {base} the {adj} {obj} {place}?",
)


def _template_slots(template: str) -> list[str]:
    """Slot names of a template, in order (``a_adj`` and capitalised forms map to the list)."""
    names = []
    for part in template.split("{")[1:]:
        name = part.split("}")[0]
        names.append(name.lower().removeprefix("a_"))
    return names


def _capacity(template: str) -> int:
    size = 1
    for slot in _template_slots(template):
        size *= len(_SLOTS[slot])
    return size


_CAPACITIES: tuple[int, ...] = tuple(_capacity(t) for t in TEMPLATES)
#: How many distinct sentences the templates can produce (the largest valid ``n``).
TEMPLATE_CAPACITY: int = sum(_CAPACITIES)


def _render(template: str, index: int) -> str:
    """The ``index``-th sentence of ``template`` (mixed-radix decoding over its slots)."""
    values: dict[str, str] = {}
    for field in template.split("{")[1:]:
        field = field.split("}")[0]
        words = _SLOTS[field.lower().removeprefix("a_")]
        index, i = divmod(index, len(words))
        value = words[i]
        if field.startswith("a_"):
            value = ("an " if value[0] in "aeiou" else "a ") + value
        if field[0].isupper():
            value = value[0].upper() + value[1:]
        values[field] = value
    return template.format(**values)


def _allocate(n: int) -> list[int]:
    """Split ``n`` over the templates as evenly as their capacities allow."""
    counts = [0] * len(TEMPLATES)
    remaining = n
    open_ = [t for t in range(len(TEMPLATES)) if _CAPACITIES[t] > 0]
    while remaining and open_:
        share, extra = divmod(remaining, len(open_))
        for rank, t in enumerate(open_):
            take = min(share + (rank < extra), _CAPACITIES[t] - counts[t])
            counts[t] += take
            remaining -= take
        open_ = [t for t in open_ if counts[t] < _CAPACITIES[t]]
    return counts


def template_sentences(n: int = 3300, *, seed: int = 0) -> list[str]:
    """``n`` distinct template-generated English sentences (the paper's SLM retrieval set).

    The paper (section 5.2) evaluates cross-model retrieval between small language models on
    3,300 template-generated sentences; the templates are not published, so these are our
    own: :data:`TEMPLATES` (12 templates) over slots for people, names, verbs, objects,
    adjectives, places, times and intransitive verbs. The sentences are spread evenly over the
    templates, sampled without replacement within each, and shuffled; the same ``seed`` gives
    the same list.

    Raises:
        ValueError: ``n`` negative or larger than :data:`TEMPLATE_CAPACITY`.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, got {type(n).__name__}.")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}.")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}.")
    if n > TEMPLATE_CAPACITY:
        raise ValueError(
            f"Asked for {n} template sentences, but the templates can produce only "
            f"{TEMPLATE_CAPACITY} distinct ones."
        )
    rng = random.Random(seed)
    sentences = []
    for template, count, capacity in zip(TEMPLATES, _allocate(n), _CAPACITIES, strict=True):
        sentences.extend(_render(template, i) for i in rng.sample(range(capacity), count))
    rng.shuffle(sentences)
    return sentences
