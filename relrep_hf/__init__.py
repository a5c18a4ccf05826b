"""relrep_hf: relative representations with learned anchors, for the Hugging Face ecosystem.

After ``import relrep_hf``, ``transformers.AutoConfig``, ``AutoModel`` and
``AutoModelForSequenceClassification`` load saved projectors and heads.

Importing the package imports nothing heavy (no torch, no transformers): every public name is
imported on first use (PEP 562 ``__getattr__``), and the Auto classes are registered when
transformers' auto modules are imported (at once, if they already are). So ``relrep-hf --help``
answers without loading torch.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relrep_hf.anchor_set import AnchorSet
    from relrep_hf.configuration_relative_head import RelativeHeadConfig
    from relrep_hf.configuration_relative_projector import RelativeProjectorConfig
    from relrep_hf.extraction import embeddings_tensor, extract_embeddings
    from relrep_hf.head_trainer import HeadTrainer, HeadTrainingArguments, HeadTrainOutput
    from relrep_hf.hub import HubError, push_artifact
    from relrep_hf.modeling_relative_head import (
        RelativeHeadForClassification,
        check_head_matches_projector,
    )
    from relrep_hf.modeling_relative_projector import RelativeProjector
    from relrep_hf.modeling_relative_wrapper import (
        RelativeWrapper,
        RelativeWrapperOutput,
        RelativeWrapperWithHead,
    )
    from relrep_hf.param_arguments import ParamTrainingArguments
    from relrep_hf.param_trainer import ParamTrainer
    from relrep_hf.similarities import SIMILARITIES, relative_projection
    from relrep_hf.statistics import Statistics, whitening_matrix
    from relrep_hf.translation import LatentTranslator, relative_inverse, translate

__version__ = "0.1.0"

# public name -> the module that defines it, imported on first access
_LAZY = {
    "AnchorSet": "relrep_hf.anchor_set",
    "RelativeHeadConfig": "relrep_hf.configuration_relative_head",
    "RelativeProjectorConfig": "relrep_hf.configuration_relative_projector",
    "embeddings_tensor": "relrep_hf.extraction",
    "extract_embeddings": "relrep_hf.extraction",
    "HeadTrainer": "relrep_hf.head_trainer",
    "HeadTrainingArguments": "relrep_hf.head_trainer",
    "HeadTrainOutput": "relrep_hf.head_trainer",
    "HubError": "relrep_hf.hub",
    "push_artifact": "relrep_hf.hub",
    "RelativeHeadForClassification": "relrep_hf.modeling_relative_head",
    "check_head_matches_projector": "relrep_hf.modeling_relative_head",
    "RelativeProjector": "relrep_hf.modeling_relative_projector",
    "RelativeWrapper": "relrep_hf.modeling_relative_wrapper",
    "RelativeWrapperOutput": "relrep_hf.modeling_relative_wrapper",
    "RelativeWrapperWithHead": "relrep_hf.modeling_relative_wrapper",
    "ParamTrainingArguments": "relrep_hf.param_arguments",
    "ParamTrainer": "relrep_hf.param_trainer",
    "SIMILARITIES": "relrep_hf.similarities",
    "relative_projection": "relrep_hf.similarities",
    "Statistics": "relrep_hf.statistics",
    "whitening_matrix": "relrep_hf.statistics",
    "LatentTranslator": "relrep_hf.translation",
    "relative_inverse": "relrep_hf.translation",
    "translate": "relrep_hf.translation",
}

__all__ = [
    "SIMILARITIES",
    "AnchorSet",
    "HeadTrainOutput",
    "HeadTrainer",
    "HeadTrainingArguments",
    "HubError",
    "LatentTranslator",
    "ParamTrainer",
    "ParamTrainingArguments",
    "RelativeHeadConfig",
    "RelativeHeadForClassification",
    "RelativeProjector",
    "RelativeProjectorConfig",
    "RelativeWrapper",
    "RelativeWrapperOutput",
    "RelativeWrapperWithHead",
    "Statistics",
    "check_head_matches_projector",
    "embeddings_tensor",
    "extract_embeddings",
    "push_artifact",
    "relative_inverse",
    "relative_projection",
    "translate",
    "whitening_matrix",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'relrep_hf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# ---- registration with transformers' Auto classes --------------------------------------------


def _register_configs() -> None:
    from transformers import AutoConfig

    from relrep_hf.configuration_relative_head import RelativeHeadConfig
    from relrep_hf.configuration_relative_projector import RelativeProjectorConfig

    AutoConfig.register(RelativeProjectorConfig.model_type, RelativeProjectorConfig, exist_ok=True)
    AutoConfig.register(RelativeHeadConfig.model_type, RelativeHeadConfig, exist_ok=True)


def _register_models() -> None:
    from transformers import AutoModel, AutoModelForSequenceClassification

    from relrep_hf.configuration_relative_head import RelativeHeadConfig
    from relrep_hf.configuration_relative_projector import RelativeProjectorConfig
    from relrep_hf.modeling_relative_head import RelativeHeadForClassification
    from relrep_hf.modeling_relative_projector import RelativeProjector

    AutoModel.register(RelativeProjectorConfig, RelativeProjector, exist_ok=True)
    AutoModel.register(RelativeHeadConfig, RelativeHeadForClassification, exist_ok=True)
    AutoModelForSequenceClassification.register(
        RelativeHeadConfig, RelativeHeadForClassification, exist_ok=True
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


def _install_auto_registration() -> None:
    registration = _AutoRegistration(
        {
            "transformers.models.auto.configuration_auto": _register_configs,
            "transformers.models.auto.modeling_auto": _register_models,
        }
    )
    sys.meta_path.insert(0, registration)
    registration.register_ready()  # what transformers has already imported, at once


_install_auto_registration()
