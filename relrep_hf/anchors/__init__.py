"""Anchor methods, one folder each (as PEFT's ``tuners/<method>/``), and their one registration.

Each folder (`param`, `shared_linear`, `full_support`, `random`, `kmeans`, `farthest_point`)
holds its method: its `AnchorMethod` as ``METHOD`` (label, card text, mixing kind, sampler), its
arguments class, its fit, and what only it uses (PARAM's trainer, data and checkpoints); its
pure math stays in `relrep_hf.functional`, below the artifacts, and its docstring says where.
`register_anchor_methods` registers every folder found here (``import relrep_hf`` calls it;
importing a folder registers nothing), so a new in-tree method is one new folder and nothing
else. `REPORT_ORDER` only says where reports and ``--method`` list the package's methods (the
paper's first); a folder it does not name comes after them. A method of the user's is one
`register_anchor_method` call.

>>> [m.name for m in ANCHOR_METHODS.values()][:3]
['param', 'shared_linear', 'full_support']
"""

from __future__ import annotations

import importlib
import pkgutil
import types

from relrep_hf.anchors.anchor_methods import (
    ANCHOR_METHODS,
    AnchorMethod,
    FitData,
    anchor_method,
    register_anchor_method,
    unregister_anchor_method,
)

__all__ = [
    "ANCHOR_METHODS",
    "REPORT_ORDER",
    "AnchorMethod",
    "FitData",
    "anchor_method",
    "method_folders",
    "register_anchor_method",
    "register_anchor_methods",
    "unregister_anchor_method",
]

REPORT_ORDER = ("param", "shared_linear", "full_support", "random", "kmeans", "farthest_point")
"""Where reports and ``--method`` list the package's methods (the paper's first); a folder not
named here comes after these, by name. Not a registration: every folder is registered."""


def method_folders() -> list[types.ModuleType]:
    """The package's methods: every folder of `relrep_hf.anchors` (a sub-package), imported, in
    `REPORT_ORDER`. A folder without its ``METHOD`` is a TypeError naming it."""
    names = [info.name for info in pkgutil.iter_modules(__path__) if info.ispkg]
    rank = {name: place for place, name in enumerate(REPORT_ORDER)}
    names.sort(key=lambda name: (rank.get(name, len(rank)), name))
    folders = [importlib.import_module(f"{__name__}.{name}") for name in names]
    for folder in folders:
        if not isinstance(getattr(folder, "METHOD", None), AnchorMethod):
            raise TypeError(
                f"{folder.__name__} declares no METHOD (an AnchorMethod): every folder of "
                "relrep_hf/anchors/ is an anchor method; declare it, or move the folder out."
            )
    return folders


def register_anchor_methods() -> None:
    """Register the package's methods (`method_folders`) that are not registered yet."""
    for folder in method_folders():
        if folder.METHOD.name not in ANCHOR_METHODS:
            register_anchor_method(folder.METHOD)
