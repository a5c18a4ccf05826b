"""What the field does to make heads transfer, each against the library's head in one process.

On the head-transfer benchmark's folds (`benchmarks.studies.head_transfer`: the verses, the default
anchor set, K fit rows = the head's labelled rows), heads are trained by one plain loop
(`HeadTrainer`'s optimiser and schedule at its defaults: AdamW, lr 3e-3, weight decay 0.01, 10
epochs, batch 64, linear decay), a linear probe on the number of directions chosen for it
(`choose_num_directions`) as the reference, then one change at a time, each scored zero-shot
on the held-out encoder as a fraction of its Abs:

- weight decay 0.1; label smoothing 0.1; 30 epochs;
- a small non-linear head (one hidden layer of 256, GELU, dropout 0.1 and 0.3);
- Gaussian noise on the features (0.5 of each feature's std, drawn per step);
- mixup across encoders: each row's features a random convex mix of the same row in two
  training encoders (multi-source only);
- every direction (m) instead of the chosen number.

    OMP_NUM_THREADS=1 python -m benchmarks head_variants [--ks 1000 4000] [--held-out NAME ...]
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

import torch
from torch import Tensor, nn

from benchmarks.spaces.head_spaces import verse_spaces
from benchmarks.studies.head_transfer import HELD_OUT, NUM_ANCHORS, TEST_ROWS, abs_f1, relative
from relrep_hf import (
    AnchorSet,
    HeadTrainingArguments,
    RelativeHeadConfig,
    RelativeHeadForClassification,
)
from relrep_hf.functional import weighted_f1
from relrep_hf.training.head_directions import choose_num_directions

DEFAULTS = HeadTrainingArguments("unused")
VARIANTS: dict[str, dict] = {
    "linear probe (reference)": {},
    "weight decay 0.1": {"weight_decay": 0.1},
    "label smoothing 0.1": {"label_smoothing": 0.1},
    "30 epochs": {"epochs": 30},
    "MLP 256, dropout 0.1": {"hidden": [256], "dropout": 0.1},
    "MLP 256, dropout 0.3": {"hidden": [256], "dropout": 0.3},
    "feature noise 0.5 std": {"noise": 0.5},
    "mixup across encoders": {"mixup": True},
    "every direction (m)": {"all_directions": True},
}


def fit_head(features: list[Tensor], labels: Tensor, r: int, m: int, *, seed: int = 0,
             weight_decay: float = DEFAULTS.weight_decay, label_smoothing: float = 0.0,
             epochs: int = DEFAULTS.num_train_epochs, hidden: list | None = None,
             dropout: float = 0.1, noise: float = 0.0, mixup: bool = False,
             all_directions: bool = False) -> RelativeHeadForClassification:  # fmt: skip
    """A head on ``features`` (one tensor per source encoder, the same rows) with one change."""
    torch.manual_seed(seed)
    config = RelativeHeadConfig(
        num_anchors=m, num_labels=int(labels.max()) + 1, hidden_sizes=hidden or [],
        dropout=dropout, num_directions=None if all_directions else r,
    )  # fmt: skip
    head = RelativeHeadForClassification(config)
    decay = [p for n, p in head.named_parameters() if n.endswith("weight") and p.ndim == 2]
    rest = [p for n, p in head.named_parameters() if not (n.endswith("weight") and p.ndim == 2)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}],
        lr=DEFAULTS.learning_rate,
    )
    stacked = torch.stack(features)  # (E, N, m)
    sources, n = stacked.shape[0], stacked.shape[1]
    rows = n if mixup else sources * n
    batch = DEFAULTS.per_device_train_batch_size
    steps = epochs * -(-rows // batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / steps)
    scale = stacked.reshape(-1, m).std(dim=0)
    generator = torch.Generator().manual_seed(seed)
    head.train()
    for _ in range(epochs):
        for index in torch.randperm(rows, generator=generator).split(batch):
            if mixup:  # the same rows through two random training encoders, mixed
                pick = torch.randint(sources, (2, len(index)), generator=generator)
                weight = torch.rand(len(index), 1, generator=generator)
                x = weight * stacked[pick[0], index] + (1 - weight) * stacked[pick[1], index]
                y = labels[index]
            else:
                x, y = stacked[index // n, index % n], labels[index % n]
            if noise:
                x = x + noise * scale * torch.randn(x.shape, generator=generator)
            logits = head.logits_of(x)
            loss = nn.functional.cross_entropy(logits, y, label_smoothing=label_smoothing)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(head.parameters(), DEFAULTS.max_grad_norm)
            optimizer.step()
            schedule.step()
    return head.eval()


def fold(ls, held: str, k: int) -> dict[str, dict[str, float]]:
    """``{variant: {"multi", "single mean"}}`` as fractions of Abs, and the chosen number."""
    spaces, y = ls.spaces, ls.labels
    n = len(y)
    fit, test = torch.arange(k), torch.arange(n - min(TEST_ROWS, n // 4), n)
    sources = [s for s in spaces if s != held]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        anchor_set = AnchorSet.shared_linear(
            [{"index": int(i)} for i in fit], {s: spaces[s][fit] for s in sources},
            NUM_ANCHORS, support_rows=fit,
        )  # fmt: skip
    train = relative(anchor_set, spaces, fit, fit, fit)
    held_test = relative(anchor_set, {held: spaces[held]}, fit, fit, test)[held]
    m = anchor_set.num_anchors
    config = RelativeHeadConfig(num_anchors=m, num_labels=int(y.max()) + 1)
    r, _ = choose_num_directions(
        config, {s: train[s] for s in sources}, y[fit], training=DEFAULTS.to_dict()
    )
    reference = abs_f1(spaces[held], y, fit, test)

    def score(head) -> float:
        with torch.no_grad():
            predicted = head.logits_of(held_test).argmax(dim=-1)
        return weighted_f1(predicted, y[test]) / reference

    out = {"chosen": r, "Abs": reference}
    for name, change in VARIANTS.items():
        multi = score(fit_head([train[s] for s in sources], y[fit], r, m, **change))
        singles = []
        if not change.get("mixup"):
            singles = [score(fit_head([train[s]], y[fit], r, m, **change)) for s in sources]
        out[name] = {"multi": multi, "single mean": mean(singles) if singles else float("nan")}
        print(f"    {held} K={k} {name}: multi {multi:.3f}, single mean "
              f"{out[name]['single mean']:.3f} (r={r})", flush=True)  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks head_variants", description=__doc__)
    parser.add_argument("--ks", type=int, nargs="*", default=[1000, 4000])
    parser.add_argument("--held-out", nargs="*", default=list(HELD_OUT["verses"]))
    parser.add_argument("--encoders", nargs="*", default=None, help="a subset of the verses'")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    ls = verse_spaces(encoders=tuple(args.encoders) if args.encoders else None)
    results = {}
    for k in args.ks:
        folds = [fold(ls, held, k) for held in args.held_out]
        results[k] = {
            name: {key: mean(f[name][key] for f in folds) for key in ("multi", "single mean")}
            for name in VARIANTS
        }
        results[k]["chosen"] = [f["chosen"] for f in folds]
        for name in VARIANTS:
            s = results[k][name]
            print(f"  K={k} {name}: multi {s['multi']:.3f}, single mean {s['single mean']:.3f} "
                  f"of Abs", flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
