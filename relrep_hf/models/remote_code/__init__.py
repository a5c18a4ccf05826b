"""The code a projector repo carries so that it loads with transformers alone.

``configuration_relative_projector.py`` and ``modeling_relative_projector.py`` in this folder are
standalone (torch + transformers, no relrep_hf import). `write_remote_code` copies them beside a
saved projector and adds ``auto_map`` to its ``config.json``, so that
``AutoModel.from_pretrained(repo, trust_remote_code=True)`` works without relrep_hf installed.

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

__all__ = ["AUTO_MAP", "REMOTE_CODE_FILES", "write_remote_code"]

REMOTE_CODE_FILES = ("configuration_relative_projector.py", "modeling_relative_projector.py")
AUTO_MAP = {
    "AutoConfig": "configuration_relative_projector.RelativeProjectorConfig",
    "AutoModel": "modeling_relative_projector.RelativeProjector",
}


def write_remote_code(folder: str | os.PathLike) -> None:
    """Copy the standalone code into a saved projector ``folder`` and add ``auto_map``.

    ``folder`` must hold the projector's ``config.json``; it is rewritten in transformers'
    format (indent 2, sorted keys) with the ``auto_map`` above.
    """
    folder = Path(folder)
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("model_type") != "relative_projector":
        raise ValueError(
            f"{str(folder)!r} does not hold a relative projector (config.json has model_type "
            f"{config.get('model_type')!r}); remote code is only written for projectors."
        )
    source = resources.files(__name__)
    for name in REMOTE_CODE_FILES:
        with resources.as_file(source.joinpath(name)) as path:
            shutil.copyfile(path, folder / name)
    config["auto_map"] = dict(AUTO_MAP)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
