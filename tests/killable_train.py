"""Train PARAM with a checkpoint at every epoch; ``tests/test_reliability.py`` SIGKILLs it after
its first checkpoint and runs it again with ``--resume``.

    python tests/killable_train.py OUTPUT_DIR [--resume]
"""

from __future__ import annotations

import sys

import torch

from relrep_hf import AnchorSet, ParamTrainer, ParamTrainingArguments
from tests.synthetic import affine_spaces

EPOCHS = 30
STEPS_PER_EPOCH = 8  # 2,000 rows in global batches of 250


def train(output_dir: str, resume: bool = False) -> AnchorSet:
    """The same run every time (seed 42); resumes from the last complete checkpoint if asked."""
    torch.set_num_threads(1)  # the same arithmetic in every run (and safe in a forked child)
    spaces = affine_spaces(("e0", "e1", "e2"), n=2000, d=16)
    args = ParamTrainingArguments(
        output_dir,
        num_anchors=32,
        support_size=600,
        num_train_epochs=EPOCHS,
        train_batch_size=250,
        save_strategy="epoch",
        save_total_limit=2,
        disable_tqdm=True,
    )
    return ParamTrainer(args, spaces).train(resume_from_checkpoint=True if resume else None)


if __name__ == "__main__":
    train(sys.argv[1], resume="--resume" in sys.argv[2:])
