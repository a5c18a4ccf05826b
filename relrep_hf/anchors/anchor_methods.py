"""The registry of anchor methods: each one's label, fit function, mixing kind and arguments.

Like PEFT's ``tuners/<method>/`` and ``register_peft_method``: each method of the package is one
folder of `relrep_hf.anchors` declaring its `AnchorMethod`, and `relrep_hf.anchors` registers
every such folder; the pipeline, the command line, the run report and the anchor set card read
this registry instead of branching on names. Every fit function takes the method's arguments
(`relrep_hf.anchors.arguments.FitArguments`, or a subclass in its folder) and the training
encoders' rows, and returns the anchor set and which rows it took as support; `fit_sampled` and
`fit_closed_form` are the two shapes the package's fits share. A method of the user's is one
`register_anchor_method(AnchorMethod(...))` (its fit may build ``AnchorSet(mixture, support,
strategy=name, mixing=kind)`` from any pure function). This module is light to import
(``relrep-hf --help`` reads the names); torch comes with a fit.

>>> from relrep_hf.anchors import ANCHOR_METHODS
>>> [(m.name, m.label, m.mixing) for m in ANCHOR_METHODS.values()][:2]
[('param', 'PARAM-WIP', 'stochastic'), ('shared_linear', 'Shared-Linear-WIP', 'linear')]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relrep_hf.anchors.arguments import FitArguments
from relrep_hf.functional.mixing_kinds import (
    Sampler,
    check_mixing_kind,
    forget_strategy_mixing,
    forget_strategy_sampler,
    record_strategy_mixing,
    record_strategy_sampler,
)
from relrep_hf.utils.registry import Registry

if TYPE_CHECKING:
    from torch import Tensor

    from relrep_hf.models.anchor_set import AnchorSet


@dataclass
class FitData:
    """What a method is fitted on: each training encoder's rows ``[N, d_i]`` (row-aligned),
    the N inputs they embed (texts, or references such as ``{"index": 17}``), and the
    provenance the anchor set records."""

    training: Mapping[str, Tensor]
    inputs: Sequence[Any]
    support_reference: dict[str, Any] | None = None
    encoders: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


Fit = Callable[[FitArguments, FitData], "tuple[AnchorSet, Tensor]"]


@dataclass(frozen=True)
class AnchorMethod:
    """One way to make an anchor set.

    Attributes:
        name: the ``strategy`` its anchor sets record.
        label: its column in reports and benchmarks (the paper's names: ``PARAM-WIP``).
        title, anchor_description: how its card names the anchors and one anchor.
        arguments: its arguments class; its defaults are the method's.
        fit: ``fit(args, data) -> (anchor_set, support rows of data)``.
        mixing: the kind of mixing matrix its anchor sets hold (`relrep_hf.functional.mixing`).
        sampler: a sampling method's pure math, which draws its mixture
            (`relrep_hf.functional.mixing_kinds.Sampler`); its registration records it for
            the `AnchorSet` constructor of its name (``AnchorSet.random``, ...).
        compared_with: the method a run's report puts beside it.
        unused: arguments the method ignores, and why (`arguments_from` refuses them given).
        tags: extra tags of its card.
    """

    name: str
    label: str
    title: str
    anchor_description: str
    arguments: type[FitArguments]
    fit: Fit
    mixing: str
    compared_with: str = "param"
    unused: Mapping[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    sampler: Sampler | None = None

    def arguments_from(
        self, values: Mapping[str, Any], given: Collection[str] = ()
    ) -> FitArguments:
        """Its arguments from ``values`` (e.g. the parsed fitting flags: the fields of its
        arguments class are read, others ignored); a field missing, or a ``None`` shrinkage,
        takes the class's default, the method's own. ``given`` names what was given on the
        command line (``--num-anchors`` or ``--num_anchors``): an argument the method ignores
        is refused."""
        for name, why in self.unused.items():
            flag = f"--{name.replace('_', '-')}"
            if {flag, f"--{name}"} & set(given):
                raise ValueError(
                    f"{flag} does not apply to --method {self.name}: {why}. Drop {flag}, or "
                    "choose another --method."
                )
        names = [f.name for f in dataclasses.fields(self.arguments) if f.name != "output_dir"]
        chosen = {n: values[n] for n in names if n in values}
        if chosen.get("shrinkage", "") is None:
            del chosen["shrinkage"]
        return self.arguments("unused", **chosen)


def support_inputs(data: FitData, rows: Tensor) -> list[Any]:
    """The inputs of ``data`` at ``rows`` (an anchor set's support)."""
    return [data.inputs[i] for i in rows.tolist()]


def recorded(anchor_set: AnchorSet, data: FitData) -> AnchorSet:
    """The anchor set with the training encoders and where its support comes from."""
    anchor_set.support_reference = data.support_reference
    anchor_set.encoders = [
        {"name": name, "dim": int(x.shape[1]), **data.encoders.get(name, {})}
        for name, x in data.training.items()
    ]
    return anchor_set


def first_rows(args: FitArguments, data: FitData) -> Tensor:
    """The closed forms' support: the first ``support_size`` rows (default: every row)."""
    import torch

    n = len(data.inputs)
    return torch.arange(min(args.support_size or n, n))


def sampled_support(args: FitArguments, data: FitData) -> tuple[Tensor, list[Any]]:
    """The sampling baselines' support: ``support_size`` rows drawn with ``seed``, and their
    inputs."""
    from relrep_hf.functional.anchor_strategies import sample_support_rows

    n = len(data.inputs)
    rows = sample_support_rows(n, min(args.support_size or n, n), args.seed)
    return rows, support_inputs(data, rows)


def fit_closed_form(
    args: FitArguments, data: FitData, build: Callable[[list[Any], Tensor], AnchorSet]
) -> tuple[AnchorSet, Tensor]:
    """A closed form's fit (full support, shared linear): ``build(support, support_rows)`` (an
    `AnchorSet` constructor) over the first ``support_size`` rows (default: every row)."""
    rows = first_rows(args, data)
    return recorded(build(support_inputs(data, rows), rows), data), rows


def fit_sampled(
    args: FitArguments, data: FitData, build: Callable[[list[Any], list[Tensor]], AnchorSet]
) -> tuple[AnchorSet, Tensor]:
    """A sampling baseline's fit: ``build(support, support_embeddings)`` (an `AnchorSet`
    constructor) over ``support_size`` rows drawn with ``seed``, with the similarity settings
    of ``args``."""
    rows, support = sampled_support(args, data)
    anchor_set = build(support, [x[rows] for x in data.training.values()])
    anchor_set.shrinkage, anchor_set.eps = args.shrinkage, args.eps
    return recorded(anchor_set, data), rows


# name -> method, in the order reports list them (the paper's first; `relrep_hf.anchors`)
ANCHOR_METHODS: Registry[AnchorMethod] = Registry("anchor method")


def register_anchor_method(method: AnchorMethod) -> AnchorMethod:
    """Add ``method``: ``relrep-hf fit --method NAME``, the pipeline, the report and the card
    then take it, and its anchor sets hold its mixing kind. A ValueError if its name is taken
    or its mixing kind is not one of `MIXING_KINDS`."""
    check_mixing_kind(method.name, method.mixing)  # before anything is registered
    ANCHOR_METHODS.register(method)
    record_strategy_mixing(method.name, method.mixing)
    if method.sampler is not None:
        record_strategy_sampler(method.name, method.sampler)
    return method


def unregister_anchor_method(name: str) -> AnchorMethod:
    """Take method ``name`` out (a ValueError if it is not registered)."""
    method = ANCHOR_METHODS.unregister(name)
    forget_strategy_mixing(name)
    forget_strategy_sampler(name)
    return method


def anchor_method(name: str) -> AnchorMethod:
    """The registered method ``name``; a ValueError lists the valid names."""
    if name not in ANCHOR_METHODS:
        raise ValueError(f"Invalid method {name!r}. Valid: {', '.join(map(repr, ANCHOR_METHODS))}.")
    return ANCHOR_METHODS[name]
