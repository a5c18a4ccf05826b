"""Fine-tuning a shared linear anchor set with the paper's InfoNCE, from its closed form.

The closed form (`AnchorSet.shared_linear`) keeps the energy the training encoders share;
InfoNCE asks instead that row i of one encoder's compressed features be nearer (by cosine)
to row i of every other encoder's than to any other row. Starting from the closed form, a few
epochs of AdamW on ``U [K, m]`` optimise that objective directly. Each training encoder's
full-support features ``R_i [N, K]`` are computed once (float32); one step is one GEMM per
encoder and the library's `multi_space_info_nce`. Onboarding is unchanged: the result is an
anchor set of the same ``"linear"`` kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch
from accelerate import Accelerator
from torch import Tensor

from relrep_hf.functional.losses import multi_space_info_nce
from relrep_hf.functional.shared_linear import full_support_features
from relrep_hf.functional.statistics import Statistics
from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.utils.defaults import DEFAULT_INFO_NCE_TEMPERATURE


@dataclass
class SharedLinearTuningArguments:
    """Fine-tuning settings (InfoNCE temperature as the paper's Table 5)."""

    num_train_epochs: int = 5
    learning_rate: float = 1e-3
    train_batch_size: int = 512
    info_nce_temperature: float = DEFAULT_INFO_NCE_TEMPERATURE
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_train_epochs < 1 or self.train_batch_size < 2 or self.learning_rate <= 0:
            raise ValueError(
                "num_train_epochs >= 1, train_batch_size >= 2 and learning_rate > 0 are needed, "
                f"got {self.num_train_epochs}, {self.train_batch_size}, {self.learning_rate}."
            )


def fine_tune_shared_linear(
    anchor_set: AnchorSet,
    fit_embeddings: Mapping[str, Tensor],
    *,
    support_rows: Tensor | Sequence[int],
    args: SharedLinearTuningArguments | None = None,
) -> AnchorSet:
    """``anchor_set`` (a ``"linear"`` one, e.g. the closed form) with its map fine-tuned by
    InfoNCE on the training encoders' rows ``fit_embeddings`` (row-aligned, two or more)."""
    args = args or SharedLinearTuningArguments()
    if anchor_set.mixing != "linear":
        raise ValueError(
            f"Only a 'linear' anchor set can be fine-tuned, got {anchor_set.mixing!r}: start "
            "from AnchorSet.shared_linear."
        )
    if len(fit_embeddings) < 2:
        raise ValueError("InfoNCE needs at least 2 training encoders.")
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    support_rows = torch.as_tensor(support_rows, dtype=torch.long)
    features = [
        full_support_features(
            space,
            space[support_rows],
            Statistics.from_embeddings(space),
            shrinkage=anchor_set.shrinkage,
            eps=anchor_set.eps,
        )
        .float()
        .to(accelerator.device)
        for space in fit_embeddings.values()
    ]
    u = torch.nn.Parameter(anchor_set.mixture.T.float().clone().to(accelerator.device))
    optimizer = torch.optim.AdamW([u], lr=args.learning_rate, weight_decay=0.0)
    optimizer = accelerator.prepare(optimizer)
    generator = torch.Generator().manual_seed(args.seed)
    n = features[0].shape[0]
    losses = []
    for _ in range(args.num_train_epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n - 1, args.train_batch_size):
            rows = order[start : start + args.train_batch_size].to(accelerator.device)
            if len(rows) < 2:
                continue
            loss = multi_space_info_nce(
                [r[rows] @ u for r in features], temperature=args.info_nce_temperature
            )
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            losses.append(float(loss.detach()))
    mixture = u.detach().cpu().T.contiguous()
    training = {
        **anchor_set.training,
        "fine_tuning": {
            "loss": "info_nce",
            "epochs": args.num_train_epochs,
            "learning_rate": args.learning_rate,
            "batch_size": args.train_batch_size,
            "temperature": args.info_nce_temperature,
            "seed": args.seed,
        },
    }
    metrics = {**anchor_set.metrics, "fine_tuning_loss": {"first": losses[0], "last": losses[-1]}}
    return replace(anchor_set, mixture=mixture, training=training, metrics=metrics, repo_id="",
                   revision="")  # fmt: skip
