import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import torch

from relrep_hf import AnchorSet, ParamTrainer, ParamTrainingArguments, RelativeProjector, Statistics
from relrep_hf.anchors.param.trainer import STATE_NAME
from relrep_hf.functional.metrics import retrieval_metrics
from tests.fixtures import child_env
from tests.fixtures.distributed_param import main as distributed_main
from tests.fixtures.synthetic import affine_spaces, small_param_args

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spaces():
    return affine_spaces(("e0", "e1", "e2"), n=1000, d=8)


@pytest.mark.slow
def test_zero_shot_on_a_held_out_affine_space(tmp_path):
    """PARAM-WIP aligns a space it never saw; random-cosine does not (paper Fig. 2, E.3)."""
    spaces = affine_spaces(n=3000, d=16)
    train_rows, test_rows = slice(0, 2000), slice(2000, 3000)
    training = {name: spaces[name][train_rows] for name in ("e0", "e1", "e2")}
    args = small_param_args(
        tmp_path, num_anchors=64, support_size=1000, num_train_epochs=30, train_batch_size=512
    )
    trainer = ParamTrainer(args, training)
    anchor_set = trainer.train()
    support = trainer.support_indices
    random_set = AnchorSet.random(anchor_set.support, 64, seed=0)
    recall = {"param_wip": [], "random_cosine": []}
    held_out = spaces["e3"]
    for name in ("e0", "e1", "e2"):
        for key, anchors, similarity in (
            ("param_wip", anchor_set, "wip"),
            ("random_cosine", random_set, "cosine"),
        ):
            source, target = (
                RelativeProjector.from_anchor_set(
                    anchors,
                    space[train_rows][support],
                    Statistics.from_embeddings(space[train_rows]),
                    similarity=similarity,
                )
                for space in (spaces[name], held_out)
            )
            metrics = retrieval_metrics(
                source(spaces[name][test_rows]), target(held_out[test_rows])
            )
            recall[key].append(metrics["recall@1"])
    print("held-out R@1:", recall)
    assert min(recall["param_wip"]) >= 0.95
    assert max(recall["random_cosine"]) < 0.5


@pytest.mark.slow
def test_same_seed_same_anchor_set_and_it_is_saved(spaces, tmp_path):
    first = ParamTrainer(small_param_args(tmp_path / "a"), spaces).train()
    second = ParamTrainer(small_param_args(tmp_path / "b"), spaces).train()
    assert torch.equal(first.mixture, second.mixture)
    other = ParamTrainer(small_param_args(tmp_path / "c", seed=7), spaces).train()
    assert not torch.equal(first.mixture, other.mixture)
    loaded = AnchorSet.from_pretrained(tmp_path / "a")
    assert torch.equal(loaded.mixture, first.mixture)
    assert [e["name"] for e in loaded.encoders] == ["e0", "e1", "e2"]
    assert loaded.training["coverage_weight"] == 11.3 and loaded.training["seed"] == 42
    assert set(loaded.metrics["retrieval"]) == {
        f"{a}->{b}" for a in spaces for b in spaces if a != b
    }
    assert loaded.metrics["train"]["info_nce"] > 0


def test_training_lowers_the_loss_and_logs_every_term(spaces, tmp_path):
    trainer = ParamTrainer(small_param_args(tmp_path, num_train_epochs=6, logging_steps=4), spaces)
    trainer.train()
    history = trainer.log_history
    assert {"loss", "coverage", "orthogonality", "length", "info_nce", "epoch", "step"} <= set(
        history[0]
    )
    assert history[-1]["loss"] < history[0]["loss"]


def test_single_encoder_trains_without_info_nce(spaces, tmp_path):
    trainer = ParamTrainer(small_param_args(tmp_path), {"e0": spaces["e0"]})
    anchor_set = trainer.train()
    assert "info_nce" not in trainer.log_history[-1]
    assert "retrieval" not in anchor_set.metrics


def test_every_step_follows_autograd_of_the_direct_formulas(tmp_path):
    """Whitening rows once, the shared cross products and the hand-written backward passes
    change no loss: a whole epoch against the benchmark's direct, autograd-only version."""
    from tests.fixtures.param_reference import direct_epoch, random_spaces

    spaces = random_spaces(700, 24, 3)
    args = ParamTrainingArguments(
        str(tmp_path), num_anchors=12, support_size=150, num_train_epochs=1,
        train_batch_size=128, save_strategy="no", disable_tqdm=True, logging_steps=1,
    )  # fmt: skip
    trainer = ParamTrainer(args, spaces)
    trainer.train()
    _, direct = direct_epoch(spaces, trainer.args, trainer.support_indices)
    assert len(direct) == len(trainer.log_history) == 6
    for ours, theirs in zip(trainer.log_history, direct, strict=True):
        for key, value in theirs.items():
            assert abs(ours[key] - value) <= 1e-5 * max(1.0, abs(value)), (ours["step"], key)
    assert direct[-1]["loss"] < direct[0]["loss"]


def test_bf16_runs_the_support_products_in_bfloat16_close_to_float32(tmp_path):
    """bf16=True changes the anchors' GEMM only: the losses move, by a bfloat16 rounding."""
    from tests.fixtures.param_reference import random_spaces

    spaces = random_spaces(700, 24, 3)
    runs = {}
    for bf16 in (False, True):
        args = ParamTrainingArguments(
            str(tmp_path / str(bf16)), num_anchors=12, support_size=150, num_train_epochs=1,
            train_batch_size=128, save_strategy="no", disable_tqdm=True, logging_steps=1,
            bf16=bf16,
        )  # fmt: skip
        trainer = ParamTrainer(args, spaces)
        runs[bf16] = (trainer.train(), trainer.log_history)
    (exact, exact_log), (low, low_log) = runs[False], runs[True]
    deviations = [
        abs(a[key] - b[key]) / max(1.0, abs(a[key]))
        for a, b in zip(exact_log, low_log, strict=True)
        for key in ("loss", "coverage", "info_nce")
    ]
    assert 0 < max(deviations) < 1e-2
    assert low.training["bf16"] is True and exact.training["bf16"] is False
    assert low.mixture.dtype == torch.float32
    torch.testing.assert_close(low.mixture.sum(dim=1), torch.ones(12))


@pytest.mark.slow
def test_datasets_columns_give_the_same_anchor_set_as_tensors(spaces, tmp_path):
    dataset = datasets.Dataset.from_dict({name: space.tolist() for name, space in spaces.items()})
    dataset = dataset.add_column("text", [f"input {i}" for i in range(len(dataset))])
    from_tensors = ParamTrainer(
        small_param_args(tmp_path / "t", statistics_batch_size=97), spaces
    ).train()
    trainer = ParamTrainer(
        small_param_args(tmp_path / "d", statistics_batch_size=97), dataset, inputs=dataset["text"]
    )
    from_dataset = trainer.train()
    torch.testing.assert_close(from_dataset.mixture, from_tensors.mixture, rtol=1e-5, atol=1e-6)
    assert from_dataset.support[0] == dataset["text"][int(trainer.support_indices[0])]


@pytest.mark.slow
def test_resume_ends_where_an_uninterrupted_run_ends(spaces, tmp_path):
    uninterrupted = ParamTrainer(
        small_param_args(tmp_path / "full", num_train_epochs=4), spaces
    ).train()
    args = small_param_args(
        tmp_path / "resumed", num_train_epochs=4, save_strategy="epoch", save_total_limit=None
    )
    ParamTrainer(args, spaces).train()
    # beside the anchor set, never inside what is published; the final state included
    assert not list((tmp_path / "resumed").glob("*checkpoint*"))
    root = tmp_path / "resumed-checkpoints"
    assert args.checkpoint_dir == root
    checkpoints = sorted(p.name for p in root.glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-12", "checkpoint-16", "checkpoint-4", "checkpoint-8"]
    # throw away the later checkpoints: as if the process died after epoch 1
    for name in ("checkpoint-8", "checkpoint-12", "checkpoint-16"):
        for f in sorted((root / name).rglob("*"), reverse=True):
            f.unlink() if f.is_file() else f.rmdir()
        (root / name).rmdir()
    # a checkpoint written before a field existed (bf16) resumes: the field had its default
    state_file = root / "checkpoint-4" / STATE_NAME
    state = json.loads(state_file.read_text())
    del state["args"]["bf16"]
    state_file.write_text(json.dumps(state))
    trainer = ParamTrainer(args, spaces)
    resumed = trainer.train(resume_from_checkpoint=True)
    assert trainer.log_history[-1]["step"] == 16
    torch.testing.assert_close(resumed.mixture, uninterrupted.mixture, rtol=1e-5, atol=1e-7)


def test_resume_with_changed_arguments_is_an_error(spaces, tmp_path):
    ParamTrainer(
        small_param_args(tmp_path, num_train_epochs=1, save_strategy="steps", save_steps=2), spaces
    ).train()
    changed = small_param_args(
        tmp_path, num_train_epochs=1, save_strategy="steps", save_steps=2, learning_rate=0.1
    )
    with pytest.raises(ValueError, match=r"learning_rate: 0.03 -> 0.1.*original arguments"):
        ParamTrainer(changed, spaces).train(resume_from_checkpoint=True)
    with pytest.raises(ValueError, match="no complete checkpoint"):
        ParamTrainer(small_param_args(tmp_path / "empty"), spaces).train(
            resume_from_checkpoint=True
        )


def test_bad_inputs(spaces, tmp_path):
    with pytest.raises(ValueError, match="support set has 300 points, fewer than num_anchors=400"):
        ParamTrainer(small_param_args(tmp_path, num_anchors=400), spaces)
    with pytest.raises(ValueError, match="same N inputs.*'e0': 1000, 'e1': 999"):
        ParamTrainer(small_param_args(tmp_path), {"e0": spaces["e0"], "e1": spaces["e1"][:-1]})
    broken = spaces["e1"].clone()
    broken[640, 3] = float("nan")
    with pytest.raises(ValueError, match="Encoder 'e1', rows 0..999: .*NaN or Inf.*row 640"):
        ParamTrainer(small_param_args(tmp_path), {"e0": spaces["e0"], "e1": broken}).train()
    with pytest.raises(ValueError, match="Invalid optimizer 'sgd'"):
        small_param_args(tmp_path, optimizer="sgd")
    with pytest.raises(ValueError, match="support_size=2000 exceeds the 1000"):
        ParamTrainer(small_param_args(tmp_path, support_size=2000), spaces)
    with pytest.raises(ValueError, match="1000 embedding rows"):
        ParamTrainer(small_param_args(tmp_path), spaces, inputs=["a", "b"])


@pytest.mark.slow
def test_two_processes_learn_the_anchor_set_of_one(tmp_path):
    """A real 2-process CPU run: statistics reduced across ranks, batches sharded, InfoNCE
    over the gathered global batch, gradients averaged by DDP."""
    distributed_main(str(tmp_path / "one"))
    env = child_env()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(REPO / "tests" / "fixtures" / "distributed_param.py"),
            str(tmp_path / "two"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    one = AnchorSet.from_pretrained(tmp_path / "one")
    two = AnchorSet.from_pretrained(tmp_path / "two")
    assert two.training["num_processes"] == 2 and one.training["num_processes"] == 1
    torch.testing.assert_close(two.mixture, one.mixture, rtol=1e-4, atol=1e-6)


def test_numpy_arrays_train_the_anchor_set_of_tensors(spaces, tmp_path):
    from_tensors = ParamTrainer(small_param_args(tmp_path / "t"), spaces).train()
    arrays = {name: space.numpy() for name, space in spaces.items()}
    from_numpy = ParamTrainer(small_param_args(tmp_path / "n"), arrays).train()
    torch.testing.assert_close(from_numpy.mixture, from_tensors.mixture, rtol=0, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device)")
def test_embeddings_on_the_gpu_train_the_anchor_set_of_embeddings_on_the_cpu(spaces, tmp_path):
    from_cpu = ParamTrainer(small_param_args(tmp_path / "c"), spaces).train()
    on_gpu = {name: space.cuda() for name, space in spaces.items()}
    from_gpu = ParamTrainer(small_param_args(tmp_path / "g"), on_gpu).train()
    torch.testing.assert_close(from_gpu.mixture, from_cpu.mixture)


def test_the_final_state_is_checkpointed_with_any_strategy(spaces, tmp_path):
    """3 epochs of 4 steps, a checkpoint every 5 steps: 5, 10, and the final 12."""
    args = small_param_args(
        tmp_path / "out", save_strategy="steps", save_steps=5, save_total_limit=None
    )
    ParamTrainer(args, spaces).train()
    names = sorted(p.name for p in args.checkpoint_dir.glob("checkpoint-*"))
    assert names == ["checkpoint-10", "checkpoint-12", "checkpoint-5"]
    published = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert not [name for name in published if "checkpoint" in name], published


def test_an_anchor_set_trained_in_memory_is_the_one_saved_and_nothing_is_written(spaces, tmp_path):
    """``train(save=False)``, as the evaluation's fits run: the same anchor set, no folder."""
    ParamTrainer(small_param_args(tmp_path / "saved"), spaces).train()
    in_memory = ParamTrainer(small_param_args(tmp_path / "memory"), spaces).train(save=False)
    assert not (tmp_path / "memory").exists()
    saved = AnchorSet.from_pretrained(tmp_path / "saved")
    torch.testing.assert_close(in_memory.mixture, saved.mixture, rtol=0, atol=0)
    assert in_memory.metrics["retrieval"] == saved.metrics["retrieval"]
