"""``relrep-hf bridge`` end to end on a small run folder: the new encoder is a tiny BERT
sentence-transformers model (16-d); the old one, whose vectors are the index, is that model
followed by a fixed affine ``Dense`` (24-d), so a good bridge gives the old vectors back. The run
embeds the bundled sentences with both (precomputed files), is fitted, and the command appends
the map it fits (new -> old) to the new model's folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Dense, Normalize

from relrep_hf.cli import main
from relrep_hf.encoding.corpora import load_sentences
from relrep_hf.migration.bridge import Bridge
from relrep_hf.migration.map import MigrationMap
from tests.migration.test_bridge import NEW_DIM, OLD_DIM, tiny_sentence_transformer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REPO = Path(__file__).resolve().parents[2]
ROWS, TEST = 160, 30


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The run folder (fitted), the new model's folder and both models."""
    root = tmp_path_factory.mktemp("bridge-run")
    new = tiny_sentence_transformer(root / "bert", NEW_DIM, seed=1)
    new.save(str(root / "new-model"))
    # the same encoder with a Normalize more: not the space of the run's rows
    SentenceTransformer(modules=[*new, Normalize()], device="cpu").save(str(root / "normalized"))
    torch.manual_seed(2)
    dense = Dense(NEW_DIM, OLD_DIM, activation_function=None)
    old = SentenceTransformer(modules=[*new, dense], device="cpu")
    other = tiny_sentence_transformer(root / "other", 12, seed=3)  # the run holds one out
    texts = list(load_sentences(ROWS)["text"])
    argv = ["--quiet", "embed", str(root / "run"), "--limit", str(ROWS), "--test-size", str(TEST)]
    for name, model in (("old", old), ("new", new), ("other", other)):
        np.save(root / f"{name}.npy", model.encode(texts))
        argv += ["--embeddings", f"{name}={root / f'{name}.npy'}"]
    assert main(argv) == 0
    assert main(["--quiet", "fit", str(root / "run"), "--num-anchors", "8"]) == 0
    return {"root": root, "run": root / "run", "new": new, "old": old, "texts": texts}


def bridged_map(folder) -> MigrationMap:
    modules = json.loads((folder / "modules.json").read_text())
    assert modules[-1]["type"] == "relrep_hf.migration.bridge.Bridge"
    return MigrationMap.from_pretrained(folder / modules[-1]["path"])


@pytest.mark.slow
def test_bridge_from_a_run_gives_the_old_vectors_back(setup, capsys):
    out = setup["root"] / "bridged"
    argv = ["--quiet", "bridge", str(setup["run"]), "--source", "old", "--target", "new"]
    assert main([*argv, "--model", str(setup["root"] / "new-model"), "--out", str(out)]) == 0
    assert "trust_remote_code=True" in capsys.readouterr().out
    bridge_map = bridged_map(out)
    assert (bridge_map.info["source"], bridge_map.info["target"]) == ("new", "old")
    assert bridge_map.info["direction"] == "queries"

    model = SentenceTransformer(str(out), trust_remote_code=True, device="cpu")
    assert isinstance(model[-1], Bridge) and model.get_embedding_dimension() == OLD_DIM
    queries = setup["texts"][-TEST:]  # the run's test rows: not among the fitted rows
    bridged = model.encode(queries, convert_to_tensor=True)
    new = setup["new"].encode(queries, convert_to_tensor=True)
    torch.testing.assert_close(bridged, bridge_map(new), atol=1e-5, rtol=0)
    # the old encoder is an affine function of the new one: the bridge recovers its vectors
    old = setup["old"].encode(queries, convert_to_tensor=True)
    assert torch.nn.functional.cosine_similarity(bridged, old).min() > 0.99


def test_a_model_that_does_not_give_the_run_rows_is_refused(setup, tmp_path, capsys):
    argv = ["bridge", str(setup["run"]), "--source", "old", "--target", "new"]
    argv += ["--model", str(setup["root"] / "normalized"), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "normalized does not give the run's 'new' rows (relative difference" in error
    assert not (tmp_path / "out").exists()


def test_bridge_from_a_saved_map(setup, tmp_path):
    bridge_map = MigrationMap(torch.randn(NEW_DIM, OLD_DIM), torch.zeros(OLD_DIM))
    bridge_map.save_pretrained(tmp_path / "map")
    argv = ["--quiet", "bridge", "--map", str(tmp_path / "map")]
    argv += ["--model", str(setup["root"] / "new-model"), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    torch.testing.assert_close(bridged_map(tmp_path / "out").weight, bridge_map.weight)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--map", "MAP", "--source", "old"], "not both"),
        ([], "or --map MAP"),
        (["--map", "MAP", "--out-is-model"], "is the --model folder itself"),
        (["--map", "MAP", "--out-has-files"], "no sentence-transformers model"),
        (["RUN", "--source", "old", "--target", "nope"], "Unknown encoder 'nope'"),
        (["RUN", "--source", "old"], "needs the run folder, --source"),
    ],
)
def test_bad_invocations_are_refused(setup, tmp_path, capsys, extra, message):
    model = setup["root"] / "new-model"
    out = tmp_path / "out"
    if "--out-is-model" in extra:
        out = model
    if "--out-has-files" in extra:
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
    MigrationMap(torch.ones(NEW_DIM, OLD_DIM), torch.zeros(OLD_DIM)).save_pretrained(
        tmp_path / "map"
    )
    paths = {"MAP": str(tmp_path / "map"), "RUN": str(setup["run"])}
    flags = [paths.get(f, f) for f in extra if not f.startswith("--out-")]
    assert main(["bridge", *flags, "--model", str(model), "--out", str(out)]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    if "--out-has-files" in extra:
        assert [p.name for p in out.iterdir()] == ["notes.txt"]


PUSH_AND_PULL = r"""
import sys
from pathlib import Path
import numpy as np
from sentence_transformers import SentenceTransformer
from relrep_hf.cli import main

map_folder, model, out, texts_file = sys.argv[1:5]
argv = ["--quiet", "bridge", "--map", map_folder, "--model", model, "--out", out]
assert main([*argv, "--repo-id", "tester/new-bridged"]) == 0
pulled = SentenceTransformer("tester/new-bridged", trust_remote_code=True, device="cpu")
np.save(Path(out).parent / "pulled.npy", pulled.encode(Path(texts_file).read_text().splitlines()))
print("pulled ok")
"""


@pytest.mark.slow
def test_push_to_hub_and_pull(setup, tmp_path):
    """The bridged model pushed by the command and loaded back from the Hub (the local server,
    from a process forked from this one and pointed at it: the process is not the point)."""
    from tests.fixtures.hub_encoders import run_forked_client
    from tests.fixtures.hub_server import LocalHub

    bridge_map = MigrationMap(torch.randn(NEW_DIM, OLD_DIM), torch.randn(OLD_DIM))
    bridge_map.save_pretrained(tmp_path / "map")
    queries = setup["texts"][:8]
    (tmp_path / "texts.txt").write_text("\n".join(queries))
    with LocalHub() as hub:
        args = [
            tmp_path / "map",
            setup["root"] / "new-model",
            tmp_path / "out",
            tmp_path / "texts.txt",
        ]
        home = tmp_path / "client"
        assert "pulled ok" in run_forked_client(hub, PUSH_AND_PULL, *args, home=home, timeout=600)
        files = set(hub.server.repo("tester/new-bridged").resolve("main").files)
    assert {"modules.json", "2_Bridge/bridge.json", "2_Bridge/manifest.json"} <= files
    expected = bridge_map(setup["new"].encode(queries, convert_to_tensor=True))
    pulled = torch.from_numpy(np.load(tmp_path / "pulled.npy"))
    torch.testing.assert_close(pulled, expected, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def same_width(tmp_path_factory):
    """Three 16-d models (issue #46): ``new`` (saved to a folder named ``new``), ``old`` (the
    new model followed by a fixed affine ``Dense`` 16 -> 16: the index's encoder) and ``other``
    (another tiny BERT); real maps fitted on their encode output of the bundled sentences: the
    bridge new -> old, the migration old -> new (the wrong direction, same width) and the
    bridge of ``other`` (another model of the right width)."""
    from relrep_hf import fit_migration
    from relrep_hf.migration.bridge import fit_bridge

    root = tmp_path_factory.mktemp("same-width")
    new = tiny_sentence_transformer(root / "bert", NEW_DIM, seed=1)
    new.save(str(root / "new"))
    torch.manual_seed(2)
    old = SentenceTransformer(modules=[*new, Dense(NEW_DIM, NEW_DIM, activation_function=None)])
    other = tiny_sentence_transformer(root / "other-bert", NEW_DIM, seed=3)
    texts = list(load_sentences(ROWS)["text"])
    rows = {name: m.encode(texts, convert_to_tensor=True) for name, m in
            (("new", new), ("old", old), ("other", other))}  # fmt: skip
    maps = {
        "bridge": fit_bridge(rows["new"], rows["old"], source_name="new", target_name="old"),
        "migration": fit_migration(rows["old"], rows["new"], source_name="old", target_name="new"),
        "other": fit_bridge(rows["other"], rows["old"], source_name="other", target_name="old"),
    }
    for name, migration_map in maps.items():
        migration_map.save_pretrained(root / f"{name}-map")
    return {"root": root, "old": old, "new": new, "texts": texts}


def bridge_with(setup, tmp_path, map_name: str, *extra: str) -> int:
    root = setup["root"]
    argv = ["--quiet", "bridge", "--map", str(root / f"{map_name}-map"), "--model"]
    return main([*argv, *extra, "--out", str(tmp_path / "out")])


@pytest.mark.slow  # three tiny models encode 160 sentences and three maps are fitted
def test_a_map_of_the_wrong_direction_or_another_model_is_refused(same_width, tmp_path, capsys):
    new = str(same_width["root"] / "new")
    assert bridge_with(same_width, tmp_path, "migration", new) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert (
        "The map records source 'old' and target 'new' (direction 'corpus', 16-d -> 16-d)" in error
    )
    assert f"into the space of --model {new} ('new'), the opposite of a bridge" in error
    assert "relrep-hf bridge RUN --source old --target new" in error
    assert not (tmp_path / "out").exists()

    assert bridge_with(same_width, tmp_path, "other", new) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "The map records source 'other' and target 'old' (direction 'queries'" in error
    assert f"but --model {new} is not 'other'" in error and "--model-name other" in error
    assert not (tmp_path / "out").exists()
    # --model-name says what --model is: the wrong direction is still refused
    renamed = str(same_width["root"] / "bert")  # the same encoder, without its folder name
    assert bridge_with(same_width, tmp_path, "migration", renamed, "--model-name", "new") == 2
    assert "the opposite of a bridge" in capsys.readouterr().err
    assert bridge_with(same_width, tmp_path, "bridge", renamed) == 2
    assert "is not 'new'" in " ".join(capsys.readouterr().err.split())


@pytest.mark.slow  # as above
def test_the_right_map_is_accepted_by_folder_name_or_model_name(same_width, tmp_path):
    queries = same_width["texts"][:20]
    old = same_width["old"].encode(queries, convert_to_tensor=True)
    for model, extra in (("new", []), ("bert", ["--model-name", "new"])):
        out = tmp_path / model
        argv = [str(same_width["root"] / model), *extra]
        assert bridge_with(same_width, out, "bridge", *argv) == 0
        bridged = SentenceTransformer(str(out / "out"), trust_remote_code=True, device="cpu")
        encoded = bridged.encode(queries, convert_to_tensor=True)
        assert torch.nn.functional.cosine_similarity(encoded, old).min() > 0.99
