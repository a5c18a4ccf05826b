"""Algorithm 1 on real spaces, at full size: the bundled MiniLM at three layer/pooling settings
trains PARAM, a fourth (the final CLS token) is held out; each held-out sentence's relative
features retrieve the same sentence's features of the other encoder, both directions.

Full size (the former 400-second test, now run at CI size in tests/evaluation/test_zero_shot.py): the
4,192 bundled sentences, the last 1,000 held out, 300 anchors over 2,000 support points, 20
PARAM epochs. Expected: PARAM-WIP mean Recall@1 >= 0.85, Random-Cos at least 0.3 below.
"""

from __future__ import annotations

import tempfile

from benchmarks.common import row
from benchmarks.spaces.groups import group_needs, load_group
from relrep_hf import ParamTrainingArguments
from relrep_hf.encoding import EncoderSpec
from tests.fixtures.held_out import held_out_recall

SOURCES = ("minilm:mean:-1", "minilm:mean:4", "minilm:mean:2")
HELD_OUT = "minilm:cls:-1"
FULL = {"test_rows": 1000, "num_anchors": 300, "support_size": 2000, "num_train_epochs": 20}
QUICK = {"test_rows": 50, "num_anchors": 30, "support_size": 100, "num_train_epochs": 5}


def needs(quick: bool) -> dict[str, tuple[str, ...]]:
    """The optional packages this benchmark reads (``""``: the whole of it)."""
    return {"": group_needs("minilm", quick=quick)}


def run(quick: bool = False) -> list[dict]:
    sizes = QUICK if quick else FULL
    group = load_group("minilm", quick=quick)
    names = [EncoderSpec.parse(spec).name for spec in (*SOURCES, HELD_OUT)]
    spaces = {name: group.embeddings[name] for name in names}
    with tempfile.TemporaryDirectory() as folder:
        args = ParamTrainingArguments(
            folder,
            num_anchors=sizes["num_anchors"],
            support_size=sizes["support_size"],
            num_train_epochs=sizes["num_train_epochs"],
            train_batch_size=1024,
            save_strategy="no",
            disable_tqdm=True,
        )
        recall = held_out_recall(spaces, names[-1], test_rows=sizes["test_rows"], args=args)
    means = {method: sum(v) / len(v) for method, v in recall.items()}
    return [
        row(
            "zero-shot R@1 into a held-out MiniLM space",
            "Random-Cos",
            means["Random-Cos"],
            means["PARAM-WIP"],
            "recall@1",
            rows=len(group.texts),
            **sizes,
        )
    ]
