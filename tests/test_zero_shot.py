import torch

from relrep_hf import ParamTrainingArguments
from relrep_hf.zero_shot import format_table, retrieval_matrix, zero_shot_classification
from tests.synthetic import affine_spaces


def test_algorithm_1_on_affine_spaces(tmp_path):
    """Each encoder held out in turn: a classifier trained on another encoder's PARAM-WIP
    features classifies the held-out one nearly as well as its own absolute classifier."""
    spaces = affine_spaces(("e0", "e1", "e2"), n=1500, d=8, anisotropy=0.3)
    # labels: the latent cluster structure, read off one space by k-means-free thresholding
    labels = (spaces["e0"] @ torch.randn(8, generator=torch.Generator().manual_seed(5)) > 0).long()
    labels += (
        2 * (spaces["e0"] @ torch.randn(8, generator=torch.Generator().manual_seed(6)) > 0).long()
    )
    args = ParamTrainingArguments(
        str(tmp_path),
        num_anchors=24,
        support_size=400,
        num_train_epochs=20,
        train_batch_size=256,
        save_strategy="no",
        disable_tqdm=True,
    )
    rows = zero_shot_classification(
        spaces,
        labels,
        train_rows=torch.arange(1000),
        test_rows=torch.arange(1000, 1500),
        args=args,
        test_encoders=["e2"],
        head_epochs=20,
    )
    assert [(r["encoder"], r["classifier"]) for r in rows] == [
        ("e2", "e0"),
        ("e2", "e1"),
        ("e2", "e2"),
    ]
    assert set(rows[2]) == {"encoder", "classifier", "Abs.", "PARAM-WIP", "Random-Cos"}
    assert "Abs." not in rows[0]
    for row in rows:
        assert all(0.0 <= row[k] <= 1.0 for k in ("PARAM-WIP", "Random-Cos"))
    zero_shot = [r["PARAM-WIP"] for r in rows[:2]]
    print(format_table(rows, ["Abs.", "Random-Cos", "PARAM-WIP"]))
    assert min(zero_shot) > rows[2]["Abs."] - 0.1
    assert min(zero_shot) > max(r["Random-Cos"] for r in rows[:2])


def test_retrieval_matrix_has_every_ordered_pair():
    x = torch.randn(50, 6)
    matrix = retrieval_matrix({"a": x, "b": x + 0.01 * torch.randn(50, 6), "c": torch.randn(50, 6)})
    assert set(matrix) == {"a->b", "a->c", "b->a", "b->c", "c->a", "c->b"}
    assert matrix["a->b"]["recall@1"] == 1.0 and matrix["a->c"]["recall@1"] < 0.3
