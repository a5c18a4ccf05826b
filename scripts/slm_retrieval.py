"""Section 5.2, Tables 3 and 7: zero-shot retrieval between small language models.

3,300 template-generated English sentences (`relrep_hf.encoding.corpora.template_sentences`; the paper's
templates are unpublished, these are ours) are embedded by four decoder LMs, each sentence as
the final hidden state (after the final norm) of its last token:

==============  ==========================================  =====
name            Hub id                                      d
==============  ==========================================  =====
TinyLlama       TinyLlama/TinyLlama-1.1B-Chat-v1.0          2048
gpt2            openai-community/gpt2                       768
gpt2-med        openai-community/gpt2-medium                1024
gemma-3-1b      google/gemma-3-1b-pt  (gated: accept the licence, log in)  1152
==============  ==========================================  =====

The paper names the model only "TinyLlama"; we take the Chat v1.0 checkpoint, by far the most
used 1.1B TinyLlama on the Hub (the base model is
``TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T``; pass ``--models`` to use it).

Per seed, 300 sentences are held out for testing and the other 3,000 are the support set and
the whitening data (the paper's R@1 values are multiples of 1/300, hence the split). For every
zero-shot encoder t, PARAM (Multi, 300 anchors, Table 5 hyperparameters) is trained on the
three other models only; each source model s != t then queries with its relative features of a
test sentence, by cosine, among t's relative features of the 300 test sentences (no decoder is
trained). Random-Cosine uses random support sentences as anchors. The table gives Recall@1 and
Recall@5 in %, mean ± std over seeds, for every ordered pair (source, zero-shot), in the layout
of Table 7; ``retrieval_heatmap.png`` shows the Recall@1 matrices.

``--smoke`` embeds 400 sentences with tiny random-weight models built from configs (GPT-2 at its
last and first layer, Llama, Gemma 3), with a word-level tokenizer fitted on the sentences:
it exercises the whole path offline; its numbers mean nothing.

Usage::

    python -m scripts.slm_retrieval                     # the paper's models (Hub, GPU advised)
    python -m scripts.slm_retrieval --smoke --seeds 0 1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import datasets
import torch
from torch import Tensor

from relrep_hf.encoding import embeddings_tensor, extract_embeddings
from relrep_hf.encoding.corpora import template_sentences
from relrep_hf.evaluation import EncoderData, Method, ZeroShotStitching, stitching_heatmap
from relrep_hf.functional.markdown_tables import format_table, summarize_seeds
from scripts.common import experiment_parser, param_arguments, parse, smoke_tokenizer, write_results

NUM_SENTENCES, NUM_TEST = 3300, 300
MODELS = {
    "TinyLlama": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "gpt2": "openai-community/gpt2",
    "gpt2-med": "openai-community/gpt2-medium",
    "gemma-3-1b": "google/gemma-3-1b-pt",
}
KEYS = ("Source Enc", "ZS Encoder")
METHODS = (Method("Random-Cos", "random", "cosine"), Method("PARAM-WIP", "held_out"))
COLUMNS = tuple(f"{method.name} R@{k}" for method in METHODS for k in (1, 5))


def embed_hub_models(models: Mapping[str, str], texts: list[str], cache_dir) -> dict[str, Tensor]:
    """Last-token states of the final layer of each Hub model, ``{name: [N, d]}``."""
    from transformers import AutoModel, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dataset = datasets.Dataset.from_dict({"text": texts})
    spaces = {}
    for name, model_id in models.items():
        print(f"embedding with {model_id}")
        tokenizer = AutoTokenizer.from_pretrained(model_id)
        model = AutoModel.from_pretrained(model_id, dtype=torch.float32).to(device).eval()
        embedded = extract_embeddings(
            model, tokenizer, dataset, pooling="last", batch_size=64, cache_dir=cache_dir
        )
        spaces[name] = embeddings_tensor(embedded)
        del model
    return spaces


def embed_smoke_models(texts: list[str], cache_dir) -> dict[str, Tensor]:
    """Tiny random-weight decoders from configs; one GPT-2 is seen at two layers, so at least
    that pair of spaces is related."""
    from transformers import AutoModel, Gemma3TextConfig, GPT2Config, LlamaConfig

    tokenizer = smoke_tokenizer(texts)
    vocab, special = len(tokenizer), {"bos_token_id": None, "eos_token_id": None}
    small = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 64,
    }
    configs = {
        "gpt2-tiny": GPT2Config(
            vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=2, **special
        ),
        "llama-tiny": LlamaConfig(vocab_size=vocab, **small, **special),
        "gemma3-tiny": Gemma3TextConfig(
            vocab_size=vocab, head_dim=16, sliding_window=16, **small, **special
        ),
    }
    dataset = datasets.Dataset.from_dict({"text": texts})
    spaces = {}
    for i, (name, config) in enumerate(configs.items()):
        torch.manual_seed(i)
        model = AutoModel.from_config(config).eval()
        layers = {name: -1, f"{name}-L1": 1} if name == "gpt2-tiny" else {name: -1}
        for view, layer in layers.items():
            embedded = extract_embeddings(
                model,
                tokenizer,
                dataset,
                pooling="last",
                layer=layer,
                cache_dir=cache_dir,
                show_progress=False,
            )
            spaces[view] = embeddings_tensor(embedded)
    return spaces


def retrieval_rows(
    spaces: Mapping[str, Tensor], *, seed: int, num_test: int, args_overrides: dict[str, Any]
) -> list[dict[str, Any]]:
    """One seed: Recall@1/@5 of every ordered (source, zero-shot) pair, both methods; PARAM is
    fitted without the zero-shot encoder (Algorithm 1)."""
    n = len(next(iter(spaces.values())))
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    test, train = order[:num_test], order[num_test:]
    data = {
        name: EncoderData(x[train], None, x[test], None, parallel=x[train])
        for name, x in spaces.items()
    }
    stitching = ZeroShotStitching(
        data, args=param_arguments(seed=seed, **args_overrides), progress=print
    )
    rows = []
    for source in spaces:
        for zero_shot in spaces:
            if source == zero_shot:
                continue
            row: dict[str, Any] = {"Source Enc": source, "ZS Encoder": zero_shot}
            for method in METHODS:
                scores = stitching.retrieval(method, source, zero_shot, ks=(1, 5))
                row[f"{method.name} R@1"] = scores["recall@1"]
                row[f"{method.name} R@5"] = scores["recall@5"]
            rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = experiment_parser(__doc__, "slm_retrieval")
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="NAME=HUB_ID",
        default=None,
        help="models to compare (default: the paper's four, see the module docstring)",
    )
    parser.add_argument("--num-anchors", type=int, default=300)
    args = parse(parser, argv)
    cache_dir = args.output_dir / "embeddings"
    if args.smoke:
        texts, num_test = template_sentences(400, seed=0), 100
        spaces = embed_smoke_models(texts, cache_dir)
        overrides = {"num_anchors": 32, "num_train_epochs": 5, "train_batch_size": 128}
    else:
        models = dict(m.split("=", 1) for m in args.models) if args.models else MODELS
        texts, num_test = template_sentences(NUM_SENTENCES, seed=0), NUM_TEST
        spaces = embed_hub_models(models, texts, cache_dir)
        overrides = {"num_anchors": args.num_anchors}
    print({name: tuple(x.shape) for name, x in spaces.items()})

    per_seed = {}
    for seed in args.seeds:
        print(f"seed {seed}")
        per_seed[seed] = retrieval_rows(
            spaces, seed=seed, num_test=num_test, args_overrides=overrides
        )
    table = summarize_seeds(list(per_seed.values()), KEYS, COLUMNS)
    print(format_table(table, COLUMNS, keys=KEYS, group=True))

    heatmap = args.output_dir / "retrieval_heatmap.png"
    matrices = {
        method: {
            f"{row['Source Enc']}->{row['ZS Encoder']}": {"recall@1": row[f"{method} R@1"]["mean"]}
            for row in table
        }
        for method in ("Random-Cos", "PARAM-WIP")
    }
    stitching_heatmap(
        matrices,
        list(spaces),
        heatmap,
        metric="recall@1",
        title="R@1: source queries (rows), zero-shot encoder retrieved (columns)",
    )
    results = {
        "experiment": "Section 5.2 / Table 7: zero-shot retrieval between small language models",
        "encoders": {name: int(x.shape[1]) for name, x in spaces.items()},
        "num_sentences": len(texts),
        "num_test": num_test,
        "param_overrides": overrides,
        "table": table,
        "per_seed": per_seed,
        "figures": {"retrieval_heatmap": heatmap},
    }
    return write_results(args, results)


if __name__ == "__main__":
    main()
