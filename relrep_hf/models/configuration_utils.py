"""`RelrepConfig`: what the configs of relrep_hf's artifacts share.

A config.json written by a newer relrep_hf (a higher ``format_version``) is refused with the
fix (upgrade) rather than read wrongly, and keys this version does not know (a newer version's,
or a hand edit's typo) are warned about by name instead of being kept silently and never used.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

from transformers import PreTrainedConfig

FORMAT_VERSION = 1  # of config.json; raise it when a change would be read wrongly by older code
# the anchor set an artifact belongs to: a head reads a projector's features only when they agree
ANCHOR_SET_KEYS = ("anchor_set_id", "anchor_set_revision", "anchor_set_fingerprint")

# keys that transformers itself writes to or passes through a config
_TRANSFORMERS_KEYS = frozenset(
    set(inspect.signature(PreTrainedConfig.__init__).parameters)
    | set(PreTrainedConfig().to_dict())
    | {"num_labels", "output_attentions", "use_return_dict", "tie_word_embeddings"}
    | {"model_type", "_commit_hash", "_name_or_path", "name_or_path", "auto_map", "torch_dtype"}
    | {"attn_implementation", "_attn_implementation", "_attn_implementation_autoset"}
    | {"use_cache"}  # transformers.Trainer writes it into the model's config when it trains
) - {"self"}


class NewerFormatError(ValueError):
    """A config.json written by a newer relrep_hf than this one."""


class RelrepConfig(PreTrainedConfig):
    """A `PreTrainedConfig` that checks ``format_version``, warns about unknown keys, and
    records the anchor set the artifact belongs to.

    Args:
        anchor_set_id, anchor_set_revision (`str`): Hub id and commit of the anchor set.
        anchor_set_fingerprint (`str`): its content hash (`AnchorSet.fingerprint`).
    """

    artifact_name = "model"  # in messages: "projector", "head"

    def __init__(
        self,
        format_version: int = FORMAT_VERSION,
        anchor_set_id: str = "",
        anchor_set_revision: str = "",
        anchor_set_fingerprint: str = "",
        **kwargs: Any,
    ):
        if not isinstance(format_version, int) or isinstance(format_version, bool):
            raise ValueError(
                f"The {self.artifact_name}'s config.json has format_version "
                f"{format_version!r}, not an integer: it is corrupted. Save it again."
            )
        if format_version > FORMAT_VERSION:
            raise NewerFormatError(
                f"The {self.artifact_name}'s config.json has format_version {format_version}, "
                f"newer than this relrep_hf reads ({FORMAT_VERSION}): upgrade relrep_hf "
                "(pip install -U relrep_hf)."
            )
        known = _TRANSFORMERS_KEYS | set(inspect.signature(type(self).__init__).parameters)
        known |= set(inspect.signature(RelrepConfig.__init__).parameters)
        unknown = sorted(set(kwargs) - known)
        if unknown:
            warnings.warn(
                f"The {self.artifact_name}'s config has keys this relrep_hf does not know: "
                f"{unknown}. They are kept but not used; were they written by a newer "
                "relrep_hf (upgrade it), or misspelt (fix config.json)?",
                UserWarning,
                stacklevel=3,
            )
        self.format_version = FORMAT_VERSION
        self.anchor_set_id = anchor_set_id
        self.anchor_set_revision = anchor_set_revision
        self.anchor_set_fingerprint = anchor_set_fingerprint
        super().__init__(**kwargs)
