"""The code a projector, head or text classifier repo carries so that it loads with transformers
alone.

The ``configuration_*.py`` and ``modeling_*.py`` files in this folder are standalone (torch +
transformers, no relrep_hf import; the classifier's import the projector's and the head's beside
them). `write_remote_code` copies an artifact's files beside it and adds ``auto_map`` to its
``config.json``, so that ``AutoModel.from_pretrained(repo, trust_remote_code=True)`` (a head:
``AutoModelForSequenceClassification``; a text classifier: ``pipeline("text-classification",
model=repo, trust_remote_code=True)``) works without relrep_hf installed.

Why a standalone copy rather than code generated from the package at push time: the runtime
half of the math is three one-line ``apply`` functions (the fused weight and bias are prepared
by relrep_hf and stored), while generating the files would tie the push to the layout of the
package's sources. The copy is kept honest by the test suite, which checks that it gives
bit-identical outputs to `relrep_hf.RelativeProjector` for every registered similarity.
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import resources
from pathlib import Path

__all__ = ["AUTO_MAP", "REMOTE_CODE", "REMOTE_CODE_FILES", "write_remote_code"]

_PROJECTOR_FILES = ("configuration_relative_projector.py", "modeling_relative_projector.py")
_HEAD_FILES = ("configuration_relative_head.py", "modeling_relative_head.py")
_CLASSIFIER_FILES = ("configuration_relative_classifier.py", "modeling_relative_classifier.py")

# model_type -> (the files its folder carries, config.json's auto_map)
REMOTE_CODE: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "relative_projector": (
        _PROJECTOR_FILES,
        {
            "AutoConfig": "configuration_relative_projector.RelativeProjectorConfig",
            "AutoModel": "modeling_relative_projector.RelativeProjector",
        },
    ),
    "relative_head": (
        _HEAD_FILES,
        {
            "AutoConfig": "configuration_relative_head.RelativeHeadConfig",
            "AutoModel": "modeling_relative_head.RelativeHeadForClassification",
            "AutoModelForSequenceClassification": (
                "modeling_relative_head.RelativeHeadForClassification"
            ),
        },
    ),
    "relative_classifier": (
        _PROJECTOR_FILES + _HEAD_FILES + _CLASSIFIER_FILES,
        {
            "AutoConfig": "configuration_relative_classifier.RelativeClassifierConfig",
            "AutoModelForSequenceClassification": (
                "modeling_relative_classifier.RelativeModelForSequenceClassification"
            ),
        },
    ),
}
REMOTE_CODE_FILES, AUTO_MAP = REMOTE_CODE["relative_projector"]  # the projector's


def write_remote_code(folder: str | os.PathLike) -> None:
    """Copy the standalone code of the artifact saved in ``folder`` (a projector, a head or a
    text classifier) beside it and add its ``auto_map``.

    ``folder`` must hold the artifact's ``config.json``; it is rewritten in transformers'
    format (indent 2, sorted keys) with the ``auto_map`` of `REMOTE_CODE`.
    """
    folder = Path(folder)
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    model_type = config.get("model_type")
    if model_type not in REMOTE_CODE:
        raise ValueError(
            f"{str(folder)!r} does not hold a relative projector, head or classifier "
            f"(config.json has model_type {model_type!r}); remote code is only written for those."
        )
    files, auto_map = REMOTE_CODE[model_type]
    source = resources.files(__name__)
    for name in files:
        with resources.as_file(source.joinpath(name)) as path:
            shutil.copyfile(path, folder / name)
    config["auto_map"] = dict(auto_map)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
