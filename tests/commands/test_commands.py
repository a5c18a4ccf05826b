"""A new anchor method is one registry entry: registered here (a toy: the first support rows,
one-hot), it fits a run through ``relrep-hf fit --method toy``, a new encoder is onboarded on
its anchor set, and the anchor set's card names it; the flags it ignores are refused by its
entry. The run is small and offline: precomputed embeddings of the bundled sentences."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch

from relrep_hf import (
    ANCHOR_METHODS,
    AnchorMethod,
    AnchorSet,
    FitArguments,
    FitData,
    register_anchor_method,
    unregister_anchor_method,
)
from relrep_hf.cli import build_parser, main
from relrep_hf.commands import COMMANDS
from relrep_hf.commands.arguments import step_keywords

ROWS = 120


def fit_toy(args: FitArguments, data: FitData) -> tuple[AnchorSet, torch.Tensor]:
    """The first ``support_size`` rows as support, the first ``num_anchors`` of them anchors."""
    rows = torch.arange(min(args.support_size or len(data.inputs), len(data.inputs)))
    mixture = torch.eye(len(rows))[: args.num_anchors]
    support = [data.inputs[i] for i in rows.tolist()]
    settings = {"shrinkage": args.shrinkage, "eps": args.eps}
    return AnchorSet(mixture, support, strategy="toy", mixing="one_hot", **settings), rows


@pytest.fixture
def toy_method():
    toy = AnchorMethod(
        "toy",
        "Toy-WIP",
        "toy anchors",
        "one of the first support inputs",
        FitArguments,
        fit_toy,
        "one_hot",
        compared_with="random",
        unused={"seed": "the toy draws nothing"},
    )
    yield register_anchor_method(toy)
    assert unregister_anchor_method("toy") is toy


def test_a_method_is_registered_once_and_gone_after_its_test(toy_method):
    with pytest.raises(ValueError, match="The anchor method 'toy' is registered already"):
        register_anchor_method(toy_method)
    unregister_anchor_method("toy")
    assert "toy" not in ANCHOR_METHODS
    with pytest.raises(ValueError, match=r"Unknown anchor method 'toy'\. Registered: 'param'"):
        unregister_anchor_method("toy")
    register_anchor_method(toy_method)  # for the fixture to take out


@pytest.fixture
def run_dir(tmp_path):
    """A run of three precomputed encoders (one latent, three linear views), and a fourth's file."""
    generator = np.random.default_rng(0)
    latent = generator.standard_normal((ROWS, 6))
    for name, dim in (("a", 8), ("b", 10), ("c", 7), ("new", 9)):
        view = latent @ generator.standard_normal((6, dim))
        np.save(tmp_path / f"{name}.npy", view + 0.01 * generator.standard_normal((ROWS, dim)))
    argv = ["--quiet", "embed", str(tmp_path / "run"), "--limit", str(ROWS), "--test-size", "30"]
    for name in ("a", "b", "c"):
        argv += ["--embeddings", f"{name}={tmp_path / f'{name}.npy'}"]
    assert main(argv) == 0
    return tmp_path / "run"


def printed_by(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def test_a_registered_method_fits_onboards_and_is_named_by_its_card(toy_method, run_dir):
    printed = printed_by(["--quiet", "fit", str(run_dir), "--method", "toy", "--num-anchors",
                          "8", "--support-size", "40"])  # fmt: skip
    assert printed.startswith("Anchor set (8 anchors over 40 support inputs)")
    anchor_set = AnchorSet.from_pretrained(run_dir / "anchor_set")
    assert (anchor_set.strategy, anchor_set.mixing) == ("toy", toy_method.mixing)
    assert json.loads((run_dir / "run.json").read_text())["fit"]["method"] == "toy"
    new = run_dir.parent / "new.npy"
    printed = printed_by(["--quiet", "onboard", str(run_dir), "--encoder", f"new={new}"])
    assert printed == f"Onboarded new={new}: a projector of 8 features, no training.\n"
    assert (run_dir / "projectors" / "new" / "model.safetensors").is_file()
    card = (run_dir / "anchor_set" / "README.md").read_text()
    assert "toy anchors" in card and "toy-anchors" in card


def test_the_entry_refuses_the_flags_its_method_ignores(toy_method, tmp_path, capsys):
    """Refused before the run folder is read (there is none here)."""
    assert main(["fit", str(tmp_path), "--method", "toy", "--seed", "3"]) == 2
    assert capsys.readouterr().err.strip() == (
        "relrep-hf fit: error: --seed does not apply to --method toy: the toy draws nothing. "
        "Drop --seed, or choose another --method."
    )
    with pytest.raises(ValueError, match="--num-anchors does not apply to --method full_support"):
        ANCHOR_METHODS["full_support"].arguments_from({}, given={"--num_anchors"})
    # a default is not a choice: the same flags unset are accepted
    unset = vars(build_parser().parse_args(["fit", "run"]))
    assert toy_method.arguments_from(unset) == FitArguments("unused")
    given = toy_method.arguments_from({"num_anchors": 7, "shrinkage": None})
    assert given == FitArguments("unused", num_anchors=7)  # the rest: the class's defaults


def test_every_command_is_a_module_that_registers_itself():
    argv = {
        "embed": ["run"],
        "fit": ["run"],
        "onboard": ["run", "--encoder", "minilm"],
        "evaluate": ["run"],
        "fit-migration": ["run", "--source", "a", "--target", "b"],
        "migrate": ["map", "--vectors", "v.npy", "--out", "o.npy"],
        "reembed": ["docs.parquet", "--encoder", "minilm"],
        "rollback": ["sqlite-vec:store.db#docs"],
        "cleanup": ["sqlite-vec:store.db#docs"],
        "bridge": ["run", "--source", "a", "--target", "b", "--model", "m", "--out", "o"],
        "push": ["run", "--repo-id", "user/anchors"],
        "demo": [],
    }
    modules = [name.replace("-", "_") for name in argv]
    assert [module.__name__.rsplit(".", 1)[1] for module in COMMANDS] == modules
    parser = build_parser()
    for name, module in zip(argv, modules, strict=True):
        args = parser.parse_args([name, *argv[name]])
        assert args.command == name and args.func.__module__ == f"relrep_hf.commands.{module}"


def test_a_step_takes_the_named_flags_as_given_and_its_progress_from_quiet():
    argv = ["migrate", "map", "--vectors", "v.npy", "--out", "o.npy", "--chunk-rows", "8"]
    quiet = build_parser().parse_args(["--quiet", *argv])
    expected = {"chunk_rows": 8, "dtype": None, "show_progress": False}
    assert step_keywords(quiet, "chunk_rows", "dtype") == expected
    assert step_keywords(build_parser().parse_args(argv)) == {"show_progress": None}


@pytest.mark.slow
def test_fit_again_refuses_without_overwrite_and_leaves_nothing_stale_with_it(run_dir, capsys):
    """A second fit would replace the anchor set under the heads and report built on the old
    one: refused (the old fit untouched); with --overwrite they are deleted with the old fit."""
    assert main(["--quiet", "fit", str(run_dir), "--num-anchors", "6"]) == 0
    assert main(["--quiet", "evaluate", str(run_dir), "--head-epochs", "1"]) == 0
    old = AnchorSet.from_pretrained(run_dir / "anchor_set").fingerprint
    assert (run_dir / "heads").is_dir() and (run_dir / "report.md").is_file()
    capsys.readouterr()
    assert main(["--quiet", "fit", str(run_dir), "--num-anchors", "5"]) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "already holds a fit (anchor_set, projectors, heads, report.json, report.md" in error
    assert "Pass --overwrite" in error
    assert AnchorSet.from_pretrained(run_dir / "anchor_set").fingerprint == old
    assert (run_dir / "heads").is_dir() and (run_dir / "report.md").is_file()
    assert main(["--quiet", "fit", str(run_dir), "--num-anchors", "5", "--overwrite"]) == 0
    new = AnchorSet.from_pretrained(run_dir / "anchor_set")
    assert new.num_anchors == 5 and new.fingerprint != old
    assert not [name for name in ("heads", "report.json", "report.md") if (run_dir / name).exists()]
    assert sorted(p.name for p in (run_dir / "projectors").iterdir()) == ["a", "b", "c"]


def test_long_commands_keep_the_garbage_collector_off_the_imported_objects():
    """The Trainer's gc.collect() per head walked ~420,000 imported objects each time (42 s of
    the profiled main job): the commands freeze what is alive after their imports."""
    import gc

    from relrep_hf.commands.arguments import settle_garbage_collector

    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's defaults
    alive = [object() for _ in range(10)] + [[] for _ in range(1000)]  # tracked, not frozen
    frozen = gc.get_freeze_count()
    try:
        settle_garbage_collector()
        assert gc.get_freeze_count() >= frozen + 1000
        assert gc.get_threshold() == (100_000, 50, 100)
    finally:
        gc.set_threshold(*thresholds)
    assert alive


def test_the_main_job_names_its_steps_unless_quiet(capsys):
    import argparse

    from relrep_hf.commands.demo import _banner

    _banner(argparse.Namespace(quiet=False), 2, "Fitting")
    _banner(argparse.Namespace(quiet=True), 3, "Evaluating")
    assert capsys.readouterr().out == "[2/3] Fitting ...\n"
