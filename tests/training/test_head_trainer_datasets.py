"""`HeadTrainer` on a `datasets.Dataset` (`relrep_hf.training.head_arguments.dataset_columns`):
the same head as on the tensors, bit for bit, and a clear error for each column that is missing
or wrong."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch
import transformers

from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.training.head_trainer import HeadTrainer, HeadTrainingArguments
from tests.fixtures import trainer_inputs
from tests.models.test_modeling_relative_head import toy_problem

transformers.logging.set_verbosity_error()


def fresh_head(**config) -> RelativeHeadForClassification:
    torch.manual_seed(123)  # the same initial weights for every run
    return RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=12, num_labels=3, hidden_sizes=[8], **config)
    )


def quick_args(tmp_path, **overrides) -> HeadTrainingArguments:
    return HeadTrainingArguments(
        str(tmp_path), num_train_epochs=2, learning_rate=1e-2, per_device_train_batch_size=32,
        seed=0, disable_tqdm=True, save_final_model=False, direction_candidates=(4, 8),
        **overrides,
    )  # fmt: skip


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(b.state_dict()[k], v) for k, v in a.state_dict().items())


@pytest.mark.slow
def test_a_dataset_trains_the_same_head_as_its_tensors(tmp_path):
    """One encoder's column and its labels (a ClassLabel) give the tensors' head bit for bit,
    and its evaluation the same metrics; so do two encoders' columns (directions chosen)."""
    x, y = toy_problem(200)
    head = fresh_head()
    by_tensors = HeadTrainer(head, quick_args(tmp_path), x[:150], y[:150], x[150:], y[150:])
    tensor_metrics = by_tensors.train().metrics
    rows = datasets.Dataset.from_dict({"relative": x.numpy(), "label": y.numpy()})
    rows = rows.cast_column("label", datasets.ClassLabel(names=["a", "b", "c"]))
    from_rows = fresh_head()
    dataset_metrics = HeadTrainer(
        from_rows, quick_args(tmp_path), train_dataset=rows.select(range(150)),
        eval_dataset=rows.select(range(150, 200)),
    ).train().metrics  # fmt: skip
    assert same_weights(head, from_rows) and dataset_metrics == tensor_metrics
    assert not torch.equal(head.classifier.weight, fresh_head().classifier.weight)  # it trained

    # two encoders: one column each, named by the mapping; a Dataset in place of the tensors
    shifted = x + 0.05 * torch.randn(x.shape, generator=torch.Generator().manual_seed(3))
    two = fresh_head()
    HeadTrainer(two, quick_args(tmp_path), {"a": x, "b": shifted}, y).train()
    columns = datasets.Dataset.from_dict(
        {"rel_a": x.numpy(), "rel_b": shifted.numpy(), "y": y.numpy()}
    )
    from_columns = fresh_head()
    trainer = HeadTrainer(
        from_columns, quick_args(tmp_path), columns,
        feature_columns={"a": "rel_a", "b": "rel_b"}, label_column="y",
    )  # fmt: skip
    trainer.train()
    assert two.config.num_directions == from_columns.config.num_directions is not None
    assert same_weights(two, from_columns)
    assert list(trainer.train_features) == ["a", "b"]
    # a list of columns names each encoder by its column (new arguments, made after the
    # Trainer above, reset accelerate's state: its evaluate below still runs)
    listed = HeadTrainer(fresh_head(), quick_args(tmp_path), columns,
                         feature_columns=["rel_a", "rel_b"], label_column="y")  # fmt: skip
    assert list(listed.train_features) == ["rel_a", "rel_b"]
    # evaluate takes a Dataset too: the same numbers as its tensors
    from_dataset = trainer.evaluate(columns, prefix="test")
    from_tensors = trainer.evaluate({"a": x, "b": shifted}, y, prefix="test")
    assert from_dataset == pytest.approx(from_tensors)


def test_class_names_in_a_string_column_map_through_label2id(tmp_path):
    x, y = toy_problem(30)
    names = {0: "law", 1: "history", 2: "art"}
    head = fresh_head(id2label=names)
    rows = datasets.Dataset.from_dict({"relative": x.numpy(), "label": [names[int(i)] for i in y]})
    trainer = HeadTrainer(head, quick_args(tmp_path), rows)
    assert torch.equal(trainer.train_labels, y)
    unknown = rows.map(lambda row: {"label": "music"})
    with pytest.raises(ValueError, match=r"train_dataset\['label'\] holds class names \['music'\]"):
        HeadTrainer(head, quick_args(tmp_path), unknown)


# Every case of the bad-input table's rows for this module (tests/fixtures/trainer_inputs.py),
# with the start of the message each must give.
MESSAGES = {
    "a Dataset without the feature column":
        r"train_dataset has no column 'relative'; its columns are \['embedding', 'label'\]",
    "a Dataset without the label column named": r"train_dataset has no column 'labels'",
    "a Dataset whose feature rows have different lengths":
        r"train_dataset\['relative'\] must hold one list of m numbers per row \(\[N, m\]\), got "
        r"rows of lengths \[7, 8\]",
    "a Dataset of features of another size than the head's":
        r"train_dataset\['relative'\]: last dimension is 5, expected 8 \(the head's num_anchors\)",
    "a Dataset with a NaN feature":
        r"train_dataset\['relative'\]: NaN or Inf in 1 row\(s\) \(row 1\)",
    "a Dataset with labels outside the head's classes":
        r"train_dataset\['label'\] must lie in \[0, 2\) \(the head's num_labels\), got values "
        r"from 0 to 7",
    "a DatasetDict instead of one split":
        r"train_dataset is a DatasetDict with splits \['train'\]: pass one split",
    "a Dataset and labels beside it": r"train_relative is a Dataset: its labels are its label",
    "load_best_model_at_end without evaluation data":
        "load_best_model_at_end and an evaluator need evaluation data",
}  # fmt: skip


class Setup:
    """What the cases need of `tests.test_reliability.Setup`: a folder and an 8-anchor head."""

    def __init__(self, folder):
        self.folder = folder

    def head(self, num_anchors: int = 8) -> RelativeHeadForClassification:
        return RelativeHeadForClassification(
            RelativeHeadConfig(num_anchors=num_anchors, num_labels=2)
        )


@pytest.mark.parametrize("case", [c for c in trainer_inputs.CASES if c[0] in MESSAGES],
                         ids=lambda c: c[0])  # fmt: skip
def test_bad_dataset_inputs_get_clear_errors(case, tmp_path):
    what, _, call = case
    error = TypeError if "DatasetDict" in what else ValueError
    with pytest.raises(error, match=MESSAGES[what]):
        call(Setup(tmp_path))


def test_every_case_is_checked_here_or_beside_the_arguments():
    from tests.training.test_head_arguments import MESSAGES as ARGUMENT_MESSAGES

    assert {c[0] for c in trainer_inputs.CASES} == set(MESSAGES) | set(ARGUMENT_MESSAGES)


def test_feature_columns_must_name_columns(tmp_path):
    x, y = toy_problem(10)
    with pytest.raises(ValueError, match="feature_columns must name one or more columns"):
        HeadTrainer(fresh_head(), quick_args(tmp_path), x, y, feature_columns=[])
    rows = datasets.Dataset.from_dict({"relative": x.numpy(), "label": np.asarray(y)})
    with pytest.raises(ValueError, match="Pass train_dataset, or train_relative and train_labels"):
        HeadTrainer(fresh_head(), quick_args(tmp_path), x, y, train_dataset=rows)
