"""Tiny Llama and Gemma3 models written to GGUF files with the ``gguf`` package's writer.

The files are laid out as llama.cpp's ``convert_hf_to_gguf.py`` writes them (the layout
transformers' GGUF loader undoes): tensor names from ``gguf.get_tensor_name_map``, Llama's
query/key rows permuted for llama.cpp's rotary embedding, Gemma's RMSNorm weights stored as
``1 + w``, the hyperparameters under ``{arch}.*`` and the tokenizer under ``tokenizer.ggml.*``.

Each model's tokenizer is a character vocabulary over the texts it will see: Llama's byte-level
(``tokenizer.ggml.model = "gpt2"``, as Llama 3 files have it, with three merges), Gemma's sentencepiece
(``"llama"``, with scores), so both of transformers' GGUF tokenizer builders are exercised.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch
from transformers import Gemma3TextConfig, Gemma3TextModel, LlamaConfig, LlamaModel
from transformers.convert_slow_tokenizer import bytes_to_unicode

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN, CONTEXT = 32, 2, 4, 2, 8, 64, 1024


def tiny_llama(vocab_size: int, seed: int = 0) -> LlamaModel:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                         intermediate_size=FFN, max_position_embeddings=CONTEXT,
                         rms_norm_eps=1e-5, rope_theta=10000.0)  # fmt: skip
    return LlamaModel(config).eval()


def tiny_gemma3(vocab_size: int, seed: int = 0) -> Gemma3TextModel:
    torch.manual_seed(seed)
    config = Gemma3TextConfig(vocab_size=vocab_size, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                              num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                              head_dim=HEAD_DIM, intermediate_size=FFN,
                              max_position_embeddings=CONTEXT, sliding_window=CONTEXT,
                              rms_norm_eps=1e-6)  # fmt: skip
    model = Gemma3TextModel(config).eval()
    with torch.no_grad():  # non-trivial norms, so that the 1 + w storage is exercised
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(0.0, 0.3)
    return model


BYTE_LEVEL_MERGES = ["\u0120 t", "h e", "\u0120t he"]  # "Ġt", "he", "Ġthe"


def byte_level_vocab() -> list[str]:
    """The 256 byte symbols of byte-level BPE, three merged tokens, then the control tokens."""
    merged = [merge.replace(" ", "") for merge in BYTE_LEVEL_MERGES]
    return [*bytes_to_unicode().values(), *merged, "<|begin_of_text|>", "<|end_of_text|>"]


def sentencepiece_vocab(texts: list[str]) -> list[str]:
    """<pad>, <eos>, <bos>, <unk>, then "▁" and every character of ``texts``."""
    characters = sorted({c for text in texts for c in text if c != " "})
    return ["<pad>", "<eos>", "<bos>", "<unk>", "\u2581", *characters]


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's query/key row order (convert_hf_to_gguf.py, LlamaModel.permute)."""
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_gguf(
    model: LlamaModel | Gemma3TextModel, tokens: list[str], path: Path, *, dtype: str = "F32"
) -> Path:
    """Write ``model`` and its character tokenizer to ``path`` (tensors in F32 or F16)."""
    config = model.config
    llama = config.model_type == "llama"
    arch = gguf.MODEL_ARCH.LLAMA if llama else gguf.MODEL_ARCH.GEMMA3
    name_map = gguf.get_tensor_name_map(arch, config.num_hidden_layers)
    writer = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name("tiny-llama" if llama else "tiny-gemma3")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    if llama:
        writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
        writer.add_rope_dimension_count(config.head_dim)
    else:
        writer.add_key_length(config.head_dim)
        writer.add_value_length(config.head_dim)
        writer.add_sliding_window(config.sliding_window)
        writer.add_rope_freq_base(config.rope_parameters["full_attention"]["rope_theta"])
    file_type = gguf.LlamaFileType.ALL_F32 if dtype == "F32" else gguf.LlamaFileType.MOSTLY_F16
    writer.add_file_type(file_type)

    if llama:  # byte-level BPE, as Llama 3 files have it
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("default")
        types = [gguf.TokenType.NORMAL] * (len(tokens) - 2) + [gguf.TokenType.CONTROL] * 2
        writer.add_token_merges(BYTE_LEVEL_MERGES)
        writer.add_bos_token_id(len(tokens) - 2)
        writer.add_eos_token_id(len(tokens) - 1)
        writer.add_pad_token_id(len(tokens) - 1)
    else:  # sentencepiece, as Gemma files have it
        writer.add_tokenizer_model("llama")
        writer.add_token_scores([0.0] * 4 + [-float(i) for i in range(len(tokens) - 4)])
        types = [gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.UNKNOWN]
        types += [gguf.TokenType.NORMAL] * (len(tokens) - 4)
        writer.add_pad_token_id(0)
        writer.add_eos_token_id(1)
        writer.add_bos_token_id(2)
        writer.add_unk_token_id(3)
        writer.add_add_bos_token(True)
    writer.add_token_list(tokens)
    writer.add_token_types(types)

    for hf_name, tensor in model.state_dict().items():
        base, suffix = hf_name.rsplit(".", 1)
        name = f"{name_map.get_name(base)}.{suffix}"
        data = tensor.detach().float().numpy()
        if llama and name.endswith("attn_q.weight"):
            data = _permute(data, config.num_attention_heads)
        elif llama and name.endswith("attn_k.weight"):
            data = _permute(data, config.num_key_value_heads)
        elif not llama and name.endswith("norm.weight"):
            data = data + 1.0  # llama.cpp stores Gemma's RMSNorm scale as 1 + w
        if dtype == "F16" and data.ndim == 2:  # llama.cpp keeps 1-D tensors in F32
            data = data.astype(np.float16)
        writer.add_tensor(name, np.ascontiguousarray(data))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
