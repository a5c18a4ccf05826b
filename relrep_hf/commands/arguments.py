"""The argument pieces the commands share: the global flags repeated after the command, the
fitting flags built by `transformers.HfArgumentParser` over the arguments dataclasses, each
anchor method's arguments read back from them, the run folder and the encoder flags.

Light to import: ``relrep-hf --help`` builds every command's parser without torch.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from relrep_hf.anchors import ANCHOR_METHODS, anchor_method
from relrep_hf.anchors.arguments import FitArguments
from relrep_hf.anchors.param.arguments import ParamTrainingArguments
from relrep_hf.utils.defaults import DEFAULT_METHOD


def settle_garbage_collector() -> None:
    """Keep the garbage collector off the objects the imports left, for a long command.

    After the pipeline's imports about 420,000 objects are alive (torch, transformers,
    datasets), and every full collection walks them all: transformers' Trainer runs
    ``gc.collect()`` at the start of each ``train()`` (accelerate's ``clear_device_cache``), 13
    times in the main job, 1.4-1.8 s each on a loaded 2-core machine (3.2 s each, 42 s of 593 s,
    under cProfile). Frozen (``gc.freeze``), those objects are never walked again (a collection
    then takes milliseconds); they live as long as the process anyway. Automatic collections run
    every 100,000 new container objects instead of 700, so that parsing a GGUF vocabulary (millions
    of objects) does not trigger a full walk again and again. Objects created later are collected
    as before; no result changes. As tests/conftest.py does for the test session."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless it has none or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.nargs == 0 or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_global_flags(parser: argparse.ArgumentParser, *, default: Any = False) -> None:
    """``--debug`` and ``--quiet``; after the command their default is SUPPRESS, which keeps a
    flag given before it."""
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show full tracebacks"
    )
    parser.add_argument("--quiet", action="store_true", default=default, help="no progress bars")


def add_command(
    commands: argparse._SubParsersAction,
    name: str,
    *,
    parents: Sequence[argparse.ArgumentParser] = (),
    **kwargs: Any,
) -> argparse.ArgumentParser:
    """A command's parser: the global flags accepted after it too, every default shown."""
    after = argparse.ArgumentParser(add_help=False)
    add_global_flags(after, default=argparse.SUPPRESS)
    return commands.add_parser(
        name, parents=[after, *parents], formatter_class=HelpFormatter, **kwargs
    )


RUN_DIR_HELP = "the run folder (`relrep-hf embed RUN_DIR` makes it)"


def add_run_dir(parser: argparse.ArgumentParser, **kwargs: Any) -> None:
    """The positional run folder (``relrep-hf embed`` makes it, the others read it)."""
    parser.add_argument("run_dir", type=Path, **{"help": RUN_DIR_HELP, **kwargs})


def add_hidden_alias(parser: argparse.ArgumentParser, action: argparse.Action, old: str) -> None:
    """``old`` parses as ``action`` does (same destination) but is left out of help and usage:
    an old spelling still accepted. A separate action, so a parser built on ``parser`` (as a
    parent) keeps it."""
    alias = copy.copy(action)
    alias.option_strings, alias.help = [old], argparse.SUPPRESS
    alias.default, alias.required = argparse.SUPPRESS, False
    parser._add_action(alias)


def kebab_case_flags(parser: argparse.ArgumentParser) -> None:
    """Every ``--snake_case`` option shown as ``--kebab-case`` only; the snake_case spelling
    still parses, hidden (`add_hidden_alias`)."""
    for action in list(parser._actions):
        old = [s for s in action.option_strings if s.startswith("--") and "_" in s]
        if not old:
            continue
        for option in old:
            del parser._option_string_actions[option]
        action.option_strings = list(
            dict.fromkeys(s.replace("_", "-") if s in old else s for s in action.option_strings)
        )
        for option in action.option_strings:
            parser._option_string_actions[option] = action
        for option in old:
            add_hidden_alias(parser, action, option)


def add_encoders_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """The repeatable ``--encoder SPEC`` (into ``args.encoders``)."""
    parser.add_argument("--encoder", action="append", dest="encoders", metavar="SPEC", help=help)


def fitting_flags() -> argparse.ArgumentParser:
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
    _group_by_method(flags)
    kebab_case_flags(flags)
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


def _group_by_method(flags: argparse.ArgumentParser) -> None:
    """Two groups titled by what they fit: every method's arguments (`FitArguments`), then
    PARAM's training. ``--disable-tqdm`` is ``--quiet`` under PARAM's old name (hidden)."""
    (group,) = [
        g for g in flags._action_groups if g.title == ParamTrainingArguments._argument_group_name
    ]
    common = {f.name for f in dataclasses.fields(FitArguments)}
    group.title = "anchor set fitting (every --method; defaults: the method's own)"
    param = flags.add_argument_group(
        "PARAM training (--method param only; defaults: the paper's Table 5)"
    )
    param._group_actions[:] = [a for a in group._group_actions if a.dest not in common]
    group._group_actions[:] = [a for a in group._group_actions if a.dest in common]
    disable_tqdm = next(a for a in flags._actions if a.dest == "disable_tqdm")
    disable_tqdm.dest, disable_tqdm.default, disable_tqdm.help = (
        "quiet",
        argparse.SUPPRESS,
        argparse.SUPPRESS,
    )


def _shrinkage(value: str) -> float | str:
    return value if value == "auto" else float(value)


def add_method_flag(parser: argparse.ArgumentParser) -> None:
    """``--method``: one of the registered anchor methods."""
    parser.add_argument(
        "--method",
        choices=list(ANCHOR_METHODS),
        default=DEFAULT_METHOD,
        help="how the anchor set is fitted (`relrep_hf.anchors`): the shared "
        "linear closed form (the quality benchmark's winner: every training row as support, the "
        "shrinkage chosen from them, unless --support-size / --shrinkage say otherwise), the "
        "paper's PARAM, full support, or the random, k-means and farthest-point baselines",
    )


def method_args(
    args: argparse.Namespace, method: str, *, given: Collection[str] = ()
) -> FitArguments:
    """``method``'s arguments from the fitting flags, by its registry entry (which refuses a
    ``given`` flag the method ignores); ``--quiet`` turns PARAM's progress bar off."""
    values = vars(args) | {"disable_tqdm": args.quiet}
    return anchor_method(method).arguments_from(values, given=given)


def training_args(args: argparse.Namespace) -> ParamTrainingArguments:
    """PARAM's arguments from the flags (what ``--method param`` trains with)."""
    return method_args(args, "param")


def step_keywords(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """A pipeline step's keywords: the flags ``names`` as given, and `show_progress`."""
    return {name: getattr(args, name) for name in names} | {"show_progress": show_progress(args)}


def show_progress(args: argparse.Namespace) -> bool | None:
    """A step's ``show_progress``: off under ``--quiet``, else the library's choice."""
    return False if args.quiet else None


def print_report(report: dict) -> None:
    """A run's report as the tables of ``report.md``, after a blank line."""
    from relrep_hf.pipeline import steps as pipeline

    print()
    print(pipeline.render_report(report))


RAY_FLAGS = ("address", "num_workers", "num_gpus")  # `add_ray_flags`' destinations


def add_ray_flags(parser: argparse.ArgumentParser | Any, *, workers: bool = True) -> None:
    """The cluster flags of ``--engine ray`` (``migrate``, ``reembed``, ``onboard``) on
    ``parser`` (or an argument group): ``--address``, and with ``workers`` ``--num-workers``
    and ``--num-gpus`` (encoder actors)."""
    parser.add_argument(
        "--address",
        default=None,
        help="--engine ray: the Ray cluster to join (ray.init(address=...): 'auto' or "
        "HOST:PORT; default: RAY_ADDRESS, else a local cluster)",
    )
    if workers:
        parser.add_argument(
            "--num-workers",
            type=int,
            default=None,
            help="--engine ray: encoder actors (default: one per GPU of the cluster, else one "
            "per CPU)",
        )
        parser.add_argument(
            "--num-gpus",
            type=float,
            default=None,
            help="--engine ray: GPUs per encoder actor (default: 1 where the cluster has GPUs)",
        )


def join_ray(args: argparse.Namespace) -> None:
    """Before an ``--engine ray`` run: refuse the cluster flags under ``--engine local``, and
    join ``--address`` when given (else the library starts Ray: ``RAY_ADDRESS`` or a local
    cluster)."""
    given = [name for name in RAY_FLAGS if getattr(args, name, None) is not None]
    if args.engine != "ray":
        if given:
            raise ValueError(
                f"--{given[0].replace('_', '-')} applies to --engine ray, not --engine local."
            )
        return
    workers = getattr(args, "num_workers", None)
    if workers is not None and workers < 1:
        raise ValueError(f"--num-workers must be 1 or more, got {workers}.")
    if args.address is not None:
        from relrep_hf.migration.ray_engine import require_ray

        ray = require_ray()
        if not ray.is_initialized():
            ray.init(address=args.address)
