"""Portable provenance: configs record encoders and anchor sets by Hub id and commit, never by
a local path (`relrep_hf.publishing.provenance`)."""

from __future__ import annotations

import warnings

import pytest
from huggingface_hub import constants

from relrep_hf.publishing.provenance import portable_provenance


def test_portable_provenance(tmp_path, monkeypatch):
    (tmp_path / "my-bert").mkdir()
    snapshot = tmp_path / "hub" / "models--org--bert" / "snapshots" / ("a" * 40)
    cases = [  # (id or path, revision, expected, warns)
        ("", "main", ("", "main"), False),
        ("org/bert", "b" * 40, ("org/bert", "b" * 40), False),  # a commit: no lookup
        (str(snapshot), "", ("org/bert", "a" * 40), False),
        (str(tmp_path / "my-bert"), "main", ("local:my-bert", ""), True),
        ("/no/such/folder/enc", "", ("local:enc", ""), True),
        ("local:enc", "", ("local:enc", ""), True),
    ]
    for value, revision, expected, warns in cases:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert portable_provenance(value, revision) == expected, value
        assert bool(caught) == warns, (value, [str(w.message) for w in caught])
        if warns:
            assert f"recorded as {expected[0]!r}" in str(caught[0].message)
    # a branch of a Hub id without a Hub: kept as given, with a warning, never an error
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.warns(UserWarning, match="Could not resolve the commit of the encoder 'org/bert'"):
        assert portable_provenance("org/bert", "main") == ("org/bert", "main")
