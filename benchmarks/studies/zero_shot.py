"""Algorithm 1 on real spaces, at full size: the bundled MiniLM at three layer/pooling settings
trains PARAM, a fourth (the final CLS token) is held out; each held-out sentence's relative
features retrieve the same sentence's features of the other encoder, both directions.

Full size (the former 400-second test, now run at CI size in tests/evaluation/test_zero_shot.py): the
4,192 bundled sentences, the last 1,000 held out, 300 anchors over 2,000 support points, 20
PARAM epochs. Expected: PARAM-WIP mean Recall@1 >= 0.85, Random-Cos at least 0.3 below.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping

from torch import Tensor

from benchmarks.common import row
from benchmarks.spaces.groups import group_needs, load_group
from relrep_hf import ParamTrainingArguments
from relrep_hf.encoding import EncoderSpec
from relrep_hf.evaluation import ALGORITHM_1, EncoderData, ZeroShotStitching
from relrep_hf.functional import retrieval_metrics

SOURCES = ("minilm:mean:-1", "minilm:mean:4", "minilm:mean:2")
HELD_OUT = "minilm:cls:-1"
FULL = {"test_rows": 1000, "num_anchors": 300, "support_size": 2000, "num_train_epochs": 20}
QUICK = {"test_rows": 100, "num_anchors": 30, "support_size": 200, "num_train_epochs": 5}


def held_out_recall(
    spaces: Mapping[str, Tensor],
    held_out: str,
    *,
    test_rows: int,
    args: ParamTrainingArguments,
) -> dict[str, list[float]]:
    """``{method: [Recall@1, ...]}`` of every (source, held-out) pair in both directions on the
    last ``test_rows`` rows; PARAM is fitted on the other rows of every space but ``held_out``
    (the spaces in their order, ``held_out`` last)."""
    data = {
        name: EncoderData(x[:-test_rows], None, x[-test_rows:], None, parallel=x[:-test_rows])
        for name, x in spaces.items()
    }
    stitching = ZeroShotStitching(data, args=args)
    recall: dict[str, list[float]] = {}
    for method in ALGORITHM_1:
        test = {
            name: stitching.features(method, name, source=name, target=held_out)[1]
            for name in spaces
        }
        recall[method.name] = [
            retrieval_metrics(a, b)["recall@1"]
            for name in spaces
            if name != held_out
            for a, b in ((test[name], test[held_out]), (test[held_out], test[name]))
        ]
    return recall


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
