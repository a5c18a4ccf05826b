"""The one artifact base: a save never deletes what it did not write, for every artifact kind.

A folder that holds a user's files (a thesis, a csv) or another kind of artifact is refused
before anything is written; a folder that holds an artifact of the same kind is replaced, its
user's files beside it and a trainer's checkpoints kept.
"""

from __future__ import annotations

import pytest
import torch

from relrep_hf import AnchorSet, RelativeHeadForClassification, RelativeProjector, Statistics
from relrep_hf.migration.map import MigrationMap
from relrep_hf.utils.artifacts import NotAnArtifactFolderError, check_save_folder
from relrep_hf.utils.file_checks import ArtifactFileError
from relrep_hf.utils.manifest import MANIFEST_NAME

SUPPORT = [f"s{i}" for i in range(6)]


def artifacts() -> dict[str, object]:
    """One tiny artifact of each kind."""
    rows = torch.randn(30, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    anchor_set = AnchorSet.random(SUPPORT, 3, seed=0)
    projector = RelativeProjector.from_anchor_set(
        anchor_set, rows[:6], Statistics.from_embeddings(rows), pooling="mean"
    )
    return {
        "anchor_set": anchor_set,
        "projector": projector,
        "head": RelativeHeadForClassification.for_projector(projector, num_labels=2),
        "migration_map": MigrationMap(torch.ones(4, 3), torch.zeros(3)),
    }


ARTIFACTS = artifacts()


def user_folder(folder):
    folder.mkdir()
    (folder / "thesis.tex").write_text("my thesis")
    (folder / "results.csv").write_text("a,b\n1,2\n")
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("kind", list(ARTIFACTS))
def test_a_folder_of_the_users_files_is_refused_and_left_untouched(tmp_path, kind):
    before = user_folder(tmp_path / "mine")
    with pytest.raises(NotAnArtifactFolderError, match=r"holds results\.csv, thesis\.tex, not a"):
        ARTIFACTS[kind].save_pretrained(tmp_path / "mine")
    assert {p.name: p.read_bytes() for p in (tmp_path / "mine").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no staging folder left


@pytest.mark.parametrize("kind", list(ARTIFACTS))
def test_an_artifact_of_the_same_kind_is_replaced_and_the_users_files_beside_it_kept(
    tmp_path, kind
):
    artifact = ARTIFACTS[kind]
    artifact.save_pretrained(tmp_path / "a")
    (tmp_path / "a" / "notes.md").write_text("mine")
    (tmp_path / "a" / "checkpoint-10").mkdir()
    stale = tmp_path / "a" / MANIFEST_NAME
    stale.write_text("{}")  # the artifact's own file: replaced
    artifact.save_pretrained(tmp_path / "a")
    assert (tmp_path / "a" / "notes.md").read_text() == "mine"
    assert (tmp_path / "a" / "checkpoint-10").is_dir()
    assert stale.read_text() != "{}"
    (tmp_path / "a" / "notes.md").write_text("edited later")  # not the artifact's: not verified
    type(artifact).from_pretrained(tmp_path / "a")  # the manifest verifies


def test_another_kind_of_artifact_is_refused_by_name(tmp_path):
    ARTIFACTS["projector"].save_pretrained(tmp_path / "p")
    with pytest.raises(NotAnArtifactFolderError, match="it holds a projector, not a saved head"):
        ARTIFACTS["head"].save_pretrained(tmp_path / "p")
    with pytest.raises(ArtifactFileError, match="holds a projector, not a migration map"):
        MigrationMap.from_pretrained(tmp_path / "p")


def test_empty_missing_and_checkpoint_only_folders_may_be_written(tmp_path):
    assert check_save_folder(tmp_path / "new", "projector", what="projector") == []
    (tmp_path / "empty").mkdir()
    assert check_save_folder(tmp_path / "empty", "projector", what="projector") == []
    (tmp_path / "trained" / "checkpoint-5").mkdir(parents=True)
    ARTIFACTS["anchor_set"].save_pretrained(tmp_path / "trained")
    assert (tmp_path / "trained" / "checkpoint-5").is_dir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotAnArtifactFolderError, match="it is a file, not a folder"):
        ARTIFACTS["projector"].save_pretrained(tmp_path / "file")


def test_a_damaged_save_may_be_saved_again(tmp_path):
    projector = ARTIFACTS["projector"]
    projector.save_pretrained(tmp_path / "p")
    (tmp_path / "p" / "config.json").write_text("{not json")  # "save it again", errors say
    projector.save_pretrained(tmp_path / "p")
    RelativeProjector.from_pretrained(tmp_path / "p")
