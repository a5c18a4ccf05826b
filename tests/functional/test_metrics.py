"""Metrics: hand-computed cases, literal references, sklearn, and the offline evaluate modules."""

from __future__ import annotations

import os

os.environ["HF_EVALUATE_OFFLINE"] = (
    "1"  # before evaluate is imported (by relrep_hf.functional.metric_modules)
)

import math
import socket
import subprocess
import sys

import evaluate
import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score, r2_score

from relrep_hf.functional import metrics
from relrep_hf.functional.metrics import (
    accuracy,
    mean_reciprocal_rank,
    normalized_mse,
    recall_at_k,
    retrieval_metrics,
    retrieval_ranks,
    rr_std,
    weighted_f1,
)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a metric tried to open a network connection")

    monkeypatch.setattr(evaluate.config, "HF_EVALUATE_OFFLINE", True)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def parallel_spaces(n: int = 40, m: int = 6, noise: float = 0.7, seed: int = 0):
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(n, m)).astype(np.float32)
    queries = (keys + noise * rng.normal(size=(n, m))).astype(np.float32)
    return queries, keys


def ranks_literal(queries: np.ndarray, keys: np.ndarray) -> list[int]:
    def cos(u: np.ndarray, v: np.ndarray) -> float:
        return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))

    n = len(queries)
    out = []
    for i in range(n):
        true = cos(queries[i], keys[i])
        out.append(1 + sum(cos(queries[i], keys[j]) >= true for j in range(n) if j != i))
    return out


# -------------------------------------------------------------------------- retrieval

TIE_KEYS = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8]]  # key 2 duplicates key 0
TIE_QUERIES = [[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 1.0]]
TIE_RANKS = [2, 1, 2, 2]  # q0, q2 tie with the duplicate; q3 is beaten by key 1


def test_ranks_by_hand_with_pessimistic_ties() -> None:
    ranks = retrieval_ranks(TIE_QUERIES, TIE_KEYS)
    assert ranks.dtype == torch.long
    assert ranks.tolist() == TIE_RANKS
    assert recall_at_k(ranks, 1) == 0.25
    assert recall_at_k(ranks, 2) == 1.0
    assert mean_reciprocal_rank(ranks) == pytest.approx((0.5 + 1 + 0.5 + 0.5) / 4, abs=1e-15)


def test_identical_keys_give_worst_rank_for_everyone() -> None:
    ones = [[1.0, 2.0]] * 5
    assert retrieval_ranks(ones, ones).tolist() == [5] * 5


def test_ranks_match_literal_definition() -> None:
    queries, keys = parallel_spaces(n=30)
    keys[7] = keys[3]  # a duplicate to exercise ties
    assert retrieval_ranks(queries, keys).tolist() == ranks_literal(queries, keys)


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 40, 10_000])
def test_chunked_ranks_equal_unchunked(chunk_size: int) -> None:
    queries, keys = parallel_spaces(n=40)
    full = retrieval_ranks(queries, keys, chunk_size=40)
    assert torch.equal(retrieval_ranks(queries, keys, chunk_size=chunk_size), full)


def test_recall_and_mrr_by_hand() -> None:
    ranks = [1, 3, 2, 10]
    assert recall_at_k(ranks, 1) == 0.25
    assert recall_at_k(ranks, 2) == 0.5
    assert recall_at_k(ranks, 3) == 0.75
    assert recall_at_k(ranks, 100) == 1.0
    assert mean_reciprocal_rank(ranks) == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 10) / 4)
    assert mean_reciprocal_rank(torch.tensor([1, 1])) == 1.0


def test_retrieval_metrics_dict() -> None:
    out = retrieval_metrics(TIE_QUERIES, TIE_KEYS, ks=(1, 2, 3))
    assert out == {"recall@1": 0.25, "recall@2": 1.0, "recall@3": 1.0, "mrr": 0.625}
    assert list(retrieval_metrics(TIE_QUERIES, TIE_KEYS)) == ["recall@1", "recall@5", "mrr"]


def test_retrieval_validation() -> None:
    with pytest.raises(ValueError, match="shape"):
        retrieval_ranks(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="chunk_size"):
        retrieval_ranks(np.ones((3, 2)), np.ones((3, 2)), chunk_size=0)
    with pytest.raises(ValueError, match="NaN"):
        retrieval_ranks(np.full((3, 2), np.nan), np.ones((3, 2)))
    with pytest.raises(ValueError, match="rectangular"):
        retrieval_ranks([[1.0, 2.0], [1.0]], [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match="positive int"):
        recall_at_k([1, 2], 0)
    with pytest.raises(ValueError, match=">= 1"):
        mean_reciprocal_rank([0, 1])
    with pytest.raises(ValueError, match="positive ints"):
        retrieval_metrics(TIE_QUERIES, TIE_KEYS, ks=(1, -5))


# -------------------------------------------------------------------------- alignment


def test_normalized_mse_literal_and_sklearn() -> None:
    a, b = parallel_spaces(n=25, m=4, seed=1)
    a, b = a.astype(np.float64), b.astype(np.float64)
    n, m = b.shape
    mse = sum((a[i, r] - b[i, r]) ** 2 for i in range(n) for r in range(m)) / (n * m)
    means = [sum(b[i, r] for i in range(n)) / n for r in range(m)]
    var = sum(sum((b[i, r] - means[r]) ** 2 for i in range(n)) / n for r in range(m)) / m
    assert normalized_mse(a, b) == pytest.approx(mse / var, rel=1e-12)
    assert normalized_mse(a, b) == pytest.approx(
        1.0 - r2_score(b, a, multioutput="variance_weighted"), rel=1e-12
    )


def test_normalized_mse_reference_points() -> None:
    _, b = parallel_spaces(n=30, m=5, seed=2)
    b = b.astype(np.float64)
    assert normalized_mse(b, b) == 0.0
    mean_predictor = np.broadcast_to(b.mean(axis=0), b.shape)
    assert normalized_mse(mean_predictor, b) == pytest.approx(1.0, rel=1e-12)
    a, _ = parallel_spaces(n=30, m=5, seed=3)
    assert normalized_mse(3.0 * a, 3.0 * b) == pytest.approx(normalized_mse(a, b), rel=1e-6)
    with pytest.raises(ValueError, match="constant"):
        normalized_mse(a, np.ones_like(a))


def test_rr_std_literal() -> None:
    x, _ = parallel_spaces(n=20, m=3, seed=4)
    x = x.astype(np.float64) + np.array([10.0, -5.0, 0.0])  # per-anchor offsets do not count
    n, m = x.shape
    stds = []
    for r in range(m):
        mean = sum(x[i, r] for i in range(n)) / n
        stds.append(math.sqrt(sum((x[i, r] - mean) ** 2 for i in range(n)) / n))
    assert rr_std(x) == pytest.approx(sum(stds) / m, rel=1e-12)
    assert rr_std(np.ones((4, 3))) == 0.0


# ---------------------------------------------------------------------- classification


@pytest.mark.parametrize("seed", range(5))
def test_weighted_f1_and_accuracy_match_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    refs = rng.integers(0, 6, size=50)
    preds = np.where(rng.random(50) < 0.6, refs, rng.integers(0, 8, size=50))  # 6, 7 unseen
    refs[:2] = 9  # a class that is never predicted
    assert weighted_f1(preds, refs) == pytest.approx(
        f1_score(refs, preds, average="weighted", zero_division=0), abs=1e-12
    )
    assert accuracy(preds, refs) == pytest.approx(accuracy_score(refs, preds), abs=1e-12)


def test_weighted_f1_by_hand_with_strings_and_tensors() -> None:
    # class a: tp 1, support 2, predicted 1 -> F1 2/3; class b: support 0 -> weight 0
    assert weighted_f1(["a", "b"], ["a", "a"]) == pytest.approx(2 / 3)
    assert weighted_f1(torch.tensor([1, 1, 2]), torch.tensor([1, 1, 2])) == 1.0
    assert accuracy(torch.tensor([0, 1]), [0, 0]) == 0.5
    with pytest.raises(ValueError, match="2 predictions but 3 references"):
        weighted_f1([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="empty"):
        accuracy([], [])


# --------------------------------------------------------------------- evaluate modules


@pytest.mark.slow
def test_the_pure_functions_import_neither_evaluate_nor_transformers() -> None:
    """`evaluate` imports transformers' pipelines (seconds in every migration or training
    process that computes a Recall@k): the evaluate modules are imported on first use."""
    code = (
        "import sys\n"
        "from relrep_hf.functional.metrics import retrieval_metrics\n"
        "print(sorted(m for m in ('evaluate', 'transformers', 'datasets') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "[]"
    assert metrics.Retrieval.__module__ == "relrep_hf.functional.metric_modules"


def test_load_names_and_errors() -> None:
    assert metrics.available_metrics() == ["relative_alignment", "retrieval", "weighted_f1"]
    for name in metrics.available_metrics():
        module = metrics.load(name, keep_in_memory=True)
        assert module.name == name
        assert "arXiv:2605.30596" in module.citation
        assert module.description
    with pytest.raises(ValueError, match="Unknown metric 'accuracy'"):
        metrics.load("accuracy")


def test_retrieval_module_equals_pure_function(no_network: None, tmp_path) -> None:
    queries, keys = parallel_spaces(n=40)
    module = metrics.load("retrieval", cache_dir=str(tmp_path))  # file-backed, as by default
    got = module.compute(predictions=queries.tolist(), references=keys.tolist(), ks=[1, 5, 10])
    assert got == retrieval_metrics(queries, keys, ks=(1, 5, 10))
    assert set(got) == {"recall@1", "recall@5", "recall@10", "mrr"}


def test_retrieval_module_accumulates_batches(no_network: None) -> None:
    queries, keys = parallel_spaces(n=40)
    module = metrics.load("retrieval", keep_in_memory=True)
    for start in range(0, 40, 15):
        module.add_batch(
            predictions=queries[start : start + 15], references=keys[start : start + 15]
        )
    got = module.compute(ks=[1, 3], chunk_size=7)
    assert got == retrieval_metrics(queries, keys, ks=(1, 3))


def test_relative_alignment_module(no_network: None) -> None:
    a, b = parallel_spaces(n=30, m=4, seed=5)
    module = metrics.load("relative_alignment", keep_in_memory=True)
    module.add_batch(predictions=a[:10], references=b[:10])
    module.add_batch(predictions=a[10:].tolist(), references=b[10:].tolist())
    got = module.compute()
    assert got == {
        "normalized_mse": normalized_mse(a, b),
        "rr_std": rr_std(a),
        "reference_rr_std": rr_std(b),
    }


def test_weighted_f1_module(no_network: None) -> None:
    rng = np.random.default_rng(6)
    refs = rng.integers(0, 4, size=30)
    preds = np.where(rng.random(30) < 0.5, refs, rng.integers(0, 4, size=30))
    module = metrics.load("weighted_f1", keep_in_memory=True)
    for start in range(0, 30, 8):
        module.add_batch(predictions=preds[start : start + 8], references=refs[start : start + 8])
    assert module.compute() == {
        "weighted_f1": weighted_f1(preds, refs),
        "accuracy": accuracy(preds, refs),
    }
    strings = metrics.load("weighted_f1", keep_in_memory=True)
    assert strings.compute(predictions=["cat", "dog"], references=["cat", "cat"]) == {
        "weighted_f1": pytest.approx(2 / 3),
        "accuracy": 0.5,
    }


def test_module_reports_bad_inputs() -> None:
    module = metrics.load("retrieval", keep_in_memory=True)
    with pytest.raises(ValueError, match="shape"):
        module.compute(predictions=[[1.0, 2.0]] * 3, references=[[1.0, 2.0, 3.0]] * 3)
