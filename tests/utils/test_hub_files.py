"""The download side of the Hub (`relrep_hf.utils.hub_files`): ids, commits, snapshots, folders."""

from __future__ import annotations

import re

import pytest

from relrep_hf.utils.hub_files import (
    ARTIFACT_FILES,
    LOCAL_PREFIX,
    artifact_kind,
    detect_artifact_kind,
    is_commit_hash,
    is_hub_id,
    loaded_provenance,
    resolve_folder,
    snapshot_record,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("gpt2", True),
        ("org/bert", True),
        ("sentence-transformers/all-MiniLM-L6-v2", True),
        ("", False),
        (f"{LOCAL_PREFIX}my-bert", False),  # a local record
        ("/data/models/my-bert", False),  # a path
        ("runs/2026/anchors", False),  # two slashes: a path
        ("org/bad--name", False),  # huggingface_hub's rules: no "--"
        (".hidden", False),
        ("org/name.git", False),
    ],
)
def test_is_hub_id_follows_huggingface_hub(value, expected):
    assert is_hub_id(value) is expected


def test_an_existing_folder_is_not_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "bert").mkdir(parents=True)
    assert not is_hub_id("org/bert")
    assert is_hub_id("org/other")


def test_commits_and_snapshots():
    assert is_commit_hash(COMMIT) and not is_commit_hash("main") and not is_commit_hash(None)
    assert not is_commit_hash(COMMIT.upper())
    snapshot = f"/cache/hub/models--org--my-model/snapshots/{COMMIT}"
    assert snapshot_record(snapshot) == ("org/my-model", COMMIT)
    assert snapshot_record(f"{snapshot}/model.gguf") == ("org/my-model", COMMIT)
    assert snapshot_record("/data/models/my-bert") is None


def test_loaded_provenance_reads_the_commit_transformers_recorded():
    assert loaded_provenance("org/bert", COMMIT) == ("org/bert", COMMIT)  # config._commit_hash
    assert loaded_provenance("org/bert", None) == ("org/bert", "")
    assert loaded_provenance("org/bert", "not-a-commit") == ("org/bert", "")
    assert loaded_provenance(f"/c/models--gpt2/snapshots/{COMMIT}/", None) == ("gpt2", COMMIT)
    assert loaded_provenance("/data/models/my-bert", COMMIT) == ("", "")  # never a local path
    assert loaded_provenance("", COMMIT) == ("", "")


def test_resolve_folder_says_a_missing_folder_does_not_exist(tmp_path):
    assert resolve_folder(tmp_path) == (tmp_path, None)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_folder(tmp_path / "runs" / "2026" / "anchors")


def test_artifact_kind(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        artifact_kind(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="holds no relrep_hf artifact"):
        artifact_kind(tmp_path)
    assert detect_artifact_kind(tmp_path) is None
    (tmp_path / "config.json").write_text('{"model_type": "relative_head"}')
    assert detect_artifact_kind(tmp_path) == "head"
    with pytest.raises(FileNotFoundError, match="looks like a head but lacks model.safetensors"):
        artifact_kind(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")  # not a config: no artifact
    assert detect_artifact_kind(tmp_path) is None
    (tmp_path / "config.json").unlink()
    (tmp_path / "projectors").mkdir()
    assert artifact_kind(tmp_path) == "run"
    assert set(ARTIFACT_FILES) == {"anchor_set", "projector", "head", "classifier", "migration_map"}


def test_a_new_artifact_type_is_one_registration(tmp_path):
    """An artifact declares its files and how a folder is told to hold it; the bottom layer
    reads the registry (issue #45), so a new kind edits nothing here."""
    from relrep_hf.utils.hub_files import (
        ArtifactType,
        describe_kind,
        register_artifact_type,
        unregister_artifact_type,
    )

    toy = ArtifactType("toy", "a toy", "Toy.from_pretrained", ("toy.bin",), markers=("toy.bin",))
    (tmp_path / "toy.bin").write_bytes(b"0")
    assert detect_artifact_kind(tmp_path) is None
    register_artifact_type(toy)
    try:
        assert detect_artifact_kind(tmp_path) == "toy"
        assert ARTIFACT_FILES["toy"] == (("toy.bin",), ())
        assert describe_kind("toy") == "a toy"
        # docs/bad_inputs.md, "Extension points and moved paths": each row's first sentence
        taken = "The artifact type 'toy' is registered already: unregister it first"
        with pytest.raises(ValueError, match=re.escape(taken)):
            register_artifact_type(toy)
        clash = ArtifactType("other", "an other", "O", ("config.json",), model_type="relative_head")
        with pytest.raises(ValueError, match=re.escape("\"other (model_type 'relative_head')\"")):
            register_artifact_type(clash)
    finally:
        assert unregister_artifact_type("toy") is toy
    assert detect_artifact_kind(tmp_path) is None and "toy" not in ARTIFACT_FILES
    with pytest.raises(KeyError, match=re.escape("Unknown artifact type 'toy'. Registered: 'anc")):
        ARTIFACT_FILES["toy"]
    with pytest.raises(ValueError, match=re.escape("Unknown artifact type 'toy'. Registered:")):
        unregister_artifact_type("toy")


def test_each_artifact_declares_the_type_of_its_kind():
    """The declared types are the ones the artifact classes save and load as."""
    from relrep_hf import (
        AnchorSet,
        MigrationMap,
        RelativeHeadForClassification,
        RelativeModelForSequenceClassification,
        RelativeProjector,
    )

    kinds = {
        AnchorSet.artifact_kind: AnchorSet.artifact_type,
        MigrationMap.artifact_kind: MigrationMap.artifact_type,
        **{
            model.artifact_kind: model.config_class.artifact_type
            for model in (
                RelativeProjector,
                RelativeHeadForClassification,
                RelativeModelForSequenceClassification,
            )
        },
    }
    assert {kind: t.name for kind, t in kinds.items()} == {kind: kind for kind in kinds}
    assert set(kinds) == set(ARTIFACT_FILES)
