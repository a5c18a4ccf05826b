"""`HeadTrainer`: heads trained on relative features with `transformers.Trainer`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers import TrainerCallback

from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.training.head_trainer import HeadTrainer, HeadTrainingArguments, train_in_memory
from tests.models.test_modeling_relative_head import toy_problem

transformers.logging.set_verbosity_error()


def train_head(
    tmp_path, seed: int = 0, trainer_keywords=None, **overrides
) -> tuple[RelativeHeadForClassification, HeadTrainer]:
    torch.manual_seed(123)  # the same initial weights for every run
    head = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=12, num_labels=3, hidden_sizes=[8])
    )
    x, y = toy_problem(390)
    x, y, x_eval, y_eval = x[:300], y[:300], x[300:], y[300:]
    args = HeadTrainingArguments(
        output_dir=str(tmp_path), num_train_epochs=4, learning_rate=1e-2, per_device_train_batch_size=32,
        seed=seed, logging_steps=5, disable_tqdm=True, **overrides,
    )  # fmt: skip
    trainer = HeadTrainer(head, args, x, y, x_eval, y_eval, **(trainer_keywords or {}))
    return head, trainer


@pytest.mark.slow
def test_trainer_learns_logs_saves_and_is_deterministic(tmp_path):
    head, trainer = train_head(tmp_path / "a")
    result = trainer.train()
    assert result.global_step == 4 * 10  # ceil(300 / 32) = 10 steps per epoch
    assert result.metrics["eval_accuracy"] > 0.9 and result.metrics["eval_weighted_f1"] > 0.9
    losses = [entry["loss"] for entry in trainer.log_history if "loss" in entry]
    assert len(losses) == 8 and losses[-1] < losses[0]
    assert [entry["epoch"] for entry in trainer.log_history if "eval_loss" in entry] == [1, 2, 3, 4]
    saved = RelativeHeadForClassification.from_pretrained(tmp_path / "a")
    assert all(torch.equal(saved.state_dict()[k], v) for k, v in head.state_dict().items())
    assert not head.training
    # the last evaluation is recorded beside the head and shown on its card
    recorded = json.loads((tmp_path / "a" / "metrics.json").read_text())
    scores = {
        "accuracy": result.metrics["eval_accuracy"],
        "weighted_f1": result.metrics["eval_weighted_f1"],
    }
    assert recorded == {
        "results": {"training encoder": scores},
        "source_encoder": "training encoder",
    }
    assert (
        f"| `training encoder` | trained on | {scores['accuracy']:.4f} |"
        in (tmp_path / "a" / "README.md").read_text()
    )

    same, again = train_head(tmp_path / "b")
    again.train()
    assert all(torch.equal(same.state_dict()[k], v) for k, v in head.state_dict().items())
    other, third = train_head(tmp_path / "c", seed=1, save_final_model=False)
    third.train()
    assert not torch.equal(other.classifier.weight, head.classifier.weight)  # the seed matters
    assert not (tmp_path / "c").exists()


def test_trainer_bad_arguments(tmp_path):
    head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=12, num_labels=3))
    args = HeadTrainingArguments(output_dir=str(tmp_path), disable_tqdm=True)
    x, y = toy_problem(30)
    with pytest.raises(ValueError, match=r"train_labels must lie in \[0, 3\)"):
        HeadTrainer(head, args, x, y + 1)
    with pytest.raises(ValueError, match="train_labels has 29 rows but train_relative has 30"):
        HeadTrainer(head, args, x, y[:29])
    with pytest.raises(
        ValueError, match=r"last dimension is 5, expected 12 \(the head's num_anchors\)"
    ):
        HeadTrainer(head, args, x[:, :5], y)
    with pytest.raises(ValueError, match="Pass both eval_relative and eval_labels"):
        HeadTrainer(head, args, x, y, eval_relative=x)
    with pytest.raises(ValueError, match="learning_rate must be > 0"):
        HeadTrainingArguments(output_dir=str(tmp_path), learning_rate=0)
    with pytest.raises(ValueError, match="Invalid lr_scheduler_type 'step'"):
        HeadTrainingArguments(output_dir=str(tmp_path), lr_scheduler_type="step")


def test_evaluate_predict_and_nothing_printed(tmp_path, capsys):
    """`evaluate` on given features gives loss, accuracy and weighted F1 (no timings);
    `predict_logits` the logits in eval mode; Trainer prints nothing to stdout."""
    head, trainer = train_head(tmp_path, save_final_model=False)
    trainer.train()
    x, y = toy_problem(60, seed=5)
    metrics = trainer.evaluate(x.numpy(), y.tolist(), prefix="test")
    assert set(metrics) == {"test_loss", "test_accuracy", "test_weighted_f1"}
    logits = trainer.predict_logits(x)
    assert logits.shape == (60, 3) and logits.dtype == torch.float32
    with torch.no_grad():
        torch.testing.assert_close(logits, head(x).logits)
    predicted_accuracy = float((logits.argmax(-1) == y).float().mean())
    assert metrics["test_accuracy"] == pytest.approx(predicted_accuracy)
    assert capsys.readouterr().out == ""


def test_multi_label_heads_train_without_accuracy(tmp_path):
    """Float multi-hot labels: the BCE loss falls; compute_metrics reports no accuracy."""
    torch.manual_seed(0)
    x, y = toy_problem(300)
    multi_hot = torch.nn.functional.one_hot(y, 3).float()
    head = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=12, num_labels=3, problem_type="multi_label_classification")
    )
    args = HeadTrainingArguments(
        str(tmp_path), num_train_epochs=3, learning_rate=1e-2, disable_tqdm=True,
        save_final_model=False, logging_steps=2,
    )  # fmt: skip
    trainer = HeadTrainer(head, args, x, multi_hot, x, multi_hot)
    result = trainer.train()
    assert set(result.metrics) == {"eval_loss"}
    losses = [entry["loss"] for entry in trainer.log_history if "loss" in entry]
    assert losses[-1] < losses[0]
    assert np.isfinite(result.training_loss)


def test_train_in_memory_is_the_trainer_with_nothing_written(tmp_path, monkeypatch):
    """The pipeline's, Algorithm 1's and the benchmarks' one way to train a head quietly: the
    same weights as `HeadTrainer` with the same arguments, nothing written where it runs, in
    eval mode, the caller's arguments over the defaults."""
    head, trainer = train_head(tmp_path / "trainer", eval_strategy="no", save_final_model=False)
    trainer.train()
    torch.manual_seed(123)
    quiet = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=12, num_labels=3, hidden_sizes=[8])
    )
    x, y = toy_problem(390)
    monkeypatch.chdir(tmp_path)
    returned = train_in_memory(
        quiet, x[:300], y[:300], num_train_epochs=4, learning_rate=1e-2,
        per_device_train_batch_size=32, logging_steps=5, seed=0,
    )  # fmt: skip
    assert returned is quiet and not quiet.training
    assert all(torch.equal(quiet.state_dict()[k], v) for k, v in head.state_dict().items())
    assert not any(tmp_path.iterdir())  # neither run wrote a file


def test_a_column_of_class_indices_trains_as_its_flat_labels():
    """Labels ``[N, 1]`` (a column, as a DataFrame or a reshape gives them) are the labels
    ``[N]``: the same head, with the directions chosen across two encoders (issue #37: this
    failed inside the choice with torch's "repeat dims" error)."""
    x, y = toy_problem(120)
    features = {"a": x, "b": x + 0.01}
    heads = []
    for labels in (y, y[:, None]):
        torch.manual_seed(123)
        head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=12, num_labels=3))
        heads.append(train_in_memory(head, features, labels, num_train_epochs=1, seed=0))
    flat, column = (h.state_dict() for h in heads)
    assert heads[1].config.num_directions is not None
    assert all(torch.equal(column[k], v) for k, v in flat.items())


@pytest.mark.parametrize("labels", [torch.tensor([0, 2, 1, 1, 0]), torch.rand(5, 3), None])
def test_a_batch_fetched_at_once_is_the_rows_stacked(labels):
    """The DataLoader's batched fetch (`__getitems__`) gives the tensors the per-row fetch and
    transformers' default collator give, so training sees the same batches, only sooner."""
    from transformers import default_data_collator

    from relrep_hf.training.head_trainer import _collate, _Features

    features = _Features(torch.randn(5, 4), labels)
    batched = _collate(features.__getitems__([3, 0, 3]))
    rows = default_data_collator([features[i] for i in (3, 0, 3)])
    assert batched.keys() == rows.keys()
    for key in rows:
        assert batched[key].dtype == rows[key].dtype and torch.equal(batched[key], rows[key])
    assert _collate([features[1]]).keys() == rows.keys()  # rows fetched one by one still stack


class Recorder(TrainerCallback):
    """Records the events the Trainer sends it."""

    def __init__(self):
        self.events: list[tuple[str, int]] = []

    def on_epoch_end(self, args, state, control, **kwargs):
        self.events.append(("epoch_end", state.global_step))

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.events.append(("evaluate", state.global_step))
        self.metrics = metrics


@pytest.mark.slow
def test_compute_metrics_callbacks_and_an_evaluator_pick_the_best_head(tmp_path):
    """compute_metrics' metrics join accuracy and weighted F1; the callbacks hear each epoch and
    evaluation; an evaluator's metrics are logged in every evaluation, and with
    load_best_model_at_end the head kept is the best checkpoint by the evaluator's metric."""
    from relrep_hf.evaluation.evaluators import RelativeClassificationEvaluator

    x, y = toy_problem(390)
    other = x + 0.3 * torch.randn(x.shape, generator=torch.Generator().manual_seed(4))
    evaluator = RelativeClassificationEvaluator({"b": other[300:]}, y[300:], name="zero_shot")
    calls = []

    def compute_metrics(prediction: transformers.EvalPrediction) -> dict[str, float]:
        calls.append(prediction.predictions.shape)
        return {"mean_logit": float(prediction.predictions.mean())}

    recorder = Recorder()
    head, trainer = train_head(
        tmp_path, load_best_model_at_end=True, metric_for_best_model=evaluator.primary_metric,
        greater_is_better=evaluator.greater_is_better,
        trainer_keywords={"compute_metrics": compute_metrics, "callbacks": [recorder],
                          "evaluator": evaluator},
    )  # fmt: skip
    result = trainer.train()
    assert calls == [(90, 3)] * 4  # each epoch's evaluation of the 90 eval rows
    assert [event for event, _ in recorder.events] == ["epoch_end", "evaluate"] * 4
    evaluations = [e for e in trainer.log_history if "eval_loss" in e]
    for entry in evaluations:
        assert {"eval_accuracy", "eval_weighted_f1", "eval_mean_logit"} <= set(entry)
        assert {"eval_zero_shot_weighted_f1", "eval_zero_shot_b_accuracy"} <= set(entry)
    scores = [e["eval_zero_shot_weighted_f1"] for e in evaluations]
    best = evaluations[scores.index(max(scores))]  # the first of equal bests
    assert trainer.trainer.state.best_global_step == best["step"]
    assert result.metrics == {k: v for k, v in best.items() if k.startswith("eval_")
                              and not k.endswith(("_runtime", "_per_second"))}  # fmt: skip
    # the head kept is the best checkpoint's, saved beside the checkpoints in output_dir
    checkpoint = load_file(tmp_path / f"checkpoint-{best['step']}" / "model.safetensors")
    assert all(torch.equal(head.state_dict()[k], v) for k, v in checkpoint.items())
    saved = RelativeHeadForClassification.from_pretrained(tmp_path)
    assert all(torch.equal(saved.state_dict()[k], v) for k, v in head.state_dict().items())
    assert evaluator(head)["zero_shot_weighted_f1"] == pytest.approx(max(scores))


@pytest.mark.slow
def test_push_to_hub_pushes_the_head_with_its_card_and_manifest(tmp_path, monkeypatch):
    """push_to_hub=True pushes the trained head once, through its artifact base, to
    hub_model_id with hub_token (a local server that speaks the Hub's API; this process pointed
    at it, with no other token: a client interpreter only cost an import of torch and
    transformers)."""
    from tests.fixtures.hub_encoders import point_at
    from tests.fixtures.hub_server import LocalHub

    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):  # the token comes from hub_token alone
        monkeypatch.delenv(name, raising=False)
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    y = (x[:, 0] > 0).long()
    head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=6, num_labels=2))
    with LocalHub() as hub:
        point_at(monkeypatch, hub)
        args = HeadTrainingArguments(
            str(tmp_path / "head"), num_train_epochs=1, disable_tqdm=True, push_to_hub=True,
            hub_model_id="tester/pushed-head", hub_token=hub.token,
        )  # fmt: skip
        HeadTrainer(head, args, x, y, x, y).train()
        repo = hub.server.repo("tester/pushed-head")
        pushed = repo.commits[repo.branches["main"]]
        files = pushed.files
    assert pushed.title == "End of training" and len(repo.commits) == 2  # created, one push
    local = {p.name for p in (tmp_path / "head").iterdir()}
    assert {"config.json", "model.safetensors", "README.md", "manifest.json"} <= set(files)
    assert {"config.json", "model.safetensors", "metrics.json"} <= local
    assert files["model.safetensors"] == (tmp_path / "head" / "model.safetensors").read_bytes()
