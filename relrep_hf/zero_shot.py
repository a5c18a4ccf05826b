"""Zero-shot evaluation: the paper's Algorithm 1 and cross-encoder retrieval.

`zero_shot_classification` holds each test encoder out of PARAM training, builds
every encoder's projector from the learned anchor set, trains a classifier per
source encoder on relative features and evaluates it, unchanged, on the held-out
encoder: the matrix of the paper's Table 1, with the absolute-space diagonal and the
random-anchor cosine baseline beside it. `retrieval_matrix` measures how well the
relative spaces of encoders line up without any classifier (Table 3).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from relrep_hf.anchor_set import AnchorSet
from relrep_hf.configuration_relative_head import RelativeHeadConfig
from relrep_hf.head_trainer import HeadTrainer, HeadTrainingArguments
from relrep_hf.metrics import retrieval_metrics, weighted_f1
from relrep_hf.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.modeling_relative_projector import RelativeProjector
from relrep_hf.param_trainer import ParamTrainer, ParamTrainingArguments
from relrep_hf.statistics import Statistics


def build_projectors(
    anchor_set: AnchorSet,
    embeddings: Mapping[str, Tensor],
    *,
    support_rows: Tensor,
    statistics_rows: Tensor,
    similarity: str = "wip",
    provenance: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, RelativeProjector]:
    """Every encoder's projector from one anchor set: no gradient step.

    ``support_rows`` index the anchor set's support inputs in ``embeddings``; statistics come
    from ``statistics_rows`` (never from the rows that will be evaluated).
    """
    provenance = provenance or {}
    return {
        name: RelativeProjector.from_anchor_set(
            anchor_set,
            space[support_rows],
            Statistics.from_embeddings(space[statistics_rows]),
            similarity=similarity,
            **dict(provenance.get(name, {})),
        )
        for name, space in embeddings.items()
    }


def retrieval_matrix(
    relatives: Mapping[str, Tensor], *, ks: Sequence[int] = (1, 5)
) -> dict[str, dict[str, float]]:
    """``{"a->b": {"recall@1", "recall@5", "mrr"}}`` for every ordered pair of encoders: row i of
    a's relative features retrieves row i of b's by cosine (ties counted pessimistically)."""
    return {
        f"{a}->{b}": retrieval_metrics(relatives[a], relatives[b], ks=tuple(ks))
        for a in relatives
        for b in relatives
        if a != b
    }


def train_classifier(
    features: Tensor,
    labels: Tensor,
    *,
    num_labels: int,
    seed: int = 0,
    epochs: int = 30,
    **config: Any,
) -> RelativeHeadForClassification:
    """A linear head (LayerNorm + Linear) on features, trained with `HeadTrainer`."""
    torch.manual_seed(seed)
    head = RelativeHeadForClassification(
        RelativeHeadConfig(num_anchors=features.shape[1], num_labels=num_labels, **config)
    )
    with tempfile.TemporaryDirectory() as output_dir:
        args = HeadTrainingArguments(
            output_dir,
            num_train_epochs=epochs,
            learning_rate=3e-3,
            per_device_train_batch_size=128,
            seed=seed,
            eval_strategy="no",
            save_final_model=False,
            disable_tqdm=True,
        )
        HeadTrainer(head, args, features, labels).train()
    return head.eval()


def standardize(train: Tensor, *others: Tensor) -> tuple[Tensor, ...]:
    """Z-score features with the training rows' per-feature mean and std (absolute spaces
    carry large shifts that a per-row LayerNorm would turn into noise)."""
    mean, std = train.mean(dim=0), train.std(dim=0).clamp_min(1e-8)
    return tuple((x - mean) / std for x in (train, *others))


@torch.no_grad()
def head_f1(head: RelativeHeadForClassification, features: Tensor, labels: Tensor) -> float:
    """Weighted F1 of ``head``'s predictions on ``features``."""
    return weighted_f1(head(features).logits.argmax(dim=-1), labels)


def zero_shot_classification(
    embeddings: Mapping[str, Tensor],
    labels: Tensor,
    *,
    train_rows: Tensor,
    test_rows: Tensor,
    args: ParamTrainingArguments,
    test_encoders: Sequence[str] | None = None,
    head_epochs: int = 30,
) -> list[dict[str, Any]]:
    """Algorithm 1, once per test encoder: the rows of the paper's Table 1.

    For each test encoder t: PARAM is trained on the other encoders only (``train_rows``);
    every encoder's projector is built from the anchor set; a classifier per source encoder s
    is trained on s's relative features and evaluated on t's (``test_rows``). Each row has the
    weighted F1 of ``"PARAM-WIP"`` and ``"Random-Cos"`` (random support points, cosine), and
    on the diagonal ``"Abs."``: a classifier on t's absolute embeddings.
    """
    names = list(embeddings)
    if len(names) < 2:
        raise ValueError("Zero-shot stitching needs at least 2 encoders.")
    num_labels = int(labels.max()) + 1
    train_rows, test_rows = torch.as_tensor(train_rows), torch.as_tensor(test_rows)
    rows = []
    for test in test_encoders or names:
        if test not in embeddings:
            raise ValueError(f"Unknown test encoder {test!r}; the encoders are {names}.")
        training = {name: embeddings[name][train_rows] for name in names if name != test}
        trainer = ParamTrainer(
            replace(args, output_dir=tempfile.mkdtemp(prefix="relrep-zs-")), training
        )
        anchor_set = trainer.train()
        support_rows = train_rows[trainer.support_indices]
        random_set = AnchorSet.random(anchor_set.support, anchor_set.num_anchors, seed=args.seed)
        projected = {}
        for method, anchors, similarity in (
            ("PARAM-WIP", anchor_set, "wip"),
            ("Random-Cos", random_set, "cosine"),
        ):
            projectors = build_projectors(
                anchors,
                embeddings,
                support_rows=support_rows,
                statistics_rows=train_rows,
                similarity=similarity,
            )
            projected[method] = {name: projectors[name](embeddings[name]) for name in names}
        absolute_train, absolute_test = standardize(
            embeddings[test][train_rows], embeddings[test][test_rows]
        )
        absolute = train_classifier(
            absolute_train,
            labels[train_rows],
            num_labels=num_labels,
            seed=args.seed,
            epochs=head_epochs,
        )
        for source in names:
            row: dict[str, Any] = {"encoder": test, "classifier": source}
            if source == test:
                row["Abs."] = head_f1(absolute, absolute_test, labels[test_rows])
            for method, relatives in projected.items():
                head = train_classifier(
                    relatives[source][train_rows],
                    labels[train_rows],
                    num_labels=num_labels,
                    seed=args.seed,
                    epochs=head_epochs,
                )
                row[method] = head_f1(head, relatives[test][test_rows], labels[test_rows])
            rows.append(row)
    return rows


def format_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *, percent: bool = True
) -> str:
    """A Markdown table of ``rows`` with the given value ``columns`` (missing values blank)."""
    keys = [k for k in rows[0] if k not in columns] if rows else []
    header = "| " + " | ".join(keys + list(columns)) + " |"
    lines = [header, "|" + "---|" * (len(keys) + len(columns))]
    for row in rows:
        values = [str(row[k]) for k in keys]
        for column in columns:
            value = row.get(column)
            values.append(
                "" if value is None else f"{100 * value:.2f}" if percent else f"{value:.4f}"
            )
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)
