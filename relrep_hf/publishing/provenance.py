"""Portable provenance: configs name encoders and anchor sets by Hub id and commit, never a path.

At push time `portable_provenance` rewrites every recorded id: a Hub id gets the commit it
resolves to (``HfApi().model_info(id).sha``, skipped without failing when the Hub cannot be
reached); a Hub cache snapshot path becomes its repo id and commit; any other local path becomes
``"local:<folder name>"`` with an empty revision, with a `UserWarning` saying to push it to the
Hub. The ``local:`` prefix cannot occur in a Hub id, so readers can tell such a record from an
id (`is_local_record`). `make_portable` applies it to a saved artifact's files.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from huggingface_hub import HfApi, constants
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from relrep_hf.utils.hub_files import (
    LOCAL_PREFIX,
    TransportError,
    detect_artifact_kind,
    first_line,
    is_commit_hash,
    is_hub_id,
    read_config,
    snapshot_record,
)

__all__ = [
    "LOCAL_PREFIX",
    "PROVENANCE_FIELDS",
    "is_local_record",
    "make_portable",
    "portable_provenance",
    "record_anchor_set",
    "rewrite_config",
]

# (id field, revision field, what it names) recorded in each kind of config
PROVENANCE_FIELDS = {
    "projector": [
        ("encoder_id", "encoder_revision", "encoder"),
        ("anchor_set_id", "anchor_set_revision", "anchor set"),
    ],
    "head": [
        ("source_encoder_id", "source_encoder_revision", "source encoder"),
        ("anchor_set_id", "anchor_set_revision", "anchor set"),
    ],
    "classifier": [("encoder_id", "encoder_revision", "encoder")],  # the encoder it loads
}


def is_local_record(value: str) -> bool:
    """Whether a recorded id names a local folder (``"local:<name>"``) rather than a Hub repo."""
    return value.startswith(LOCAL_PREFIX)


def portable_provenance(
    id_or_path: str | os.PathLike,
    revision: str = "",
    *,
    what: str = "encoder",
    token: str | bool | None = None,
    resolve_revision: bool = True,
) -> tuple[str, str]:
    """The ``(id, revision)`` to record for an encoder or anchor set, never a local path.

    * ``""`` stays ``("", revision)`` (unknown).
    * A Hub cache snapshot path (``.../models--org--name/snapshots/<sha>``) gives
      ``("org/name", sha)``.
    * Another local path (an existing folder, or anything that is not a Hub id) gives
      ``("local:<folder name>", "")`` and a `UserWarning`; a ``local:`` record is kept, with the
      warning again.
    * A Hub id keeps its commit if ``revision`` is one; otherwise, with ``resolve_revision``,
      ``revision`` (a branch or tag, or ``""`` for the default branch) is resolved to its commit
      with ``HfApi().model_info``. If that fails (offline, not found), the revision is kept as
      given and a `UserWarning` says why.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     portable_provenance("/data/models/my-bert", "main")
        ('local:my-bert', '')
    """
    value = os.fspath(id_or_path).strip()
    revision = revision or ""
    if not value:
        return "", revision
    snapshot = None if is_local_record(value) else snapshot_record(value)
    if snapshot is not None:
        return snapshot
    if not is_hub_id(value):
        name = value[len(LOCAL_PREFIX) :] if is_local_record(value) else _folder_name(value)
        record = f"{LOCAL_PREFIX}{name}"
        warnings.warn(
            f"The {what} {value!r} is a local path; recorded as {record!r} — push the {what} to "
            f"the Hub and record its id.",
            UserWarning,
            stacklevel=2,
        )
        return record, ""
    if is_commit_hash(revision) or not resolve_revision:
        return value, revision
    try:
        if constants.HF_HUB_OFFLINE:
            raise OfflineModeIsEnabled("HF_HUB_OFFLINE is set")
        sha = HfApi(token=token).model_info(value, revision=revision or None).sha
    except (HfHubHTTPError, OfflineModeIsEnabled, TransportError, OSError) as error:
        warnings.warn(
            f"Could not resolve the commit of the {what} {value!r}"
            f"{f' at {revision!r}' if revision else ''} on the Hub ({type(error).__name__}: "
            f"{first_line(error)}); recorded revision {revision or '(none)'!r}. Check the id.",
            UserWarning,
            stacklevel=2,
        )
        return value, revision
    return value, sha or revision


def make_portable(folder: Path, *, token: str | bool | None = None) -> None:
    """Rewrite the provenance recorded in a saved artifact ``folder`` (a copy about to be
    pushed) with `portable_provenance`; a folder that holds no artifact is left as it is."""
    kind = detect_artifact_kind(folder)
    if kind == "anchor_set":
        path = folder / "anchor_set.json"
        description = json.loads(path.read_text(encoding="utf-8"))
        for encoder in description.get("encoders", []):
            if isinstance(encoder, dict) and encoder.get("id"):
                encoder["id"], encoder["revision"] = portable_provenance(
                    encoder["id"], encoder.get("revision") or "", what="encoder", token=token
                )
        path.write_text(json.dumps(description, indent=2, sort_keys=True) + "\n")
    elif kind in PROVENANCE_FIELDS:
        config = read_config(folder)
        records = {
            id_field: portable_provenance(
                config.get(id_field) or "", config.get(revision_field) or "", what=what, token=token
            )
            for id_field, revision_field, what in PROVENANCE_FIELDS[kind]
        }
        rewrite_config(folder, records, kind)


def record_anchor_set(folder: Path, kind: str, repo_id: str, sha: str) -> None:
    """Record a run's pushed anchor set in a projector or head config, unless it names a
    Hub anchor set already."""
    config = read_config(folder)
    recorded = config.get("anchor_set_id") or ""
    if recorded and not is_local_record(recorded) and not os.path.exists(recorded):
        if recorded != repo_id:
            warnings.warn(
                f"The {kind} in this run records anchor set {recorded!r}, not the run's "
                f"{repo_id!r}; its record is kept.",
                UserWarning,
                stacklevel=3,
            )
        return
    rewrite_config(folder, {"anchor_set_id": (repo_id, sha)}, kind)


def rewrite_config(folder: Path, records: dict[str, tuple[str, str]], kind: str) -> None:
    """Set ``id_field -> (id, revision)`` pairs in ``config.json`` (transformers' format)."""
    revision_fields = {id_field: rev for id_field, rev, _ in PROVENANCE_FIELDS[kind]}
    config = read_config(folder)
    for id_field, (value, revision) in records.items():
        config[id_field] = value
        config[revision_fields[id_field]] = revision
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _folder_name(path: str) -> str:
    name = Path(path.rstrip("/\\")).name or "folder"
    return name.replace("\\", "/").rsplit("/", 1)[-1]
