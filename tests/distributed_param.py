"""Run by test_param_trainer under ``torchrun --nproc_per_node 2``: trains and saves."""

import sys

import torch

from relrep_hf import ParamTrainer, ParamTrainingArguments
from tests.synthetic import affine_spaces


def main(output_dir: str) -> None:
    spaces = affine_spaces(("e0", "e1", "e2"), n=1000, d=8)
    args = ParamTrainingArguments(
        output_dir,
        num_anchors=16,
        support_size=300,
        num_train_epochs=3,
        train_batch_size=250,
        save_strategy="no",
        disable_tqdm=True,
    )
    ParamTrainer(args, spaces).train()
    torch.distributed.destroy_process_group() if torch.distributed.is_initialized() else None


if __name__ == "__main__":
    main(sys.argv[1])
