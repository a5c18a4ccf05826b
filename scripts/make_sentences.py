"""Build ``relrep_hf/data/sentences.jsonl`` from Python standard-library docstrings.

Why: the library's demos and tests must run offline on real English prose. The docstrings of
the running interpreter's standard library are human-written English that is always available,
and grouping them by module family gives a small topic-classification task for free.

Usage (from the repository root)::

    python scripts/make_sentences.py            # writes relrep_hf/data/sentences.jsonl + README.md
    python scripts/make_sentences.py --dry-run  # only prints the counts

The output is deterministic for a given Python version (fixed traversal order, fixed seed).
The docstrings are covered by the Python Software Foundation License.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import random
import re
import sys
import warnings
from collections import Counter
from pathlib import Path

SEED = 0
MAX_PER_LABEL = 1000
MIN_WORDS, MAX_WORDS = 6, 40


def _names(text: str) -> list[str]:
    """Whitespace-separated module names -> list (keeps the table below compact)."""
    return text.split()


# Topic label -> the modules whose docstrings feed it (module, classes, functions, methods).
# Submodules are listed explicitly; a module that does not import on this platform is skipped.
FAMILIES: dict[str, list[str]] = {
    "text": _names("""
        string re textwrap difflib unicodedata codecs html html.parser html.entities stringprep
        readline rlcompleter locale gettext shlex csv configparser json json.decoder
        json.encoder xml.dom.minidom xml.dom.pulldom xml.sax xml.sax.handler xml.sax.saxutils
        xml.sax.xmlreader xml.etree.ElementTree xml.parsers.expat pprint reprlib tokenize
        formatter string.templatelib encodings encodings.idna encodings.punycode base64 binascii
        quopri uu pydoc _markupbase xml.dom xml.dom.expatbuilder xml.dom.minicompat
        xml.etree.ElementPath xml.sax.expatreader re._parser re._compiler curses.ascii
    """),
    "network": _names("""
        socket ssl select selectors http http.client http.server http.cookies http.cookiejar
        urllib urllib.request urllib.parse urllib.error urllib.response urllib.robotparser email
        email.message email.parser email.generator email.policy email.headerregistry
        email.contentmanager email.mime.base email.mime.text email.mime.multipart email.header
        email.charset email.encoders email.utils email.errors email.feedparser
        email._header_value_parser email.iterators email.base64mime email.quoprimime smtplib
        ftplib imaplib poplib nntplib telnetlib xmlrpc.client xmlrpc.server socketserver
        wsgiref.simple_server wsgiref.handlers wsgiref.headers wsgiref.util wsgiref.validate
        ipaddress mimetypes webbrowser uuid
    """),
    "files": _names("""
        os os.path posixpath ntpath shutil pathlib glob fnmatch tempfile io _pyio stat filecmp
        zipfile tarfile gzip bz2 lzma zlib fileinput linecache mmap fcntl shelve dbm dbm.dumb
        pickle marshal copyreg sqlite3 zipimport mailbox netrc plistlib chunk wave pkgutil
        importlib.resources logging.handlers
    """),
    "concurrency": _names("""
        threading _threading_local multiprocessing multiprocessing.pool multiprocessing.process
        multiprocessing.queues multiprocessing.managers multiprocessing.connection
        multiprocessing.synchronize multiprocessing.shared_memory multiprocessing.sharedctypes
        multiprocessing.context multiprocessing.reduction multiprocessing.spawn
        multiprocessing.util multiprocessing.heap multiprocessing.popen_fork
        multiprocessing.resource_tracker asyncio asyncio.events asyncio.base_events
        asyncio.tasks asyncio.futures asyncio.locks asyncio.queues asyncio.streams
        asyncio.subprocess asyncio.transports asyncio.protocols asyncio.runners
        asyncio.taskgroups asyncio.timeouts asyncio.selector_events asyncio.unix_events
        asyncio.base_subprocess asyncio.sslproto asyncio.coroutines asyncio.exceptions
        asyncio.trsock asyncio.staggered concurrent.futures concurrent.futures._base
        concurrent.futures.thread concurrent.futures.process queue subprocess sched signal
        _thread contextvars
    """),
    "numbers": _names("""
        math cmath decimal _pydecimal fractions statistics random numbers datetime _pydatetime
        _strptime calendar time timeit zoneinfo operator bisect heapq array struct secrets
        hashlib hmac colorsys graphlib
    """),
}

URL_RE = re.compile(r"https?://|www\.|\S+@\S+\.\w+")
ROLE_RE = re.compile(r":[a-zA-Z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")  # :func:`x` -> x
BACKTICK_RE = re.compile(r"`{1,2}([^`]*)`{1,2}_?")
SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
ABBREV_RE = re.compile(r"\b(e\.g|i\.e|etc|vs|cf|Mr|Dr|No)\.\s", re.IGNORECASE)
WORD_RE = re.compile(r"^[A-Za-z][A-Za-z'-]*[A-Za-z]?[,;:.]?$|^[aAI]$")


def clean_markup(text: str) -> str:
    """Strip reST roles and literal backticks, collapse whitespace."""
    text = ROLE_RE.sub(r"\1", text)
    text = BACKTICK_RE.sub(r"\1", text)
    text = re.sub(r"(?<![\w*])\*{1,2}(\w[^*]*?)\*{1,2}(?![\w*])", r"\1", text)  # *emphasis*
    return re.sub(r"\s+", " ", text).strip()


def is_prose(sentence: str) -> bool:
    """True for a plain English prose sentence (the filter every kept sentence passes)."""
    words = sentence.split()
    if not (MIN_WORDS <= len(words) <= MAX_WORDS):
        return False
    if not sentence[0].isupper() or not sentence.endswith(".") or sentence.endswith(".."):
        return False
    if URL_RE.search(sentence) or ">>>" in sentence or "`" in sentence:
        return False
    if re.search(r"\b(XXX|TODO|FIXME)\b", sentence):
        return False
    if any(ch in sentence for ch in "{}[]<>=|\\#$%^~_@*\t"):
        return False
    if sentence.count("(") != sentence.count(")") or sentence.count("(") > 1:
        return False
    if sentence.count('"') % 2 or sentence.count('"') > 2:
        return False
    alpha = sum(ch.isalpha() or ch == " " for ch in sentence)
    if alpha / len(sentence) < 0.93:
        return False
    plain = sum(bool(WORD_RE.match(w.strip("()\"'"))) for w in words)
    if plain / len(words) < 0.9:
        return False
    # a dotted name, a call or an all-caps token is code, not prose
    return not re.search(r"\w\.\w|\w\(|\b[A-Z_]{4,}\b", sentence)


def paragraphs(doc: str) -> list[str]:
    """Prose paragraphs of a docstring: drop indented blocks, doctests, field lists, tables."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", doc):
        lines = block.splitlines()
        if not lines:
            continue
        if any(line.startswith((" ", "\t")) for line in lines):
            continue  # indented: code example, parameter description, literal block
        if any(
            line.lstrip().startswith((">>>", "...", ":", "..", "-", "+", "=", "|", "*"))
            for line in lines
        ):
            continue
        if block.rstrip().endswith("::"):
            continue
        out.append(clean_markup(block))
    return out


def sentences_of(doc: str) -> list[str]:
    """Split a docstring into candidate sentences (before filtering)."""
    out: list[str] = []
    for para in paragraphs(doc):
        para = ABBREV_RE.sub(lambda m: m.group(0).replace(". ", "._ "), para)
        for sent in SPLIT_RE.split(para):
            out.append(sent.replace("._ ", ". ").strip())
    return out


def docstrings(modname: str) -> list[tuple[str, str]]:
    """(source, docstring) for a module, its public classes/functions and their methods."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = importlib.import_module(modname)
    except Exception:  # optional, platform-specific or removed modules are skipped
        return []
    found: list[tuple[str, str]] = []
    if isinstance(module.__doc__, str):
        found.append((modname, module.__doc__))
    for name in sorted(vars(module)):
        obj = vars(module)[name]
        if name.startswith("__") or not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        last = modname.rsplit(".", 1)[-1]
        # accept C accelerators (_foo for foo) and pure-Python twins (_pyfoo / _pyio for foo / io)
        owners = {modname, "_" + last, last.removeprefix("_py")}
        if getattr(obj, "__module__", None) not in owners:
            continue
        if isinstance(obj.__doc__, str):
            found.append((f"{modname}.{name}", obj.__doc__))
        if inspect.isclass(obj):
            for attr in sorted(vars(obj)):
                member = vars(obj)[attr]
                if attr.startswith("__") and attr != "__init__":
                    continue
                member = getattr(member, "__func__", member)
                if isinstance(member, property):
                    member = member.fget
                doc = getattr(member, "__doc__", None)
                if (inspect.isroutine(member) or callable(member)) and isinstance(doc, str):
                    found.append((f"{modname}.{name}.{attr}", doc))
    return found


def collect() -> list[dict[str, str]]:
    """All filtered, de-duplicated, class-capped, shuffled rows."""
    seen: set[str] = set()
    by_label: dict[str, list[dict[str, str]]] = {label: [] for label in FAMILIES}
    for label, modules in FAMILIES.items():
        for modname in dict.fromkeys(modules):
            for source, doc in docstrings(modname):
                for sent in sentences_of(inspect.cleandoc(doc)):
                    key = sent.lower()
                    if key in seen or not is_prose(sent):
                        continue
                    seen.add(key)
                    by_label[label].append({"text": sent, "label": label, "source": source})
    rng = random.Random(SEED)
    rows: list[dict[str, str]] = []
    for label in FAMILIES:
        group = by_label[label]
        rng.shuffle(group)
        rows.extend(group[:MAX_PER_LABEL])
    rng.shuffle(rows)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parent.parent
    parser.add_argument("--out", type=Path, default=root / "relrep_hf" / "data")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()

    rows = collect()
    counts = Counter(row["label"] for row in rows)
    for label in FAMILIES:
        print(f"{label:12s} {counts[label]}")
    print(f"{'total':12s} {len(rows)}")
    if args.dry_run:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "sentences.jsonl", "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(args.out / "README.md", "w", encoding="utf-8", newline="\n") as fh:
        fh.write(readme(counts, len(rows)))
    print(f"wrote {args.out / 'sentences.jsonl'} and README.md")


def readme(counts: Counter, total: int) -> str:
    """The companion README of the data file (regenerated with it, so the counts stay true)."""
    version = ".".join(map(str, sys.version_info[:3]))

    def families(label: str) -> str:
        imported = [name for name in FAMILIES[label] if name in sys.modules]
        return ", ".join(
            sorted({name.split(".")[0].removeprefix("_py").lstrip("_") for name in imported})
        )

    table = "\n".join(f"| `{label}` | {counts[label]} | {families(label)} |" for label in FAMILIES)
    return f"""# relrep_hf/data

## `sentences.jsonl`

{total} real English sentences with a topic label, the library's offline default corpus: the
retrieval experiments between encoder spaces use the text, the zero-shot classification of
stitched heads uses the labels (`relrep_hf.encoding.corpora.load_sentences`).

One JSON object per line: `{{"text": ..., "label": ..., "source": ...}}`, where `source` is the
`module.qualname` whose docstring the sentence comes from. No header line. The rows are already
shuffled, so the first *n* rows are a random sample with all labels.

### Where it comes from

The sentences are taken from the docstrings of the Python standard library (modules, their
classes, functions and methods) of CPython {version}. The docstrings are part of Python and
are covered by the Python Software Foundation License Version 2
(<https://docs.python.org/3/license.html>), Copyright (c) 2001 Python Software Foundation; All
Rights Reserved.

### How it was made

`python scripts/make_sentences.py` (deterministic for a given Python version; this file was made
with Python {version}):

1. For each topic, import the modules of its family (a module that is missing on the platform is
   skipped) and collect the docstrings of the module and of the classes, functions and methods
   it defines.
2. Keep prose paragraphs only: drop indented blocks (code, parameter lists), doctest lines
   (`>>>`), field lists, bullet lists and literal blocks; strip reST markup (double-backtick
   literals, roles such as ``:func:`name` `` become `name`, emphasis).
3. Split into sentences and keep a sentence if it starts with a capital letter, ends with `.`,
   has {MIN_WORDS}-{MAX_WORDS} words, is at least 93% letters and spaces, and has no URL, e-mail
   address, dotted name, call, code symbol or all-caps token.
4. De-duplicate case-insensitively across all topics (first occurrence wins), shuffle each topic
   with `random.Random({SEED})`, cap each topic at {MAX_PER_LABEL} sentences, and shuffle all rows.

### Counts per label

| label | sentences | module families |
|---|---|---|
{table}
| **total** | **{total}** | |
"""


if __name__ == "__main__":
    main()
