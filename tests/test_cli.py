"""The relrep-hf pipeline end to end on a small slice of the embedded default."""

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoModel

from relrep_hf import AnchorSet, ParamTrainingArguments, RelativeProjector
from relrep_hf.cli import build_parser, main
from relrep_hf.commands.arguments import method_args
from relrep_hf.encoding.gguf_encoders import CONVERTED_FOLDER
from relrep_hf.pipeline import steps as pipeline
from relrep_hf.utils.defaults import SHRINKAGE_GRID

ENCODERS = ["minilm:mean:-1", "minilm:mean:3", "minilm:cls:-1"]


def printed_by(argv: list[str]) -> str:
    """What ``relrep-hf ARGV`` prints, after checking that it exits 0."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from relrep_hf.pipeline.steps import embed

    run_dir = tmp_path_factory.mktemp("run")
    # One forward pass for every spec of this module, the one onboarded later included: the
    # commands below find their embeddings in the run's cache.
    embed(run_dir, [*ENCODERS, "minilm:mean:5"], limit=500, test_size=150, show_progress=False)
    printed = printed_by(
        [
            "--quiet",
            "embed",
            str(run_dir),
            "--limit",
            "500",
            "--test-size",
            "150",
            *[arg for e in ENCODERS for arg in ("--encoder", e)],
        ]
    )
    assert printed == f"Embedded 500 rows with 3 encoders into {run_dir}\n"
    printed = printed_by(
        [
            "--quiet",
            "fit",
            str(run_dir),
            "--method",
            "param",
            "--num-anchors",
            "48",
            "--support-size",
            "200",
            "--num-train-epochs",
            "30",
            "--train-batch-size",
            "128",
        ]
    )
    assert printed == (
        f"Anchor set (48 anchors over 200 support inputs) and projectors written to {run_dir}\n"
    )
    return run_dir


@pytest.mark.slow
def test_embed_and_fit_write_the_run_folder(run_dir):
    run = json.loads((run_dir / "run.json").read_text())
    names = [e["name"] for e in run["encoders"]]
    assert names == ["minilm-mean-L-1", "minilm-mean-L3", "minilm-cls-L-1"]
    assert run["held_out"] == ["minilm-cls-L-1"]  # the last encoder, by default
    assert len(run["test_rows"]) == 150 and len(run["train_rows"]) == 350
    assert not set(run["test_rows"]) & set(run["train_rows"])
    assert set(run["support_rows"]) <= set(run["train_rows"])
    anchor_set = AnchorSet.from_pretrained(run_dir / "anchor_set")
    assert anchor_set.num_anchors == 48 and anchor_set.support_size == 200
    assert [e["name"] for e in anchor_set.encoders] == names[:2]  # never the held-out one
    assert all(isinstance(s, str) for s in anchor_set.support)
    for name in names:
        projector = AutoModel.from_pretrained(run_dir / "projectors" / name)
        assert isinstance(projector, RelativeProjector)
        assert projector.config.encoder_id == "sentence-transformers/all-MiniLM-L6-v2"
        assert projector.config.pooling in ("mean", "cls") and projector.config.num_anchors == 48


@pytest.mark.slow
def test_onboard_then_evaluate(run_dir, capsys):
    assert main(["--quiet", "onboard", str(run_dir), "--encoder", "minilm:mean:5"]) == 0
    assert capsys.readouterr().out == (
        "Onboarded minilm:mean:5: a projector of 48 features, no training.\n"
    )
    assert (run_dir / "projectors" / "minilm-mean-L5" / "model.safetensors").is_file()
    assert main(["--quiet", "evaluate", str(run_dir), "--head-epochs", "5"]) == 0
    printed = capsys.readouterr().out
    assert "PARAM-WIP R@1" in printed and "Random-Cos" in printed
    assert "Shared-Linear-WIP R@1" in printed  # the benchmark's winner, beside the paper's
    report = json.loads((run_dir / "report.json").read_text())
    names = [e["name"] for e in report["encoders"]]
    assert len(names) == 4 and report["held_out"] == ["minilm-cls-L-1", "minilm-mean-L5"]
    for method in ("PARAM-WIP", "Random-Cos"):
        pairs = report["retrieval"][method]
        assert len(pairs) == 12
        assert all(
            0.0 <= m[k] <= 1.0 for m in pairs.values() for k in ("recall@1", "recall@5", "mrr")
        )
    assert len(report["classification"]) == 16
    assert sum("Abs." in row for row in report["classification"]) == 4
    # layer 5 and layer 6 mean pooling are close spaces: the onboarded one retrieves well
    assert report["retrieval"]["PARAM-WIP"]["minilm-mean-L5->minilm-mean-L-1"]["recall@1"] > 0.5
    for image in ("stitching_heatmap.png", "relative_spaces.png"):
        assert (run_dir / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (run_dir / "heads" / "minilm-mean-L-1" / "model.safetensors").is_file()
    head_metrics = json.loads((run_dir / "heads" / "minilm-mean-L-1" / "metrics.json").read_text())
    expected = {
        row["encoder"]: row["PARAM-WIP"]
        for row in report["classification"]
        if row["classifier"] == "minilm-mean-L-1"
    }
    assert {k: v["weighted_f1"] for k, v in head_metrics["results"].items()} == expected
    card = (run_dir / "heads" / "minilm-mean-L-1" / "README.md").read_text()
    assert (
        "| `minilm-mean-L-1` | trained on |" in card and "| `minilm-mean-L5` | zero-shot |" in card
    )
    assert (
        AnchorSet.from_pretrained(run_dir / "anchor_set").metrics["zero_shot_retrieval"]
        == report["retrieval"]["PARAM-WIP"]
    )
    # the swappable head: one head on both training encoders, zero-shot on the held-out two
    swappable = {row["encoder"]: row for row in report["swappable_head"]}
    assert {n: row["setting"] for n, row in swappable.items()} == {
        "minilm-mean-L-1": "trained on", "minilm-mean-L3": "trained on",
        "minilm-cls-L-1": "zero-shot", "minilm-mean-L5": "zero-shot",
    }  # fmt: skip
    for row in swappable.values():
        assert row["of Abs."] == pytest.approx(row["weighted F1"] / row["Abs."])
    head = AutoModel.from_pretrained(run_dir / "heads" / "swappable")
    assert head.config.direction_selection["encoders"] == ["minilm-mean-L-1", "minilm-mean-L3"]
    assert head.config.num_directions in (16, 32, 48)  # the candidates below m = 48, and m
    card = (run_dir / "heads" / "swappable" / "README.md").read_text()
    assert (
        "| `minilm-mean-L3` | trained on |" in card and "| `minilm-mean-L5` | zero-shot |" in card
    )
    assert f"reads the first {head.config.num_directions} of the 48 relative features" in card
    assert "The swappable head" in (run_dir / "report.md").read_text()


def test_errors_are_one_line_unless_debug(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "relrep_hf.cli", "fit", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"relrep-hf fit: error: {tmp_path} is not a run folder (no run.json): run 'relrep-hf embed' first."
    ]
    with pytest.raises(ValueError, match="not a run folder"):
        main(["--debug", "fit", str(tmp_path)])
    assert main(["embed", str(tmp_path), "--encoder", "minilm:max"]) == 2


def test_a_folder_that_is_not_a_run_is_refused_before_the_heavy_imports(tmp_path):
    code = (
        "import sys; from relrep_hf.cli import main\n"
        "for command in ('fit', 'evaluate', 'onboard', 'fit-migration'):\n"
        "    extra = {'onboard': ['--encoder', 'minilm'], 'fit-migration': ['--source', 'a', '--target', 'b']}\n"
        "    assert main([command, sys.argv[1], *extra.get(command, [])]) == 2, command\n"
        "print(sorted(m for m in ('torch', 'datasets') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert result.stderr.count("is not a run folder (no run.json)") == 4


@pytest.mark.slow
def test_every_subcommand_has_complete_help(capsys):
    for command in ("embed", "fit", "onboard", "evaluate", "push", "demo"):
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--help"])
        assert exit_info.value.code == 0
        text = capsys.readouterr().out
        assert text.startswith(f"usage: relrep-hf {command}")
        assert ("--help" in text and "default" in text) or command in ("onboard", "push")
    # the installed console script is the same parser
    script = Path(sys.executable).with_name("relrep-hf")  # installed beside this interpreter
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and all(c in result.stdout for c in ("embed", "onboard", "demo"))


@pytest.mark.slow
def test_push_a_run_folder_to_the_hub(run_dir, tmp_path):
    """Step 5 of the README's CLI pipeline against the local Hub server: exit 0, one line per repo.

    The command runs in a process forked from this one, its progress bars on as in a fresh
    interpreter (the process is the Hub server's other side, not the point)."""
    from tests.fixtures.hub_encoders import fork_client
    from tests.fixtures.hub_server import LocalHub

    if not (run_dir / "report.json").is_file():  # evaluated heads are part of what is pushed
        assert main(["--quiet", "evaluate", str(run_dir), "--head-epochs", "2"]) == 0
    with LocalHub() as hub:
        argv = ["--quiet", "push", run_dir, "--repo-id", "tester/slm-anchors"]
        code = "import sys; from relrep_hf.cli import main; sys.exit(main(sys.argv[1:]))"
        client = fork_client(hub, code, *argv, home=tmp_path, progress_bars=True)
        returncode = client.wait(300)
        stdout, stderr = client.output()
        assert returncode == 0, stderr[-4000:]
        assert "%|" not in stderr  # --quiet: no progress bar, the Hub client's included
        lines = stdout.strip().splitlines()
        repos = {line.split(": ")[0] for line in lines}
        heads = {p.name for p in (run_dir / "heads").iterdir()}
        projectors = {p.name for p in (run_dir / "projectors").iterdir()}
        assert repos == {"tester/slm-anchors"} | {
            f"tester/slm-anchors-projector-{n}" for n in projectors
        } | {f"tester/slm-anchors-head-{n}" for n in heads}
        for line in lines:
            repo_id, sha = line.split(": ")
            assert hub.branch_head(repo_id) == sha


@pytest.mark.slow
def test_heads_carry_the_topic_names_and_the_swap_example_prints_one(run_dir):
    """The README's swap example on the run's artifacts prints a topic name, not LABEL_4."""
    from relrep_hf import RelativeWrapper
    from relrep_hf.encoding.corpora import sentence_labels

    if not (run_dir / "report.json").is_file():
        assert main(["--quiet", "evaluate", str(run_dir), "--head-epochs", "2"]) == 0
    topics = sentence_labels()
    head = AutoModel.from_pretrained(run_dir / "heads" / "minilm-mean-L-1")
    assert head.config.id2label == dict(enumerate(topics))
    assert head.config.label2id == {name: i for i, name in enumerate(topics)}
    from tests.fixtures.minilm import MODEL_PATH

    wrapper = RelativeWrapper.from_pretrained(MODEL_PATH, run_dir / "projectors" / "minilm-cls-L-1")
    classifier = wrapper.with_head(run_dir / "heads" / "minilm-mean-L-1")
    predicted = classifier.predict(["Return the base-2 logarithm of x.", "Open the file."])
    assert len(predicted) == 2 and set(predicted) <= set(topics)


@pytest.mark.slow
def test_help_and_version_import_no_pipeline_and_no_torch():
    """`relrep-hf --help` / `--version` answer without datasets, evaluate, matplotlib or the
    pipeline (their import took ~11 s); `import relrep_hf` still registers the Auto classes. A
    fact, not a timing: the parser is built, and every form answered, without torch. Every form in
    one fresh interpreter (a second one took 20 s at a load of 4): what any form imported is
    still in sys.modules after it, so each form's lines answer for it and every one before it."""
    code = (
        "import sys, json\n"
        "from relrep_hf.cli import main\n"
        "heavy = ('datasets', 'evaluate', 'matplotlib', 'relrep_hf.pipeline.steps', 'relrep_hf.anchors.param.trainer')\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "    print('torch' in sys.modules)\n"
        "    print(sorted(m for m in heavy if m in sys.modules))\n"
        "    print('---')\n"
        "from transformers import AutoConfig\n"
        "print(type(AutoConfig.for_model('relative_projector')).__name__)\n"
    )
    forms = [["--version"], ["--help"], ["fit", "--help"], ["demo", "--help"]]
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(forms)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    version, help_text, fit_help, demo_help, rest = result.stdout.split("---\n")
    assert version.startswith("relrep-hf 0.1.0")
    assert help_text.startswith("usage: relrep-hf")
    # after --version and --help: neither torch nor the pipeline; after the commands' help: no torch
    assert version.splitlines()[-2:] == help_text.splitlines()[-2:] == ["False", "[]"]
    assert [part.splitlines()[-2] for part in (fit_help, demo_help)] == ["False", "False"]
    assert rest.strip().splitlines() == ["RelativeProjectorConfig"]


def test_quiet_and_debug_go_before_or_after_the_command(tmp_path):
    parser = build_parser()
    for argv in (["--quiet", "evaluate", "run"], ["evaluate", "run", "--quiet"]):
        args = parser.parse_args(argv)
        assert args.quiet is True and args.debug is False
    assert parser.parse_args(["--debug", "fit", "run"]).debug is True
    assert parser.parse_args(["fit", "run", "--debug"]).debug is True
    with pytest.raises(ValueError, match="not a run folder"):
        main(["fit", str(tmp_path), "--debug"])


def test_demo_sizes_follow_the_limit_and_are_checked_before_embedding(tmp_path, capsys):
    from relrep_hf.pipeline.steps import FULL_DEMO, RunError, demo_sizes

    assert demo_sizes(4192) == FULL_DEMO
    quick = demo_sizes(4192, quick=True)
    assert quick == demo_sizes(4192, limit=1000)
    # 1000 / 4192 of the sizes that grow with the data; the epochs stay
    assert quick == {
        "rows": 1000,
        "test_size": 239,
        "support_size": 477,
        "num_anchors": 72,
        "num_train_epochs": 95,
        "head_epochs": 30,
    }
    assert demo_sizes(4192, limit=500, num_anchors=16)["num_anchors"] == 16  # given wins
    for limit in (100, 500, 2000):  # any limit gives sizes that fit together
        sizes = demo_sizes(4192, limit=limit)
        train = sizes["rows"] - sizes["test_size"]
        assert sizes["num_anchors"] <= sizes["support_size"] <= train
    with pytest.raises(RunError, match="--support-size 900 exceeds the 381 training rows"):
        demo_sizes(4192, limit=500, support_size=900)
    run_dir = tmp_path / "demo"
    argv = ["demo", str(run_dir), "--limit", "500", "--test-size", "600"]
    assert main(argv) == 2
    assert "--test-size 600 leaves 0 training rows out of 500" in capsys.readouterr().err
    assert not run_dir.exists()  # nothing was embedded


def test_every_training_argument_is_a_flag(capsys):
    """`fit` and `demo` take every `ParamTrainingArguments` field (shrinkage included) as a
    flag, with the dataclass's defaults; bad values are the dataclass's one-line errors."""
    from dataclasses import fields

    from relrep_hf.anchors.param.arguments import ParamTrainingArguments
    from relrep_hf.commands.arguments import training_args

    parser = build_parser()
    names = {f.name for f in fields(ParamTrainingArguments)} - {"output_dir", "disable_tqdm"}
    for command in ("fit", "demo"):  # disable_tqdm: --quiet (test_disable_tqdm_is_quiet)
        assert names <= set(vars(parser.parse_args([command, "run"])))
    assert training_args(parser.parse_args(["fit", "run"])) == ParamTrainingArguments("unused")
    flags = "--shrinkage 0.6 --eps 1e-6 --coverage-weight 2.5 --optimizer adam --bf16"
    args = parser.parse_args(
        ["fit", "run", *flags.split(), "--report_to", "tensorboard", "--quiet"]
    )
    training = training_args(args)
    assert (training.shrinkage, training.eps, training.coverage_weight) == (0.6, 1e-6, 2.5)
    assert training.optimizer == "adam" and training.bf16 is True
    assert training.report_to == ["tensorboard"] and training.disable_tqdm is True  # --quiet
    demo = parser.parse_args(["demo"])
    assert demo.num_anchors is None and demo.support_size is None  # scaled with the rows
    assert main(["fit", "run", "--shrinkage", "1.5"]) == 2
    assert "Need 0 <= shrinkage <= 1 and eps >= 0, got shrinkage=1.5" in capsys.readouterr().err


@pytest.mark.slow
def test_the_default_method_takes_every_training_row_as_support(run_dir, tmp_path):
    """The closed form as the benchmark's winner fits it: K = every training row, the shrinkage
    chosen from the training rows (recorded in the anchor set and every projector), and more
    anchors than the rows support capped with a warning, never refused."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    assert main(["--quiet", "fit", str(copy), "--num-anchors", "48", "--overwrite"]) == 0
    anchor_set = AnchorSet.from_pretrained(copy / "anchor_set")
    assert anchor_set.strategy == "shared_linear" and anchor_set.support_size == 350
    selection = anchor_set.training["shrinkage_selection"]
    assert selection["method"] == "cross-validation"
    assert anchor_set.shrinkage == selection["chosen"] in SHRINKAGE_GRID
    projector = RelativeProjector.from_pretrained(copy / "projectors" / "minilm-cls-L-1")
    assert projector.config.shrinkage == anchor_set.shrinkage
    # the main job's report: PARAM-WIP (trained as `fit --method param` would) and Random-Cos
    # beside the run's own anchor set
    param_args = ParamTrainingArguments("unused", num_anchors=48, support_size=200,
                                        num_train_epochs=3, disable_tqdm=True)  # fmt: skip
    folders = sorted(p.name for p in copy.rglob("*") if p.is_dir())
    report = pipeline.evaluate(copy, head_epochs=2, param_args=param_args)
    assert list(report["retrieval"]) == ["Random-Cos", "PARAM-WIP", "Shared-Linear-WIP"]
    new = sorted(p.name for p in copy.rglob("*") if p.is_dir())
    assert not [f for f in new if "checkpoint" in f and f not in folders]  # kept out of the run
    with pytest.warns(UserWarning, match=r"asked for 400 anchors .* capped at 349"):
        assert main(["--quiet", "fit", str(copy), "--num-anchors", "400", "--overwrite"]) == 0
    assert AnchorSet.from_pretrained(copy / "anchor_set").num_anchors == 349  # K - 1: centred rows


@pytest.mark.slow
def test_a_baseline_method_fits_a_run_and_its_report_names_it(run_dir, tmp_path):
    """Any registered method fits through `relrep-hf fit` (`relrep_hf.anchors`);
    the report labels the run's anchor set by the registry."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    flags = ["--method", "kmeans", "--num-anchors", "16", "--support-size", "100", "--overwrite"]
    assert main(["--quiet", "fit", str(copy), *flags]) == 0
    anchor_set = AnchorSet.from_pretrained(copy / "anchor_set")
    assert (anchor_set.strategy, anchor_set.mixing, anchor_set.num_anchors) == (
        "kmeans",
        "stochastic",
        16,
    )
    assert json.loads((copy / "run.json").read_text())["fit"]["method"] == "kmeans"
    report = pipeline.evaluate(copy, head_epochs=1)
    assert list(report["retrieval"]) == ["Random-Cos", "KMeans-WIP"]


@pytest.mark.slow
def test_the_main_job_stitches_two_architectures_and_caches_their_embeddings(
    tmp_path, monkeypatch, capsys
):
    """The default encoders: the bundled MiniLM (BERT) and the packaged SmolLM2 GGUF (Llama);
    the embeddings go to the user-level cache, so a second run embeds nothing."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    small = ["--quiet", "--limit", "120", "--test-size", "30", "--num-train-epochs", "2"]
    small += ["--head-epochs", "2"]
    assert main(["demo", str(tmp_path / "first"), *small]) == 0
    report = json.loads((tmp_path / "first" / "report.json").read_text())
    assert {e["architecture"] for e in report["encoders"]} == {"bert", "llama"}
    smollm2 = next(e for e in report["encoders"] if e["name"] == "smollm2-last-L-1")
    assert smollm2["encoder_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert smollm2["encoder_gguf_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "`smollm2-mean-L-1` (llama, HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF)" in (
        capsys.readouterr().out
    )
    cached = sorted((tmp_path / "cache" / "relrep_hf").iterdir())
    views = [path for path in cached if path.name.startswith("relrep-embeddings-")]
    assert len(views) == 4  # one folder per encoder view
    others = sorted(path.name for path in cached if path not in views)
    assert len(others) == 2 and others[1].startswith("relrep-gguf-views-")  # SmolLM2's index
    assert others[0] == CONVERTED_FOLDER  # SmolLM2 dequantized once, for the next load
    modified = [folder.stat().st_mtime_ns for folder in cached]
    assert main(["demo", str(tmp_path / "second"), *small]) == 0
    assert [folder.stat().st_mtime_ns for folder in cached] == modified  # read back, not embedded
    assert sorted((tmp_path / "cache" / "relrep_hf").iterdir()) == cached
    assert len(list((tmp_path / "second" / "embeddings").iterdir())) == 4  # copies in the run


def test_one_flag_style_old_spellings_hidden_but_accepted(capsys):
    """kebab-case in help; the snake_case spellings and old names still parse, out of help."""
    parser = build_parser()
    for command in ("fit", "demo"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert "--num-anchors" in text and "--mixture-temperature" in text
        assert not [flag for flag in text.split() if flag.startswith("--") and "_" in flag]
        assert "--disable-tqdm" not in text  # --quiet says it for every command
        assert (
            "anchor set fitting (every --method" in text
            and "PARAM training (--method param" in text
        )
        old = parser.parse_args([command, "r", "--num_anchors", "5", "--info_nce_weight", "0.5"])
        new = parser.parse_args([command, "r", "--num-anchors", "5", "--info-nce-weight", "0.5"])
        assert (
            (old.num_anchors, old.info_nce_weight)
            == (new.num_anchors, new.info_nce_weight)
            == (5, 0.5)
        )
    assert parser.parse_args(["fit", "r"]).num_anchors == 300  # the hidden alias sets no default
    bridge = ["bridge", "--map", "m", "--model", "x", "--out", "o"]
    assert parser.parse_args([*bridge, "--push-to-hub", "me/b"]).repo_id == "me/b"
    assert parser.parse_args([*bridge, "--repo-id", "me/b"]).repo_id == "me/b"
    with pytest.raises(SystemExit):
        main(["bridge", "--help"])
    assert "--repo-id" in capsys.readouterr().out


def test_disable_tqdm_is_quiet():
    """PARAM's old flag is --quiet under another name: every bar off, for the fit too."""
    parser = build_parser()
    for flag in ("--disable_tqdm", "--disable-tqdm"):
        args = parser.parse_args(["fit", "r", flag])
        assert args.quiet is True and method_args(args, "param").disable_tqdm is True
    args = parser.parse_args(["fit", "r"])
    assert args.quiet is False and method_args(args, "param").disable_tqdm is False
    assert parser.parse_args(["--quiet", "fit", "r"]).quiet is True


def test_every_positional_has_help(capsys):
    for command in (
        "embed",
        "fit",
        "onboard",
        "evaluate",
        "fit-migration",
        "migrate",
        "bridge",
        "push",
        "demo",
    ):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        positional = capsys.readouterr().out.split("positional arguments:\n")[1].split("\n\n")[0]
        for line in positional.splitlines():
            if line.startswith("  ") and not line.startswith("   "):
                assert len(line.split(None, 1)) == 2, f"{command}: {line.strip()} has no help"


def test_translate_is_fit_migration_under_its_old_name(tmp_path, capsys):
    argv = ["run", "--source", "a", "--target", "b"]
    old, new = (build_parser().parse_args([name, *argv]) for name in ("translate", "fit-migration"))
    assert old.func is new.func
    assert main(["translate", str(tmp_path), "--source", "a", "--target", "b"]) == 2  # not a run
    assert "relrep-hf translate is now relrep-hf fit-migration" in capsys.readouterr().err
