"""Anchor methods, one folder each (as PEFT's ``tuners/<method>/``), and their one registration.

Each folder (`param`, `shared_linear`, `full_support`, `random`, `kmeans`, `farthest_point`)
declares its `AnchorMethod` as ``METHOD``: its arguments class, its fit (its pure math stays in
`relrep_hf.functional`, below the artifacts, and its folder's docstring says where), its mixing
kind and card text. `METHOD_FOLDERS` is the one list of them, in the order reports list them
(the paper's first), and `register_anchor_methods` registers it (``import relrep_hf`` calls it;
importing a folder registers nothing); a new in-tree method is one new folder and one entry of
that list. A method of the user's is one `register_anchor_method` call.

>>> [m.name for m in ANCHOR_METHODS.values()][:3]
['param', 'shared_linear', 'full_support']
"""

from __future__ import annotations

from relrep_hf.anchors import farthest_point, full_support, kmeans, param, random, shared_linear
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
    "METHOD_FOLDERS",
    "AnchorMethod",
    "FitData",
    "anchor_method",
    "register_anchor_method",
    "register_anchor_methods",
    "unregister_anchor_method",
]

METHOD_FOLDERS = (param, shared_linear, full_support, random, kmeans, farthest_point)
"""The package's methods, each a folder with its ``METHOD``, in the order reports list them."""


def register_anchor_methods() -> None:
    """Register the package's methods (`METHOD_FOLDERS`) that are not registered yet."""
    for folder in METHOD_FOLDERS:
        if folder.METHOD.name not in ANCHOR_METHODS:
            register_anchor_method(folder.METHOD)
