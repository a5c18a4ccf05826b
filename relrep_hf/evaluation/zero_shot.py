"""Zero-shot stitching: the paper's Algorithm 1, and cross-encoder retrieval.

A test encoder t never takes part in fitting the anchors; every encoder's projector is built
from the anchor set (no gradient step); a classifier trained on a source encoder s's relative
features is evaluated, unchanged, on t's. `ZeroShotStitching` does this for any set of
encoders, each with its own labelled rows and its embeddings of one parallel support set (for
one dataset seen by every encoder, `zero_shot_classification`); every anchor set, relative
feature and head is computed once. A column of the result is a `Method`: where its anchors come
from and which similarity it uses. The steps it composes (projectors, PARAM fits, heads, F1,
and `retrieval_matrix`, which measures how well relative spaces line up without any classifier:
the paper's Table 3) are `stitching_steps`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from relrep_hf.anchors.param.arguments import ParamTrainingArguments
from relrep_hf.encoding.progress import progress_bar
from relrep_hf.evaluation.stitching_steps import (
    head_f1,
    standardize,
    train_classifier,
    train_param_anchors,
)
from relrep_hf.functional.anchor_strategies import sample_support_rows
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.functional.similarities import get_similarity
from relrep_hf.functional.statistics import Statistics
from relrep_hf.models.anchor_set import AnchorSet
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.models.modeling_relative_projector import RelativeProjector
from relrep_hf.utils.defaults import DEFAULT_HEAD_EPOCHS


@dataclass
class EncoderData:
    """One encoder's embeddings: its own train / test inputs (labels for classification), and
    the parallel set.

    When every encoder sees the same inputs, ``parallel`` may simply be ``train``. Across
    languages each encoder reads its own reviews (``train``, ``test``) and only the translated
    ``parallel`` sentences are row-aligned across encoders. Whitening statistics come from
    ``train``.
    """

    train: Tensor  # [N_train, d]
    train_labels: Tensor | None  # [N_train]
    test: Tensor  # [N_test, d]
    test_labels: Tensor | None  # [N_test]
    parallel: Tensor  # [N_parallel, d], row i is the same input (or its translation) everywhere


AnchorSource = Literal["random", "held_out", "source"]


@dataclass
class Method:
    """One column of a zero-shot table: its name, its anchors and its similarity.

    ``anchors``: ``"held_out"`` PARAM fitted on every encoder but the test encoder (Algorithm
    1; the paper's PARAM Multi); ``"source"`` PARAM fitted on the classifier's encoder alone
    (PARAM Single); ``"random"`` random support points (Moschella et al.); or a given
    `AnchorSet`, or given projectors ``{encoder: RelativeProjector}``. ``similarity=None``: the
    anchor set's own.
    """

    name: str
    anchors: AnchorSource | AnchorSet | Mapping[str, RelativeProjector]
    similarity: str | None = "wip"


ALGORITHM_1 = (Method("PARAM-WIP", "held_out"), Method("Random-Cos", "random", "cosine"))
PAPER_TABLE_1 = (
    Method("Random-Cos", "random", "cosine"),
    Method("PARAM Multi", "held_out"),
    Method("PARAM Single", "source"),
)


class ZeroShotStitching:
    """Algorithm 1 over several encoders; anchor sets, relative features and heads on demand,
    each computed once.

    Args:
        data: ``{encoder: EncoderData}``; the parallel sets must have the same rows.
        args: PARAM's arguments (anchors, support size, seed) for the methods whose anchors are
            fitted or drawn here.
        support: which parallel rows form the support set (default: ``args.support_size`` rows
            drawn with ``args.seed``, as `ParamTrainer` draws them).
        seed: the heads' seed (default ``args.seed``, else 0).
        head_epochs: epochs of every linear head.
        num_labels: the heads' classes (default: the largest train label + 1).
        head_config: extra `RelativeHeadConfig` fields of every head (``id2label``, ...).
        progress: called with a line before each PARAM fit.
    """

    def __init__(
        self,
        data: Mapping[str, EncoderData],
        *,
        args: ParamTrainingArguments | None = None,
        support: Tensor | Sequence[int] | None = None,
        seed: int | None = None,
        head_epochs: int = DEFAULT_HEAD_EPOCHS,
        num_labels: int | None = None,
        head_config: Mapping[str, Any] | None = None,
        progress: Callable[[str], None] | None = None,
    ):
        self.data, self.names = dict(data), list(data)
        if len(self.names) < 2:
            raise ValueError(f"Zero-shot stitching needs at least 2 encoders, got {self.names}.")
        sizes = {len(d.parallel) for d in self.data.values()}
        if len(sizes) != 1:
            raise ValueError(
                f"The parallel sets must have the same rows for every encoder: {sorted(sizes)}."
            )
        self.args = args
        if support is None:
            if args is None:
                raise ValueError("Give the support rows, or ParamTrainingArguments to draw them.")
            support = sample_support_rows(sizes.pop(), args.support_size, args.seed)
        self.support = torch.as_tensor(support, dtype=torch.long)
        self.seed = seed if seed is not None else args.seed if args is not None else 0
        self.head_epochs, self.head_config = head_epochs, dict(head_config or {})
        self.progress = progress or (lambda line: None)
        labels = [d.train_labels for d in self.data.values() if d.train_labels is not None]
        self.num_labels = num_labels or (max(int(t.max()) for t in labels) + 1 if labels else 0)
        self.statistics = {n: Statistics.from_embeddings(d.train) for n, d in self.data.items()}
        self._anchor_sets: dict[tuple, AnchorSet] = {}
        self._features: dict[tuple, tuple[Tensor, Tensor]] = {}
        self._heads: dict[tuple, RelativeHeadForClassification] = {}

    def _scope(self, method: Method, source: str, target: str) -> tuple:
        """What the method's anchors depend on: nothing, the test or the source encoder."""
        if method.anchors == "held_out":
            return ("held_out", target)
        if method.anchors == "source":
            return ("source", source)
        if method.anchors == "random":
            return ("random",)
        return ("given", method.name)

    def anchor_set(self, method: Method, source: str, target: str) -> AnchorSet | None:
        """The anchor set the method uses for classifier ``source`` and test encoder ``target``
        (``None`` for given projectors)."""
        if not isinstance(method.anchors, str):
            return method.anchors if isinstance(method.anchors, AnchorSet) else None
        key = self._scope(method, source, target)
        if key not in self._anchor_sets:
            if self.args is None:
                raise ValueError(f"Method {method.name!r} needs ParamTrainingArguments.")
            if key[0] == "random":
                support = [{"index": int(i)} for i in self.support]
                anchors = AnchorSet.random(support, self.args.num_anchors, seed=self.args.seed)
            else:
                fitted_on = (
                    [n for n in self.names if n != target] if key[0] == "held_out" else [source]
                )
                self.progress(f"  PARAM on {', '.join(fitted_on)}")
                spaces = {n: self.data[n].parallel for n in fitted_on}
                anchors = train_param_anchors(self.args, spaces, self.support)
            self._anchor_sets[key] = anchors
        return self._anchor_sets[key]

    def features(
        self, method: Method, encoder: str, *, source: str, target: str
    ) -> tuple[Tensor, Tensor]:
        """``encoder``'s relative features (train rows, test rows) under the anchors the method
        uses for classifier ``source`` and test encoder ``target``."""
        key = (*self._scope(method, source, target), method.similarity, encoder)
        if key not in self._features:
            data = self.data[encoder]
            if isinstance(method.anchors, Mapping):
                projector = method.anchors[encoder]
            else:
                anchor_set = self.anchor_set(method, source, target)
                similarity = method.similarity or anchor_set.similarity_settings["similarity"]
                statistics = self.statistics[encoder]
                projector = RelativeProjector.from_anchor_set(
                    anchor_set,
                    data.parallel[self.support],
                    statistics if get_similarity(similarity).needs_statistics else None,
                    similarity=similarity,
                )
            with torch.no_grad():
                self._features[key] = (projector(data.train), projector(data.test))
        return self._features[key]

    def head(self, method: Method, source: str, target: str) -> RelativeHeadForClassification:
        """The linear head trained on ``source``'s relative features of its train rows."""
        key = (*self._scope(method, source, target), method.similarity, source)
        if key not in self._heads:
            features = self.features(method, source, source=source, target=target)[0]
            self._heads[key] = self._train(features, self.data[source].train_labels)
        return self._heads[key]

    def _train(self, features: Tensor, labels: Tensor | None) -> RelativeHeadForClassification:
        if labels is None:
            raise ValueError("Classification needs train labels for every encoder.")
        with torch.enable_grad():  # also when asked for from inside torch.no_grad()
            return train_classifier(
                features,
                labels,
                num_labels=self.num_labels,
                seed=self.seed,
                epochs=self.head_epochs,
                **self.head_config,
            )

    def f1(self, method: Method, source: str, target: str) -> float:
        """Weighted F1 of ``source``'s head on ``target``'s relative features of its test rows."""
        test = self.features(method, target, source=source, target=target)[1]
        return head_f1(self.head(method, source, target), test, self.data[target].test_labels)

    def absolute_head(self, name: str) -> RelativeHeadForClassification:
        """A head on ``name``'s own absolute training embeddings, standardized with their mean
        and std (`standardize`); trained once."""
        key = ("absolute", name)
        if key not in self._heads:
            data = self.data[name]
            (train,) = standardize(data.train)
            self._heads[key] = self._train(train, data.train_labels)
        return self._heads[key]

    def absolute_f1(self, target: str) -> float:
        """Weighted F1 of a head on ``target``'s own (standardized) absolute embeddings."""
        data = self.data[target]
        _, test = standardize(data.train, data.test)
        return head_f1(self.absolute_head(target), test, data.test_labels)

    def retrieval(
        self, method: Method, source: str, target: str, *, ks: Sequence[int] = (1, 5)
    ) -> dict[str, float]:
        """``source``'s relative features of the test rows retrieve ``target``'s by cosine."""
        queries = self.features(method, source, source=source, target=target)[1]
        keys = self.features(method, target, source=source, target=target)[1]
        return retrieval_metrics(queries, keys, ks=tuple(ks))

    def classification(
        self,
        methods: Sequence[Method] = ALGORITHM_1,
        *,
        targets: Iterable[str] | None = None,
        keys: tuple[str, str] = ("encoder", "classifier"),
        show_progress: bool | None = None,
    ) -> list[dict[str, Any]]:
        """The rows of the paper's Table 1: for every test encoder t (``targets``, default all)
        and classifier s, each method's weighted F1, and ``"Abs."`` (t's absolute head) on the
        diagonal. Rows are ``{keys[0]: t, keys[1]: s, "Abs.", method names...}``. A progress bar
        over the rows (each trains the heads it needs the first time): ``show_progress`` True
        at once, False never, None once it has taken a few seconds."""
        targets = list(targets) if targets is not None else self.names
        unknown = [t for t in targets if t not in self.data]
        if unknown:
            raise ValueError(f"Unknown test encoder(s) {unknown}; the encoders are {self.names}.")
        rows = []
        total = len(targets) * len(self.names)
        with progress_bar(total, show_progress, desc="Classifiers", unit="pair") as bar:
            for target in targets:
                for source in self.names:
                    row: dict[str, Any] = {keys[0]: target, keys[1]: source}
                    if source == target:
                        row["Abs."] = self.absolute_f1(target)
                    for method in methods:
                        row[method.name] = self.f1(method, source, target)
                    rows.append(row)
                    bar.update()
        return rows


def zero_shot_classification(
    embeddings: Mapping[str, Tensor],
    labels: Tensor,
    *,
    train_rows: Tensor,
    test_rows: Tensor,
    args: ParamTrainingArguments,
    test_encoders: Sequence[str] | None = None,
    head_epochs: int = DEFAULT_HEAD_EPOCHS,
) -> list[dict[str, Any]]:
    """Algorithm 1 on one dataset embedded by every encoder: the rows of the paper's Table 1.

    For each test encoder t: PARAM is trained on the other encoders only (``train_rows``, which
    are also the support candidates and whitening rows); every encoder's projector is built
    from the anchor set; a classifier per source encoder s is trained on s's relative features
    and evaluated on t's (``test_rows``). Each row has the weighted F1 of ``"PARAM-WIP"`` and
    ``"Random-Cos"`` (random support points, cosine), and on the diagonal ``"Abs."``.
    """
    train_rows, test_rows = torch.as_tensor(train_rows), torch.as_tensor(test_rows)
    data = {
        name: EncoderData(
            space[train_rows],
            labels[train_rows],
            space[test_rows],
            labels[test_rows],
            parallel=space[train_rows],
        )
        for name, space in embeddings.items()
    }
    stitching = ZeroShotStitching(data, args=args, head_epochs=head_epochs)
    return stitching.classification(ALGORITHM_1, targets=test_encoders)
