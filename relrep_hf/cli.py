"""``relrep-hf``: the pipeline from the command line.

    relrep-hf embed OUT --encoder minilm:mean:-1 --encoder minilm:cls:-1 ...
    relrep-hf fit OUT --held-out minilm-cls-L-1
    relrep-hf onboard OUT --encoder minilm:mean:3
    relrep-hf evaluate OUT
    relrep-hf fit-migration OUT --source OLD --target NEW --vectors old.npy --out new.npy
    relrep-hf migrate MAP --vectors old.parquet --out new.parquet
    relrep-hf reembed docs.parquet --encoder minilm:mean --out new.parquet [--resume]
    relrep-hf push OUT --repo-id user/my-anchors
    relrep-hf demo [OUT]          # all of the above on the embedded default, offline

Each command is a module of `relrep_hf.commands`; this one builds the parser from them and runs
the one asked for. Errors are one clear line (exit code 2) unless ``--debug`` is given.
``--quiet`` and ``--debug`` go before or after the command. The pipeline is imported only when
a command runs, so ``--help`` and ``--version`` answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence

from relrep_hf import __version__
from relrep_hf.commands import COMMANDS
from relrep_hf.commands.arguments import add_global_flags

__all__ = ["build_parser", "main", "run"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``relrep-hf``: the global flags, then one subparser per command."""
    parser = argparse.ArgumentParser(
        prog="relrep-hf",
        description="Relative representations with learned PARAM anchors and the whitened inner "
        "product: fit an anchor set across encoders, onboard new encoders, evaluate zero-shot "
        "stitching, push to the Hub.",
    )
    parser.add_argument("--version", action="version", version=f"relrep-hf {__version__}")
    add_global_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser


def run(args: argparse.Namespace) -> None:
    """Run the parsed command (its module's ``run``)."""
    args.func(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # the flags given on the command line (a default is not a choice the command may refuse)
    args.given = {a.split("=")[0] for a in (sys.argv[1:] if argv is None else argv)}
    logging.basicConfig(
        level=logging.INFO if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        with _progress_bars(enabled=not args.quiet):
            run(args)
    except (ValueError, OSError, KeyError) as error:
        if args.debug:
            raise
        print(f"relrep-hf {args.command}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        if args.debug or not isinstance(error, dependency_errors()):
            raise
        print(f"relrep-hf {args.command}: error: {dependency_message(error)}", file=sys.stderr)
        return 2
    return 0


# the errors of the stores' database clients, by the module that defines them: caught only
# once that module is loaded (a command that never opened a database imports none of them)
DEPENDENCY_ERRORS = (
    ("psycopg", "Error", "PostgreSQL"),
    ("sqlite3", "Error", "SQLite"),
    ("sqlean", "Error", "SQLite"),
    ("chromadb.errors", "ChromaError", "Chroma"),
    ("qdrant_client.http.exceptions", "UnexpectedResponse", "Qdrant"),
    ("qdrant_client.http.exceptions", "ResponseHandlingException", "Qdrant"),
)


def dependency_errors() -> tuple[type[BaseException], ...]:
    """The error classes of `DEPENDENCY_ERRORS` whose module is loaded."""
    found = (getattr(sys.modules.get(m), n, None) for m, n, _ in DEPENDENCY_ERRORS)
    return tuple(c for c in found if isinstance(c, type))


def dependency_message(error: BaseException) -> str:
    """One line: which database refused what, and what to do."""
    database = next(
        (
            d
            for m, n, d in DEPENDENCY_ERRORS
            if isinstance(error, getattr(sys.modules.get(m), n, ()))
        ),
        "the database",
    )
    first = " ".join(str(error).split()) or type(error).__name__
    return (
        f"{database} refused the operation ({type(error).__name__}: {first}). A migration "
        "swaps its new vectors in only once complete, so the store serves what it served; "
        "`relrep-hf cleanup STORE` lists anything a failed run left. Fix what the database "
        "names (permissions, space, a lock), or rerun with --debug for the traceback."
    )


@contextlib.contextmanager
def _progress_bars(*, enabled: bool) -> Iterator[None]:
    """transformers' and the Hub client's bars ("Loading weights", "Writing model shards",
    uploads) off for the command under ``--quiet``, and back as they were afterwards."""
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    if not enabled:
        transformers_logging.disable_progress_bar()  # also the Hub client's bars
    try:
        yield
    finally:
        if was_enabled and not enabled:
            transformers_logging.enable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
