"""Model cards: valid Hub metadata, numbers equal to the stored metrics, no network.

Every test here runs with sockets disabled, so a card writer that reached for the network would
fail. The cards' validation by the Hub's ``validate-yaml`` endpoint runs in tests/publishing/test_hub.py,
against the local Hub server.
"""

from __future__ import annotations

import json
import re
import socket

import matplotlib.image
import pytest
import torch
from huggingface_hub import ModelCard

from relrep_hf import AnchorSet, RelativeProjector, Statistics
from relrep_hf.encoding.corpora import BUNDLED_SENTENCES_ID
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.publishing.cards import (
    CITATION,
    HEATMAP_NAME,
    anchor_set_card,
    head_card,
    is_generated_card,
    projector_card,
    render_template,
    template_dir,
    write_card,
    write_folder_card,
    write_heatmap,
)
from relrep_hf.utils.defaults import SHRINKAGE_GRID

TAGS = {"relrep_hf", "relative-representations", "zero-shot-stitching"}
ENCODERS = [  # as anchor_set.json records them (the projector's keys)
    {"name": "minilm", "encoder_id": "sentence-transformers/all-MiniLM-L6-v2",
     "encoder_revision": "c" * 40},
    {"name": "bert", "encoder_id": "google-bert/bert-base-uncased", "encoder_revision": "d" * 40},
    {"name": "mine", "encoder_id": "local:my-encoder", "encoder_revision": ""},
]  # fmt: skip
RETRIEVAL = {
    f"{a}->{b}": {"recall@1": 0.1 * i + 0.0123, "recall@5": 0.1 * i + 0.2, "mrr": 0.1 * i + 0.05}
    for i, (a, b) in enumerate(
        [(a["name"], b["name"]) for a in ENCODERS for b in ENCODERS if a is not b]
    )
}
ZERO_SHOT = {"minilm->bert": {"f1": 0.7125, "accuracy": 0.75}}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("the network was used while writing a model card")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def anchor_set():
    mixture = torch.softmax(torch.randn(8, 20, generator=torch.Generator().manual_seed(0)), 1)
    return AnchorSet(
        mixture,
        [f"Support sentence number {i}." for i in range(20)],
        encoders=[{**e, "pooling": "mean", "layer": -1, "dim": 384} for e in ENCODERS],
        training={"seed": 3, "temperature": 0.1},
        metrics={
            "retrieval": RETRIEVAL,
            "retrieval_rows": 2000,
            "zero_shot": ZERO_SHOT,
            "dataset": {"id": "org/parallel", "split": "test"},
            "zero_shot_dataset": {"id": "fancyzhx/ag_news", "split": "test", "revision": "e" * 40},
        },
    )


def metric_values(card: ModelCard) -> dict[str, float]:
    return {r.metric_name: r.metric_value for r in card.data.eval_results}


def test_anchor_set_card_metadata_tables_and_heatmap(anchor_set, tmp_path):
    readme = write_card(anchor_set, tmp_path, repo_id="org/param-8")
    text = readme.read_text()
    card = ModelCard(text)  # parses as model-card metadata
    assert is_generated_card(text)
    data = card.data
    assert data.library_name == "relrep_hf" and data.license == "unknown"
    assert TAGS | {"anchor-set", "param-anchors", "whitened-inner-product"} <= set(data.tags)
    # base models: the training encoders with Hub ids, not the local one
    assert data.base_model == [ENCODERS[0]["encoder_id"], ENCODERS[1]["encoder_id"]]
    assert data.datasets == ["org/parallel", "fancyzhx/ag_news"]

    # one model-index result per metric measured, equal to the stored number
    values = metric_values(card)
    labels = {"recall@1": "Recall@1", "recall@5": "Recall@5", "mrr": "MRR"}
    expected = {
        f"{labels[name]} ({pair.replace('->', ' → ')})": value
        for pair, scores in RETRIEVAL.items()
        for name, value in scores.items()
    }
    expected |= {"F1 (minilm → bert)": 0.7125, "Accuracy (minilm → bert)": 0.75}
    assert values == expected
    by_task = {r.task_name: r for r in data.eval_results}
    retrieval, zero_shot = by_task["Cross-encoder retrieval"], by_task["Zero-shot stitching"]
    assert (retrieval.dataset_type, retrieval.dataset_split) == ("org/parallel", "test")
    assert (zero_shot.dataset_type, zero_shot.dataset_revision) == ("fancyzhx/ag_news", "e" * 40)
    assert zero_shot.task_type == "text-classification" and zero_shot.metric_type in (
        "f1",
        "accuracy",
    )
    assert {r.metric_args["k"] for r in data.eval_results if r.metric_type == "recall"} == {1, 5}

    # the tables show the same numbers
    assert "| `minilm` | `bert` | 0.0123 | 0.2000 | 0.0500 |" in text
    assert "| `minilm` | `bert` | 0.7500 | 0.7125 |" in text  # accuracy, F1
    assert "| `mine` | `local:my-encoder` (a local folder, not on the Hub) |" in text
    assert "[`sentence-transformers/all-MiniLM-L6-v2`](https://huggingface.co/sentence-" in text
    assert "| temperature | `0.1` |" in text
    # the heatmap is written beside the card and shown in it
    assert f"![Retrieval between the encoders, Recall@1]({HEATMAP_NAME})" in text
    image = matplotlib.image.imread(tmp_path / HEATMAP_NAME)
    assert image.ndim == 3 and min(image.shape[:2]) > 100
    # onboarding, citation, nothing left unfilled
    assert 'AnchorSet.from_pretrained("org/param-8")' in text
    assert "RelativeProjector.from_anchor_set(anchor_set, support_embeddings" in text
    assert CITATION in text and "arXiv:2605.30596" in CITATION
    assert "Svendsen, Oscar Thorsted and Jakobsen, Nikolaj Holst and Mager, Fabian" in CITATION
    template_fields = set(
        re.findall(r"\{([a-z_]+)\}", (template_dir() / "anchor_set.md").read_text())
    )
    assert not [f for f in template_fields if "{" + f + "}" in text]
    # the card survives a round trip through huggingface_hub's parser
    assert ModelCard(str(card)).data.to_dict() == data.to_dict()


def test_anchor_set_card_without_cross_encoder_metrics(tmp_path):
    support = [{"index": i} for i in range(10)]
    reference = {"dataset_id": "uoft-cs/cifar100", "split": "train", "column": "img"}
    anchor_set = AnchorSet.random(support, num_anchors=4)
    anchor_set.support_reference = reference
    write_card(anchor_set, tmp_path)
    assert not (tmp_path / HEATMAP_NAME).exists()
    card = ModelCard((tmp_path / "README.md").read_text())
    assert card.data.eval_results is None and "model-index" not in card.data.to_dict()
    assert card.data.base_model is None and "random-anchors" in card.data.tags
    assert "No cross-encoder retrieval was measured" in card.text
    assert 'datasets.load_dataset("uoft-cs/cifar100", split="train", revision=None)' in card.text
    assert 'column="img"' in card.text and "10 rows of the dataset `uoft-cs/cifar100`" in card.text


def test_cards_show_the_shrinkage_chosen_from_the_data(tmp_path):
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(200, 4, generator=generator)
    spaces = {f"e{i}": base @ torch.randn(4, 8, generator=generator) for i in range(3)}
    spaces = {n: x + 0.1 * torch.randn(x.shape, generator=generator) for n, x in spaces.items()}
    support = [f"input {i}" for i in range(200)]
    train = {n: spaces[n] for n in ("e0", "e1")}
    anchor_set = AnchorSet.shared_linear(support, train, 6, support_rows=range(200))
    chosen = anchor_set.shrinkage
    write_card(anchor_set, tmp_path)
    text = (tmp_path / "README.md").read_text()
    grid = ", ".join(str(s) for s in SHRINKAGE_GRID)  # 200 rows: every candidate scored
    assert f"`{chosen}, chosen from the fit rows by cross-validation among {grid}`" in text
    assert "shrinkage_selection" not in text
    projector = RelativeProjector.from_anchor_set(anchor_set, spaces["e2"], spaces["e2"])
    assert projector.config.shrinkage == chosen
    assert f"shrinkage {chosen}" in projector_card(projector).text


def make_projector(**provenance) -> RelativeProjector:
    x = torch.randn(100, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return RelativeProjector.from_statistics(
        x[:4], Statistics.from_embeddings(x), pooling="mean", layer=4, **provenance
    )


def test_projector_card():
    projector = make_projector(
        encoder_id="org/encoder",
        encoder_revision="a" * 40,
        anchor_set_id="org/param-4",
        anchor_set_revision="b" * 40,
    )
    card = projector_card(projector, repo_id="org/encoder-projector")
    data = card.data
    assert data.base_model == "org/encoder" and data.pipeline_tag == "feature-extraction"
    assert TAGS | {"relative-projector", "whitened-inner-product"} <= set(data.tags)
    assert "model-index" not in data.to_dict()  # a projector measures nothing by itself
    text = str(card)
    assert ModelCard(text).data.to_dict() == data.to_dict()
    assert 'RelativeWrapper.from_pretrained("org/encoder", "org/encoder-projector")' in text
    assert 'AutoModel.from_pretrained("org/encoder-projector", trust_remote_code=True)' in text
    assert "[N, 6] -> [N, 4]" in text and "mean-pooled (hidden layer 4) embeddings (6-d)" in text
    assert "| hidden layer | `4 (4)` |" in text and "| pooling | `mean` |" in text
    assert f"| anchor set revision | `{'b' * 40}` |" in text
    assert "[`org/param-4`](https://huggingface.co/org/param-4) (commit `bbbbbbbbbbbb`)" in text
    # the same card from the config alone
    assert str(projector_card(projector.config, repo_id="org/encoder-projector")) == text

    local = projector_card(make_projector(encoder_id="local:my-bert", similarity="cosine"))
    assert local.data.base_model is None and "cosine-similarity" in local.data.tags
    assert 'RelativeWrapper.from_pretrained("path/to/my-bert", "path/to/this/projector")' in str(
        local
    )
    assert "`local:my-bert` (a local folder, not on the Hub)" in str(local)


def test_cards_read_the_provenance_recorded_and_invent_none(anchor_set):
    """The anchor set's card reads the ids anchor_set.json writes (and the keys of older files);
    a projector from the user's own embeddings records no pooling or layer, and says so."""
    text = str(anchor_set_card(anchor_set))
    assert f"[`{ENCODERS[1]['encoder_id']}`](https://huggingface.co/" in text
    assert f"`{'d' * 40}`" in text and "(unrecorded)" not in text.split("## ")[1]
    older = [{"name": "bert", "id": "google-bert/bert-base-uncased", "revision": "d" * 40}]
    anchor_set.encoders = older
    assert "[`google-bert/bert-base-uncased`](https://huggingface.co/" in str(
        anchor_set_card(anchor_set)
    )
    x = torch.randn(100, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mine = str(
        projector_card(RelativeProjector.from_statistics(x[:4], Statistics.from_embeddings(x)))
    )
    assert "| hidden layer | `(unrecorded)` |" in mine and "| pooling | `(unrecorded)` |" in mine
    assert "last" not in mine and "pooling unrecorded (hidden layer unrecorded)" in mine
    last = str(
        projector_card(
            RelativeProjector.from_statistics(x[:4], Statistics.from_embeddings(x), pooling="cls")
        )
    )
    assert "| hidden layer | `-1 (last)` |" in last and "(last hidden layer)" in last


def make_head() -> RelativeHeadForClassification:
    config = RelativeHeadConfig.for_projector(
        make_projector(encoder_id="org/encoder", anchor_set_id="org/param-4").config,
        id2label={0: "negative", 1: "positive"},
        hidden_sizes=[8],
    )
    return RelativeHeadForClassification(config)


HEAD_METRICS = {
    "dataset": {"id": "stanfordnlp/sst2", "split": "validation"},
    "results": {
        "org/encoder": {"accuracy": 0.875, "f1": 0.8712},
        "org/other-encoder": {"accuracy": 0.8125, "f1": 0.8033},
    },
}


def test_head_card():
    head = make_head()
    card = head_card(head, metrics=HEAD_METRICS, repo_id="org/sst2-head")
    data = card.data
    assert TAGS | {"relative-head"} <= set(data.tags) and data.datasets == ["stanfordnlp/sst2"]
    assert metric_values(card) == {
        "Accuracy (org/encoder, trained on)": 0.875,
        "F1 (org/encoder, trained on)": 0.8712,
        "Accuracy (org/other-encoder, zero-shot)": 0.8125,
        "F1 (org/other-encoder, zero-shot)": 0.8033,
    }
    assert {r.dataset_split for r in data.eval_results} == {"validation"}
    text = str(card)
    assert "| 0 | negative |\n| 1 | positive |" in text
    assert "| `org/other-encoder` | zero-shot | 0.8125 | 0.8033 |" in text
    assert "head on relative features**: an MLP with hidden sizes [8], after a LayerNorm" in text
    assert 'wrapper.with_head("org/sst2-head")' in text and CITATION in text
    remote = 'AutoModelForSequenceClassification.from_pretrained("org/sst2-head", trust_remote_code'
    assert remote in text and "RelativeModelForSequenceClassification.from_wrapper(" in text
    bare = head_card(head)
    assert "model-index" not in bare.data.to_dict()
    assert "No evaluation was recorded with this head" in bare.text


def test_cards_do_not_link_the_packaged_sentences_as_a_hub_dataset():
    metrics = {**HEAD_METRICS, "dataset": {"id": BUNDLED_SENTENCES_ID, "split": "train"}}
    card = head_card(make_head(), metrics=metrics)
    assert card.data.datasets is None
    assert f"On `{BUNDLED_SENTENCES_ID}` (split `train`):" in card.text
    assert "huggingface.co/datasets" not in str(card)


@pytest.mark.slow
def test_folder_cards_read_the_saved_files_and_keep_custom_readmes(anchor_set, tmp_path):
    head = make_head()
    head.save_pretrained(tmp_path / "head")
    (tmp_path / "head" / "metrics.json").write_text(json.dumps(HEAD_METRICS))
    readme = write_folder_card(tmp_path / "head", repo_id="org/sst2-head")
    assert readme.read_text() == str(head_card(head, metrics=HEAD_METRICS, repo_id="org/sst2-head"))

    projector = make_projector(encoder_id="org/encoder")
    projector.save_pretrained(tmp_path / "projector")
    write_folder_card(tmp_path / "projector", repo_id="org/p")
    assert (tmp_path / "projector" / "README.md").read_text() == str(
        projector_card(projector, repo_id="org/p")
    )

    anchor_set.save_pretrained(tmp_path / "anchor_set")
    write_folder_card(tmp_path / "anchor_set")
    assert (tmp_path / "anchor_set" / HEATMAP_NAME).is_file()
    generated = (tmp_path / "anchor_set" / "README.md").read_text()
    assert generated == str(anchor_set_card(anchor_set, heatmap=HEATMAP_NAME))

    # a README whose marker line was removed is the user's: kept as it is
    custom = "---\nlicense: mit\n---\n# My own card\n"
    (tmp_path / "anchor_set" / "README.md").write_text(custom)
    assert write_folder_card(tmp_path / "anchor_set") is None
    assert (tmp_path / "anchor_set" / "README.md").read_text() == custom
    assert write_folder_card(tmp_path) is None  # no artifact here


def test_templates_and_heatmap_errors(tmp_path):
    with pytest.raises(KeyError, match=r"uses fields that were not given: \['anchor_description'"):
        render_template("anchor_set.md", {"metadata": ""})
    with pytest.raises(ValueError, match="No retrieval pairs"):
        write_heatmap({"not a pair": {"mrr": 1.0}}, tmp_path / "x.png")
    path = write_heatmap({"a->b": {"mrr": 0.5}}, tmp_path / "x.png", metric="mrr")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="No model card for str"):
        write_card("not an artifact", tmp_path)


def test_one_bibtex_entry_everywhere():
    """The README, the cards and the evaluate modules cite the paper with the same entry."""
    from pathlib import Path

    from relrep_hf.functional.metrics import Retrieval

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert CITATION in readme
    assert Retrieval()._info().citation == CITATION
    keys = set(re.findall(r"@\w+\{([^,]+),", readme + CITATION))
    assert keys == {"svendsen2026improving"}
