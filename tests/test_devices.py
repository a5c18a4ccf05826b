"""Every public entry point takes tensors on any device and computes there (issue #38).

Each test takes the ``device`` fixture (tests/conftest.py: ``cpu`` everywhere, ``cuda`` where a
GPU is), builds its inputs on that device, runs the entry point, and checks that the results
are on that device and equal, to float tolerance, to the same call on CPU float64 inputs. In CI
the ``cpu`` runs; on a GPU machine the same bodies run on CUDA. The code has no branch on the
device except where a kernel exists on the CPU only (`test_device_branches_are_the_kernels_own`),
and the other side of each such branch runs on the CPU too, so the CPU run exercises every line
a GPU run does. Mixed devices get a `DeviceMismatchError` naming both (tests/fixtures/
device_inputs.py runs each case for docs/bad_inputs.md; `test_mixed_devices_name_both` here).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from relrep_hf import (
    AnchorSet,
    HeadTrainer,
    HeadTrainingArguments,
    ParamTrainer,
    ParamTrainingArguments,
    RelativeHeadConfig,
    RelativeHeadForClassification,
    RelativeProjector,
    RelativeWrapper,
    Statistics,
    translate,
)
from relrep_hf.anchors.shared_linear.trainer import (
    SharedLinearTuningArguments,
    fine_tune_shared_linear,
)
from relrep_hf.functional import relative_projection, whitening_matrix
from relrep_hf.functional.least_squares import fit_affine, fit_procrustes, pseudo_inverse_solve
from relrep_hf.functional.metrics import retrieval_metrics
from relrep_hf.functional.regularization import top_eigenpairs
from relrep_hf.functional.statistics import blocked_gram, symmetric_gram
from relrep_hf.training.head_directions import choose_num_directions
from relrep_hf.training.head_trainer import train_in_memory
from relrep_hf.translation.inverse import invert, relative_inverse
from relrep_hf.translation.translator import LatentTranslator, evaluate_translation, translation_map
from relrep_hf.utils.validation import DeviceMismatchError
from tests.fixtures.synthetic import affine_spaces

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PACKAGE = Path(__file__).resolve().parents[1] / "relrep_hf"
SPACES = affine_spaces(("e0", "e1", "e2"), n=120, d=6, seed=3)  # float32, on the CPU
SUPPORT = [f"input {i}" for i in range(24)]  # rows 0..23 of SPACES
LABELS = (SPACES["e0"][:, 0] > SPACES["e0"][:, 0].median()).long()


def on(device: torch.device, dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    return {name: x.to(device, dtype) for name, x in SPACES.items()}


def assert_on(device: torch.device, *tensors: torch.Tensor) -> None:
    for tensor in tensors:
        assert tensor.device.type == device.type, f"on {tensor.device}, expected {device}"


def assert_same(actual: torch.Tensor, expected: torch.Tensor, **tolerance: float) -> None:
    torch.testing.assert_close(actual.detach().cpu().double(), expected.detach().double().cpu(),
                               **tolerance)  # fmt: skip


def test_statistics(device):
    x = on(device)["e0"]
    stats = Statistics.from_embeddings(x, batch_size=50)
    halves = Statistics.from_embeddings(x[:70]) + Statistics.from_embeddings(x[70:])
    streamed = Statistics.empty(6).update(x[:30]).update(x[30:])  # empty: on the CPU
    expected = Statistics.from_embeddings(SPACES["e0"].double())
    for result in (stats, halves, streamed):
        assert_on(device, result.mean, result.scatter)
        assert result.count == expected.count
        assert_same(result.mean, expected.mean)
        assert_same(result.scatter, expected.scatter)
    whitening = whitening_matrix(stats)
    assert_on(device, whitening)
    assert_same(whitening, whitening_matrix(expected))
    assert_on(device, expected.to(device).mean)


def test_relative_projection(device):
    x = on(device)["e0"]
    stats = Statistics.from_embeddings(x)
    features = relative_projection(x, x[:5], mean=stats.mean, whitening=whitening_matrix(stats))
    expected_stats = Statistics.from_embeddings(SPACES["e0"].double())
    expected = relative_projection(SPACES["e0"].double(), SPACES["e0"][:5].double(),
                                   mean=expected_stats.mean,
                                   whitening=whitening_matrix(expected_stats))  # fmt: skip
    assert_on(device, features)
    assert_same(features, expected)


def test_projector_from_statistics_and_its_forward(device):
    x = on(device, torch.float32)["e1"]
    projector = RelativeProjector.from_statistics(x[:5], Statistics.from_embeddings(x))
    assert_on(device, projector.weight, projector.mean, projector.anchors)
    features = projector(x)
    expected = RelativeProjector.from_statistics(
        SPACES["e1"][:5].double(), Statistics.from_embeddings(SPACES["e1"].double())
    )(SPACES["e1"].double())
    assert_on(device, features)
    assert_same(features, expected, rtol=1e-4, atol=1e-4)  # float32 inputs, float64 reference
    numpy_features = projector(SPACES["e1"].numpy())  # an array has no device: the projector's
    assert_on(device, numpy_features)


def test_projector_refuses_nan_on_every_device(device):
    """NaN in the features is an error on every device: at the call on the CPU, at
    `check_finite` on a GPU (the forward does not wait for the device, issue #48)."""
    x = on(device, torch.float32)["e1"]
    projector = RelativeProjector.from_statistics(x[:5], Statistics.from_embeddings(x))
    bad = x[:6].clone()
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or Inf"):
        projector(bad)
        projector.check_finite()
    assert_on(device, projector(x[:6]))
    projector.check_finite()  # the record was emptied by the error


def anchor_set_of(method: str, spaces: dict[str, torch.Tensor]) -> AnchorSet:
    """The anchor set of ``method`` fitted on encoders e0 and e1 (support: rows 0..23)."""
    training = {"e0": spaces["e0"], "e1": spaces["e1"]}
    support = [x[:24] for x in training.values()]
    if method == "shared_linear":  # the default shrinkage: chosen by cross-validation
        return AnchorSet.shared_linear(SUPPORT, training, 5, support_rows=range(24))
    if method == "kmeans":
        return AnchorSet.kmeans(SUPPORT, support, 5, seed=1)
    if method == "farthest_point":
        return AnchorSet.farthest_point(SUPPORT, support, 5, seed=1)
    if method == "random":
        return AnchorSet.random(SUPPORT, 5, seed=1)
    return AnchorSet.full_support(SUPPORT)


@pytest.mark.parametrize(
    "method", ["shared_linear", "kmeans", "farthest_point", "random", "full_support"]
)
def test_anchor_methods_and_onboarding(device, method):
    spaces, expected_spaces = on(device), on(torch.device("cpu"))
    anchor_set = anchor_set_of(method, spaces)
    expected_set = anchor_set_of(method, expected_spaces)
    if method in ("shared_linear", "kmeans", "farthest_point"):  # fitted on the embeddings
        assert_on(device, anchor_set.mixture)
    assert anchor_set.shrinkage == expected_set.shrinkage
    assert_same(anchor_set.mixture, expected_set.mixture, rtol=1e-5, atol=1e-6)
    new = spaces["e2"]  # the encoder onboarded: never seen by the fit
    anchors = anchor_set.anchors(new[:24], mean=new.mean(dim=0))
    projector = RelativeProjector.from_anchor_set(anchor_set, new[:24], new)
    features = projector(new.float())
    assert_on(device, anchors, projector.weight, features)
    expected = RelativeProjector.from_anchor_set(
        expected_set, expected_spaces["e2"][:24], Statistics.from_embeddings(expected_spaces["e2"])
    )
    assert_same(features, expected(expected_spaces["e2"]), rtol=1e-4, atol=1e-4)  # fmt: skip


def test_param_trainer(device, tmp_path):
    def trained(spaces: dict[str, torch.Tensor], name: str) -> AnchorSet:
        args = ParamTrainingArguments(str(tmp_path / name), num_anchors=4, support_size=16,
                                      num_train_epochs=2, train_batch_size=64,
                                      save_strategy="no", disable_tqdm=True)  # fmt: skip
        return ParamTrainer(args, {"e0": spaces["e0"], "e1": spaces["e1"]}).train()

    spaces = on(device, torch.float32)
    anchor_set = trained(spaces, "device")
    if device.type != "cpu":  # the accelerator's device trains both: the same mixture
        expected = trained(on(torch.device("cpu"), torch.float32), "cpu")
        assert_same(anchor_set.mixture, expected.mixture, rtol=1e-5, atol=1e-6)
    support = spaces["e2"][[ref["index"] for ref in anchor_set.support]]
    projector = RelativeProjector.from_anchor_set(anchor_set, support, spaces["e2"])
    assert_on(device, projector(spaces["e2"]))


def test_shared_linear_fine_tuning(device):
    spaces = on(device)
    training = {"e0": spaces["e0"], "e1": spaces["e1"]}
    closed_form = AnchorSet.shared_linear(SUPPORT, training, 5, support_rows=range(24))
    args = SharedLinearTuningArguments(num_train_epochs=1, train_batch_size=64)
    tuned = fine_tune_shared_linear(closed_form, training, support_rows=range(24), args=args)
    expected = fine_tune_shared_linear(anchor_set_of("shared_linear", on(torch.device("cpu"))),
                                       {n: SPACES[n].double() for n in ("e0", "e1")},
                                       support_rows=range(24), args=args)  # fmt: skip
    assert_same(tuned.mixture, expected.mixture, rtol=1e-4, atol=1e-5)  # the trainer's device
    projector = RelativeProjector.from_anchor_set(tuned, spaces["e2"][:24], spaces["e2"])
    assert_on(device, projector(spaces["e2"]))


def trained_head(features: dict[str, torch.Tensor], labels: torch.Tensor):
    torch.manual_seed(0)  # the same initial weights for every head
    head = RelativeHeadForClassification(RelativeHeadConfig(num_anchors=4, num_labels=2))
    return train_in_memory(head, features, labels, num_train_epochs=2, seed=0)


def test_heads(device, tmp_path):
    features = {n: x[:, :4] for n, x in on(device, torch.float32).items()}
    head = trained_head(features, LABELS.to(device))  # built on the CPU
    # the Trainer's device (the GPU where there is one) trains it; it comes back where it was
    assert_on(torch.device("cpu"), next(head.parameters()))
    logits = head.to(device)(features["e2"]).logits
    assert_on(device, logits)
    # the features are held on the CPU and the Trainer's device trains both: the same head
    expected = trained_head({n: x[:, :4] for n, x in SPACES.items()}, LABELS)
    assert_same(logits, expected(SPACES["e2"][:, :4]).logits, rtol=1e-5, atol=1e-6)
    args = HeadTrainingArguments(str(tmp_path / "head"), num_train_epochs=1, disable_tqdm=True,
                                 save_final_model=False)  # fmt: skip
    trainer = HeadTrainer(head, args, features["e0"], LABELS.to(device))  # features checked
    predicted = trainer.predict_logits(features["e1"])  # the Trainer's device, answered on ours
    assert_on(device, predicted)
    assert_on(device, next(head.parameters()))  # a head on the GPU stays there
    assert_same(predicted, expected(SPACES["e1"][:, :4]).logits, rtol=1e-5, atol=1e-6)


def test_choose_num_directions(device):
    training = HeadTrainingArguments("unused", num_train_epochs=2).to_dict()
    config = RelativeHeadConfig(num_anchors=6, num_labels=2)

    def chosen(spaces: dict[str, torch.Tensor], labels: torch.Tensor) -> tuple[int, dict]:
        return choose_num_directions(config, spaces, labels, training=training, grid=(2, 4))

    _, record = chosen(on(device, torch.float32), LABELS.to(device))
    _, expected = chosen(on(torch.device("cpu"), torch.float32), LABELS)
    # heads trained on another device round differently: a borderline row (and so the number
    # chosen among close scores) may flip
    del record["chosen"], expected["chosen"]
    scores, expected_scores = (
        record.pop("held_out_weighted_f1"),
        expected.pop("held_out_weighted_f1"),
    )
    assert record == expected and scores.keys() == expected_scores.keys()
    assert [scores[k] for k in scores] == pytest.approx(list(expected_scores.values()), abs=0.05)


def test_translation(device):
    spaces = on(device)
    anchor_set = AnchorSet.full_support(SUPPORT)
    source, target = (
        RelativeProjector.from_anchor_set(
            anchor_set, spaces[n][:24], spaces[n], dtype=torch.float64
        )
        for n in ("e0", "e1")
    )
    x, y = spaces["e0"], spaces["e1"]
    inverse = relative_inverse(target)
    results = {
        "translate": translate(x, source, target),
        "map": translation_map(source, target)(x),
        "translator": LatentTranslator(source, inverse)(x),
        "invert": invert(target(y), target),
        "affine": fit_affine(x[:60], y[:60])(x),
        "ridge": fit_affine(x[:60], y[:60], ridge=1e-3)(x),
        "procrustes": fit_procrustes(x[:60], y[:60])(x),
    }
    assert_on(device, inverse.weight, *results.values())
    assert_same(results["map"], results["translate"], rtol=1e-6, atol=1e-6)
    assert_same(results["invert"], y, rtol=1e-6, atol=1e-6)  # 24 anchors in 6 dimensions: exact
    cpu = on(torch.device("cpu"))
    assert_same(results["affine"], fit_affine(cpu["e0"][:60], cpu["e1"][:60])(cpu["e0"]))
    scores = evaluate_translation(results["translate"], y)
    assert scores == pytest.approx(evaluate_translation(results["translate"].cpu(), y.cpu()))


def test_retrieval_metrics(device):
    x = on(device)
    expected = retrieval_metrics(SPACES["e0"], SPACES["e1"])  # float64 sums: the order may differ
    assert retrieval_metrics(x["e0"], x["e1"]) == pytest.approx(expected, rel=1e-12, abs=0)


def test_wrapper_encode(device):
    from tests.test_reliability import tiny_text_encoder

    texts = ["a b", "b a a", "a", "b b", "a b b a", "b"] * 4
    encoder, tokenizer = tiny_text_encoder()
    pooled = RelativeWrapper(encoder, RelativeProjector.from_statistics(
        torch.randn(3, 8), None, similarity="cosine"), tokenizer, pooling="mean",
    ).encode(texts, return_pooled=True).pooled  # fmt: skip
    stats = Statistics.from_embeddings(pooled)
    projector = RelativeProjector.from_statistics(pooled[:5], stats, pooling="mean")
    expected = RelativeWrapper(encoder, projector, tokenizer).encode(texts)
    wrapper = RelativeWrapper(encoder.to(device), projector.to(device), tokenizer)
    relative = wrapper.encode(texts)
    assert_on(device, relative)
    assert_same(relative, expected, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------ the CPU run covers

# The only branches on the device: a kernel that exists on the CPU only, and the test below
# that runs its other side on the CPU too. A new branch fails here until it is listed.
DEVICE_BRANCHES = {
    ("functional/regularization.py", "top_eigenpairs"): "scipy's subset eigh (else torch eigh)",
    ("functional/statistics.py", "symmetric_gram"): "NumPy's syrk (else blocked_gram)",
    ("functional/least_squares.py", "fit_affine"): "LAPACK gelsd (else pseudo_inverse_solve)",
    # a transfer, not a kernel: pinned host memory and a queued copy exist only toward a GPU
    ("encoding/batches.py", "_to_model"): "pinned memory, non_blocking copy (else .to)",
    # not a kernel either: the finite check deferred where reading a value waits for the device;
    # the deferred side runs on the CPU in tests/models/test_modeling_relative_projector.py
    ("models/modeling_relative_projector.py", "forward"): "deferred finite check (else at once)",
}
BRANCH = re.compile(r"\bif\b.*(\.is_cuda\b|device\.type\b|\.is_cpu\b)")


def test_device_branches_are_the_kernels_own():
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        function = ""
        for line in path.read_text().splitlines():
            if match := re.match(r"\s*def (\w+)", line):
                function = match.group(1)
            if BRANCH.search(line.split("#")[0]):
                found.add((str(path.relative_to(PACKAGE)), function))
    assert found == set(DEVICE_BRANCHES)


def test_the_other_side_of_each_device_branch_runs_on_the_cpu():
    rows = SPACES["e0"][:50].double()
    torch.testing.assert_close(blocked_gram(rows, block=4), symmetric_gram(rows))
    gram = rows.T @ rows
    values, vectors = top_eigenpairs(gram, 3)  # small: torch's eigh, as on any other device
    reference = torch.linalg.eigvalsh(gram).flip(0)[:3]
    torch.testing.assert_close(values, reference)
    torch.testing.assert_close(gram @ vectors, vectors * values)
    xs, xt = rows[:, :4] - rows[:, :4].mean(0), SPACES["e1"][:50].double()
    expected = torch.linalg.lstsq(xs, xt, driver="gelsd").solution
    torch.testing.assert_close(pseudo_inverse_solve(xs, xt), expected)


def test_mixed_devices_name_both():
    elsewhere = torch.empty(4, 6, device="meta")  # every machine's second device
    projector = RelativeProjector.from_statistics(SPACES["e0"][:4], Statistics.from_embeddings(
        SPACES["e0"]))  # fmt: skip
    with pytest.raises(DeviceMismatchError, match="embeddings on meta, projector on cpu"):
        projector(elsewhere)
    with pytest.raises(DeviceMismatchError, match="'e0' fit embeddings on cpu, 'e1' fit emb"):
        AnchorSet.shared_linear(SUPPORT, {"e0": SPACES["e0"], "e1": elsewhere.new_empty(120, 6)},
                                4, support_rows=range(24))  # fmt: skip
