"""Registration of relrep_hf's configs and models with transformers' Auto classes.

``import relrep_hf`` calls `install_auto_registration`: ``AutoConfig`` learns the three configs,
``AutoModel`` the projector and the head, and ``AutoModelForSequenceClassification`` the head and
the text classifier (`RelativeModelForSequenceClassification`) as soon as
transformers' auto modules are imported (at once if they already are), so the package itself
imports neither torch nor transformers (``relrep-hf --help`` stays fast).
"""

from __future__ import annotations

import importlib.abc
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["install_auto_registration"]


def _register_configs() -> None:
    from transformers import AutoConfig

    from relrep_hf.models.configuration_relative_classifier import RelativeClassifierConfig
    from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
    from relrep_hf.models.configuration_relative_projector import RelativeProjectorConfig

    AutoConfig.register(RelativeProjectorConfig.model_type, RelativeProjectorConfig, exist_ok=True)
    AutoConfig.register(RelativeHeadConfig.model_type, RelativeHeadConfig, exist_ok=True)
    AutoConfig.register(
        RelativeClassifierConfig.model_type, RelativeClassifierConfig, exist_ok=True
    )


def _register_models() -> None:
    from transformers import AutoModel, AutoModelForSequenceClassification

    from relrep_hf.models.configuration_relative_classifier import RelativeClassifierConfig
    from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
    from relrep_hf.models.configuration_relative_projector import RelativeProjectorConfig
    from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
    from relrep_hf.models.modeling_relative_projector import RelativeProjector
    from relrep_hf.models.modeling_relative_wrapper import RelativeModelForSequenceClassification

    AutoModel.register(RelativeProjectorConfig, RelativeProjector, exist_ok=True)
    AutoModel.register(RelativeHeadConfig, RelativeHeadForClassification, exist_ok=True)
    AutoModelForSequenceClassification.register(
        RelativeHeadConfig, RelativeHeadForClassification, exist_ok=True
    )
    AutoModelForSequenceClassification.register(
        RelativeClassifierConfig, RelativeModelForSequenceClassification, exist_ok=True
    )


class _AutoRegistration(importlib.abc.MetaPathFinder):
    """Registers with the Auto classes once transformers' auto module defining them has run.

    A registration imports our configuration and modeling modules, which import transformers'
    ``configuration_utils`` / ``modeling_utils``; transformers imports its auto modules from
    inside those, so a registration waits until no transformers or relrep_hf module is still
    executing (the outermost one to finish runs it). Removed from ``sys.meta_path`` when done.
    """

    _WATCHED = ("transformers.", "relrep_hf.")

    def __init__(self, pending: dict[str, Callable[[], None]]):
        self.pending = pending  # auto module -> its registration
        self.executing: set[str] = set()
        self.executed: set[str] = set()  # still flagged as initialising until exec returns

    def find_spec(self, name: str, path: Any = None, target: ModuleType | None = None) -> Any:
        if not name.startswith(self._WATCHED):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is not None and hasattr(loader, "exec_module"):
            loader.exec_module = self._wrap(
                name, loader.exec_module
            )  # this loader is this module's
        return spec

    def _wrap(self, name: str, exec_module: Callable[[ModuleType], None]) -> Callable:
        def exec_and_register(module: ModuleType) -> None:
            self.executing.add(name)
            try:
                exec_module(module)
            finally:
                self.executing.discard(name)
            if name in self.pending:
                self.executed.add(name)
            self.register_ready()

        return exec_and_register

    def register_ready(self) -> None:
        if self.executing:
            return
        for module_name in list(self.pending):
            module = sys.modules.get(module_name)
            if module is None or (module_name not in self.executed and _executing(module)):
                continue
            register = self.pending.pop(module_name, None)  # None: a nested call ran it
            try:
                if register is not None:
                    register()
            except Exception as error:  # never break the user's import of transformers
                warnings.warn(
                    f"relrep_hf could not register its models with transformers' Auto classes "
                    f"({type(error).__name__}: {error}); load them through "
                    f"relrep_hf.RelativeProjector / RelativeHeadForClassification instead.",
                    stacklevel=2,
                )
        if not self.pending and self in sys.meta_path:
            sys.meta_path.remove(self)


def _executing(module: ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def install_auto_registration() -> None:
    """Register now what transformers has already imported, the rest when it is imported."""
    registration = _AutoRegistration(
        {
            "transformers.models.auto.configuration_auto": _register_configs,
            "transformers.models.auto.modeling_auto": _register_models,
        }
    )
    sys.meta_path.insert(0, registration)
    registration.register_ready()  # what transformers has already imported, at once
