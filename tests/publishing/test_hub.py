"""Anchor sets, projectors and heads on the Hub: push, pull, revisions, offline, failures.

Everything runs against the local Hub server (tests/fixtures/hub_server.py), from two client
processes that run many checks each and exit non-zero on the first failure. One, forked from the
test process and pointed at the server (`fork_client`: huggingface_hub reads ``HF_ENDPOINT`` at
import), pushes (and provokes the failures), then pulls into an empty cache and reloads from that
cache offline (the cache and offline mode are read on every call). The other, a fresh
interpreter, loads a projector with transformers alone (``trust_remote_code=True``, relrep_hf not
importable).

The artifacts are built here, in the test process: two tiny BERTs where B's last hidden states
are exactly ``2.5 * A's + t`` (an affine map, to which the whitened inner product is invariant),
an anchor set over real corpus sentences, the two encoders' projectors, and a head trained on
A's relative features. So the zero-shot swap from Hub artifacts must give B the predictions A
gets.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

from relrep_hf import AnchorSet, RelativeProjector, Statistics
from relrep_hf.encoding.corpora import load_sentences
from relrep_hf.functional.metrics import accuracy, retrieval_metrics, weighted_f1
from relrep_hf.functional.similarities import SIMILARITIES
from relrep_hf.models.configuration_relative_head import RelativeHeadConfig
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.models.modeling_relative_wrapper import RelativeWrapper
from relrep_hf.models.remote_code import AUTO_MAP, write_remote_code
from relrep_hf.publishing.hub import push_artifact
from relrep_hf.training.head_trainer import HeadTrainer, HeadTrainingArguments
from relrep_hf.utils.hub_files import ARTIFACT_FILES, artifact_kind
from tests.fixtures import python_path
from tests.fixtures.hub_encoders import fork_client
from tests.fixtures.hub_server import LocalHub, hub_env

transformers.logging.set_verbosity_error()

NUM_ANCHORS = 16
SUPPORT_SIZE = 64
SHIFT_SCALE = 2.5  # encoder B = SHIFT_SCALE * A + shift, on the last hidden states


# ---------------------------------------------------------------------------------------------
# Building the artifacts (in this process, no Hub)
# ---------------------------------------------------------------------------------------------


def word_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """A lower-casing word-level tokenizer over the words of ``texts``, with BERT's specials."""
    splitter = pre_tokenizers.Whitespace()
    words = sorted({w for t in texts for w, _ in splitter.pre_tokenize_str(t.lower())})
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words])}
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = splitter
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )


def folder_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(path.relative_to(folder).as_posix().encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Encoders, a run folder (anchor set, two projectors, a head) and second versions."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("hub-work")
    sentences = load_sentences(240)
    texts, labels = sentences["text"], torch.tensor(sentences["label"])
    names = sentences.features["label"].names
    tokenizer = word_tokenizer(texts)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    encoder_a = BertModel(config).eval()
    encoder_b = BertModel(config).eval()
    encoder_b.load_state_dict(encoder_a.state_dict())
    norm = encoder_b.encoder.layer[-1].output.LayerNorm
    with torch.no_grad():  # last hidden states of B = 2.5 * A + shift
        norm.weight.mul_(SHIFT_SCALE)
        norm.bias.mul_(SHIFT_SCALE).add_(torch.randn(16))
    for name, encoder in (("enc_a", encoder_a), ("enc_b", encoder_b)):
        encoder.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)

    # embeddings of both encoders through the library's own pooling
    identity = RelativeProjector.from_statistics(
        torch.eye(16), None, similarity="inner", pooling="mean"
    )
    pooled = {
        name: RelativeWrapper.from_pretrained(str(root / name), identity).encode(texts)
        for name in ("enc_a", "enc_b")
    }
    support = list(range(SUPPORT_SIZE))
    generator = torch.Generator().manual_seed(1)
    mixture = torch.softmax(3 * torch.randn(NUM_ANCHORS, SUPPORT_SIZE, generator=generator), 1)
    encoders = [
        {"name": "a", "id": "tester/enc-a", "revision": "", "pooling": "mean", "layer": -1},
        {"name": "b", "id": str(root / "enc_b"), "revision": "", "pooling": "mean", "layer": -1},
    ]
    anchor_set = AnchorSet(
        mixture,
        [texts[i] for i in support],
        encoders=[{**e, "dim": 16} for e in encoders],
        training={"seed": 1, "num_anchors": NUM_ANCHORS},
    )
    projectors = {
        key: RelativeProjector.from_anchor_set(
            anchor_set,
            pooled[name][support],
            Statistics.from_embeddings(pooled[name].double()),
            encoder_id=encoder_id,
            pooling="mean",
            layer=-1,
        )
        for key, name, encoder_id in (
            ("a", "enc_a", "tester/enc-a"),
            ("b", "enc_b", str(root / "enc_b")),
        )
    }
    relative = {key: projector(pooled[f"enc_{key}"]) for key, projector in projectors.items()}
    anchor_set.metrics = {
        "retrieval": {
            "a->b": retrieval_metrics(relative["a"], relative["b"], ks=(1, 5)),
            "b->a": retrieval_metrics(relative["b"], relative["a"], ks=(1, 5)),
        },
        "retrieval_rows": len(texts),
        "zero_shot": {},
        "dataset": {"id": "relrep_hf/sentences", "name": "relrep_hf sentences", "split": "all"},
    }

    head = RelativeHeadForClassification(
        RelativeHeadConfig.for_projector(
            projectors["a"].config, id2label=dict(enumerate(names)), dropout=0.0
        )
    )
    args = HeadTrainingArguments(
        str(root / "head-train"),
        num_train_epochs=15,
        learning_rate=1e-2,
        seed=0,
        disable_tqdm=True,
        save_final_model=False,
        eval_strategy="no",
    )
    HeadTrainer(head, args, relative["a"], labels).train()
    head.eval()
    with torch.no_grad():
        predictions = {key: head(r).logits.argmax(-1) for key, r in relative.items()}
    scores = {
        key: {"accuracy": accuracy(p, labels), "f1": weighted_f1(p, labels)}
        for key, p in predictions.items()
    }
    anchor_set.metrics["zero_shot"] = {"a->b": scores["b"]}

    run = root / "run"
    anchor_set.save_pretrained(run / "anchor_set")
    for key, projector in projectors.items():
        projector.save_pretrained(run / "projectors" / key)
    head.save_pretrained(run / "heads" / "topic")
    head_metrics = {
        "dataset": {"id": "relrep_hf/sentences", "split": "all"},
        "results": {"tester/enc-a": scores["a"], "b": scores["b"]},
    }
    (run / "heads" / "topic" / "metrics.json").write_text(json.dumps(head_metrics))
    (run / "anchor_set" / "checkpoint-1").mkdir()  # training leftovers are not pushed
    (run / "anchor_set" / "checkpoint-1" / "optimizer.pt").write_bytes(b"x")

    # second versions, for revisions
    anchor_set.metrics = {**anchor_set.metrics, "retrieval_rows": 1}
    anchor_set.save_pretrained(root / "anchor_set_v2")
    RelativeProjector.from_anchor_set(
        anchor_set, pooled["enc_a"][support], None, similarity="cosine", encoder_id="tester/enc-a"
    ).save_pretrained(root / "projector_v2")
    with torch.no_grad():
        head.classifier.bias.add_(1.0)
    head.save_pretrained(root / "head_v2")

    save_file(
        {
            "embeddings_a": pooled["enc_a"][:32].contiguous(),
            "relative_a": relative["a"][:32].contiguous(),
            "predictions_a": predictions["a"][:32].contiguous(),
        },
        root / "expected.safetensors",
    )
    (root / "texts.json").write_text(json.dumps(texts[:32]))
    (root / "metrics.json").write_text(json.dumps(anchor_set.metrics))
    return root


@pytest.fixture(scope="module")
def hub():
    with LocalHub() as running:
        yield running


class Client:
    """A client interpreter started now, so that its imports overlap with the other clients';
    it reads one line of input (sent by `finish`) when it needs what they produced."""

    def __init__(self, script: str, env: dict, *args: str, cwd: Path, python_flags=()):
        self.process = subprocess.Popen(
            [sys.executable, *python_flags, "-c", textwrap.dedent(script), *args],
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self, line: str = "", timeout: float = 240) -> str:
        try:
            out, err = self.process.communicate(line + "\n", timeout=timeout)
        finally:
            self.process.kill()
            self.process.wait()
        assert self.process.returncode == 0, f"client failed:\n{out}\n{err[-8000:]}"
        return out


def site_packages() -> list[str]:
    """This interpreter's site-packages folders (a venv's too)."""
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


# ---------------------------------------------------------------------------------------------
# The clients
# ---------------------------------------------------------------------------------------------

PUSH = r"""
import json, sys, urllib.request, warnings
from pathlib import Path
from huggingface_hub import HfApi, constants
from relrep_hf import AnchorSet, RelativeProjector
from relrep_hf.publishing.hub import HubError, push_artifact, push_folder, push_run
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification

work, closed_port = Path(sys.argv[1]), sys.argv[2]
api = HfApi()
shas = {}


def expect(fn, *fragments):
    try:
        fn()
    except HubError as error:
        message = str(error)
        for fragment in fragments:
            assert fragment in message, (fragment, message)
        return message
    raise AssertionError(f"no HubError, expected one with {fragments}")


def fail_next(**fault):
    request = urllib.request.Request(f"{constants.ENDPOINT}/_localhub/fail-next",
                                     json.dumps(fault).encode(), {"Content-Type": "application/json"})
    urllib.request.urlopen(request).read()


# encoder A lives on the Hub; B stays a local folder
api.create_repo("enc-a")
shas["enc-a"] = api.upload_folder(folder_path=work / "enc_a", repo_id="tester/enc-a").oid

# a whole run, one repo per artifact
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    shas["run"] = push_artifact(work / "run", "tester/run")
messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
local = [m for m in messages if "is a local path; recorded as 'local:enc_b'" in m]
assert len(local) == 2, messages  # projector b's encoder, and encoder b of the anchor set
assert "push the encoder to the Hub and record its id" in local[0], local
for repo in ("tester/run", "tester/run-projector-a", "tester/run-projector-b", "tester/run-head-topic"):
    assert api.repo_exists(repo), repo
files = set(api.list_repo_files("tester/run"))
assert {"README.md", "stitching_heatmap.png", "anchor_set.json", "support.jsonl"} <= files, files
assert not any("checkpoint" in f for f in files), files
files = set(api.list_repo_files("tester/run-projector-a"))
assert {"README.md", "config.json", "model.safetensors", "configuration_relative_projector.py",
        "modeling_relative_projector.py"} <= files, files
assert {"metrics.json", "README.md"} <= set(api.list_repo_files("tester/run-head-topic"))

# each artifact's own push_to_hub, a tag, and a second version
shas["as1"] = AnchorSet.from_pretrained(work / "run" / "anchor_set").push_to_hub("tester/as")
shas["as2"] = AnchorSet.from_pretrained(work / "anchor_set_v2").push_to_hub("as")  # bare name
shas["proj1"] = RelativeProjector.from_pretrained(work / "run" / "projectors" / "a").push_to_hub("tester/proj")
shas["proj2"] = RelativeProjector.from_pretrained(work / "projector_v2").push_to_hub("tester/proj")
shas["head1"] = push_artifact(work / "run" / "heads" / "topic", "tester/head")
head_v2 = RelativeHeadForClassification.from_pretrained(work / "head_v2")
shas["head2"] = push_folder(head_v2.save_pretrained, "tester/head")
for repo, first in (("tester/as", "as1"), ("tester/proj", "proj1"), ("tester/head", "head1")):
    api.create_tag(repo, tag="v1", revision=shas[first])
assert api.model_info("tester/as").sha == shas["as2"]
shas["dev"] = AnchorSet.from_pretrained(work / "anchor_set_v2").push_to_hub("tester/as", revision="dev")
assert api.model_info("tester/as").sha == shas["as2"]  # main did not move

# a private repo: its owner reads it, anonymous users do not even see it
anchor_set = AnchorSet.from_pretrained(work / "run" / "anchor_set")
anchor_set.push_to_hub("tester/secret", private=True)
assert api.model_info("tester/secret").private is True
expect(lambda: AnchorSet.from_pretrained("tester/secret", token=False), "not found", "private")
assert AnchorSet.from_pretrained("tester/secret").num_anchors == anchor_set.num_anchors

# failures: each a HubError naming the repo and what to do; nothing committed
expect(lambda: anchor_set.push_to_hub("tester/as", token="hf_wrong"),
       "401", "'tester/as'", "hf auth login")
expect(lambda: anchor_set.push_to_hub("other/not-mine"), "403", "'other/not-mine'", "namespace")
commit = "/api/models/tester/as/commit/"
fail_next(method="POST", path_prefix=commit, status=500)
expect(lambda: anchor_set.push_to_hub("tester/as"), "interrupted", "500", "'tester/as'", "Push again")
fail_next(method="POST", path_prefix=commit, drop=True)
expect(lambda: anchor_set.push_to_hub("tester/as"), "interrupted", "dropped", "push again")
fail_next(method="POST", path_prefix="/api/models/tester/proj/commit/", status=503)
projector = RelativeProjector.from_pretrained(work / "run" / "projectors" / "a")
expect(lambda: projector.push_to_hub("tester/proj"), "interrupted", "503", "'tester/proj'")
assert api.model_info("tester/as").sha == shas["as2"]
assert api.model_info("tester/proj").sha == shas["proj2"]
fail_next(method="POST", path_prefix="/api/models/tester/run2-projector-b/commit/", status=500)
expect(lambda: push_run(work / "run", "tester/run2"), "'tester/run2-projector-b'",
       "already pushed from this run: tester/run2, tester/run2-projector-a")
expect(lambda: AnchorSet.from_pretrained("tester/no-such-repo"), "'tester/no-such-repo'", "not found")
expect(lambda: AnchorSet.from_pretrained("tester/as", revision="no-such-rev"),
       "no revision 'no-such-rev'", "list_repo_refs")
for load in (RelativeProjector.from_pretrained, RelativeHeadForClassification.from_pretrained):
    for kwargs in ({}, {"revision": "no-such-rev"}):
        try:
            load("tester/proj" if kwargs else "tester/no-such-repo", **kwargs)
        except OSError as error:
            assert ("no-such-rev" if kwargs else "tester/no-such-repo") in str(error), error
        else:
            raise AssertionError(f"{load} did not fail with {kwargs}")

# an unreachable endpoint (this process's endpoint pointed at a closed port, then back)
endpoint, constants.ENDPOINT = constants.ENDPOINT, f"http://127.0.0.1:{closed_port}"
expect(lambda: anchor_set.push_to_hub("tester/as"), "Could not reach", closed_port, "'tester/as'")
expect(lambda: AnchorSet.from_pretrained("tester/never-downloaded"),
       "'tester/never-downloaded'", "could not be reached")
constants.ENDPOINT = endpoint
print(json.dumps(shas), flush=True)
"""

PULL = r"""
import json, sys
from pathlib import Path
import torch
from huggingface_hub import HfApi, ModelCard, constants
from safetensors.torch import load_file
from relrep_hf import AnchorSet, RelativeProjector
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification
from relrep_hf.models.modeling_relative_wrapper import RelativeWrapper

constants.HF_HUB_CACHE = sys.argv[3]  # an empty cache: what loads comes from the server
api = HfApi()


def same_state(model, folder):
    expected = load_file(folder / "model.safetensors")
    state = model.state_dict()
    assert set(expected) == set(state), set(expected) ^ set(state)
    for name, tensor in expected.items():
        assert torch.equal(state[name], tensor), name


# every artifact, by repo id, bit-exact; previous versions by commit and by tag
run = work / "run"
for revision, folder in [(None, work / "anchor_set_v2"), (shas["as1"], run / "anchor_set"),
                         ("v1", run / "anchor_set"), ("dev", work / "anchor_set_v2")]:
    loaded = AnchorSet.from_pretrained("tester/as", revision=revision)
    local = AnchorSet.from_pretrained(folder)
    assert torch.equal(loaded.mixture, local.mixture) and loaded.support == local.support
    assert loaded.metrics == local.metrics and loaded.repo_id == "tester/as"
assert AnchorSet.from_pretrained("tester/as", revision="v1").revision == shas["as1"]
for revision, folder in [(None, work / "projector_v2"), (shas["proj1"], run / "projectors" / "a"),
                         ("v1", run / "projectors" / "a")]:
    same_state(RelativeProjector.from_pretrained("tester/proj", revision=revision), folder)
for revision, folder in [(None, work / "head_v2"), (shas["head1"], run / "heads" / "topic"),
                         ("v1", run / "heads" / "topic")]:
    same_state(RelativeHeadForClassification.from_pretrained("tester/head", revision=revision), folder)

# portable provenance: Hub ids and commits, never a local path
anchor_set = AnchorSet.from_pretrained("tester/run")
assert anchor_set.revision == shas["run"]
assert [(e["id"], e["revision"]) for e in anchor_set.encoders] == [
    ("tester/enc-a", shas["enc-a"]), ("local:enc_b", "")]
projector_a = RelativeProjector.from_pretrained("tester/run-projector-a")
projector_b = RelativeProjector.from_pretrained("tester/run-projector-b")
head = RelativeHeadForClassification.from_pretrained("tester/run-head-topic")
c = projector_a.config
assert (c.encoder_id, c.encoder_revision) == ("tester/enc-a", shas["enc-a"]), c
assert (c.anchor_set_id, c.anchor_set_revision) == ("tester/run", shas["run"]), c
assert c.auto_map["AutoModel"] == "modeling_relative_projector.RelativeProjector"
assert (projector_b.config.encoder_id, projector_b.config.encoder_revision) == ("local:enc_b", "")
assert projector_b.config.anchor_set_id == "tester/run"
h = head.config
assert (h.anchor_set_id, h.anchor_set_revision) == ("tester/run", shas["run"]), h
assert (h.source_encoder_id, h.source_encoder_revision) == ("tester/enc-a", shas["enc-a"]), h
same_state(projector_a, run / "projectors" / "a")  # only the config was rewritten
same_state(head, run / "heads" / "topic")

# the zero-shot swap from Hub artifacts alone: encoder A from the Hub, B a local folder
texts = json.loads((work / "texts.json").read_text())
expected = load_file(work / "expected.safetensors")
wrapper_a = RelativeWrapper.from_pretrained("tester/enc-a", "tester/run-projector-a")
wrapper_b = RelativeWrapper.from_pretrained(str(work / "enc_b"), "tester/run-projector-b")
assert wrapper_a.encoder_revision == shas["enc-a"]
relative_a, relative_b = wrapper_a.encode(texts), wrapper_b.encode(texts)
torch.testing.assert_close(relative_a, expected["relative_a"], atol=1e-5, rtol=1e-5)
torch.testing.assert_close(relative_b, relative_a, atol=1e-3, rtol=1e-3)  # B = 2.5 A + t
labels_a = wrapper_a.with_head("tester/run-head-topic").predict(texts)
labels_b = wrapper_b.with_head("tester/run-head-topic").predict(texts)
names = head.config.id2label
assert labels_a == [names[int(i)] for i in expected["predictions_a"]]
assert labels_b == labels_a, (labels_a, labels_b)

# cards: valid metadata (validated by the server too), numbers from the stored metrics
metrics = json.loads((work / "metrics.json").read_text())
for repo in ("tester/run", "tester/run-projector-a", "tester/run-head-topic", "tester/as", "tester/proj"):
    card = ModelCard.load(repo)
    card.validate()
    assert card.data.library_name == "relrep_hf" and "relative-representations" in card.data.tags
card = ModelCard.load("tester/run")
values = {r.metric_name: r.metric_value for r in card.data.eval_results}
for pair, scores in metrics["retrieval"].items():
    a, b = pair.split("->")
    for name, value in scores.items():
        label = {"mrr": "MRR"}.get(name, name.replace("recall", "Recall"))
        assert values.pop(f"{label} ({a} → {b})") == value, (pair, name)
assert set(values) == {"F1 (a → b)", "Accuracy (a → b)"}, values
assert values["F1 (a → b)"] == metrics["zero_shot"]["a->b"]["f1"]
assert card.data.base_model == ["tester/enc-a"], card.data.base_model
assert "![Retrieval between the encoders, Recall@1](stitching_heatmap.png)" in card.text
assert "stitching_heatmap.png" in api.list_repo_files("tester/run")
assert "stitching_heatmap.png" in api.list_repo_files("tester/as", revision=shas["as1"])
card = ModelCard.load("tester/run-projector-a")
assert card.data.base_model == "tester/enc-a"
assert 'RelativeWrapper.from_pretrained("tester/enc-a", "tester/run-projector-a")' in card.text
card = ModelCard.load("tester/run-head-topic")
assert {r.metric_name for r in card.data.eval_results} == {
    "Accuracy (tester/enc-a, trained on)", "F1 (tester/enc-a, trained on)",
    "Accuracy (b, zero-shot)", "F1 (b, zero-shot)"}
print("pull ok")
"""

OFFLINE = r"""
import json, sys, time
from pathlib import Path
import torch
from relrep_hf import AnchorSet, RelativeProjector
from huggingface_hub import constants
from relrep_hf.publishing.hub import HubError
from relrep_hf.models.modeling_relative_head import RelativeHeadForClassification

constants.HF_HUB_OFFLINE = True  # what HF_HUB_OFFLINE=1 sets at import
Path(sys.argv[4]).write_text("offline from here")
while not Path(sys.argv[5]).exists():  # the test counts the server's requests, then says go
    time.sleep(0.01)
for revision in (None, shas["as1"], "v1"):
    AnchorSet.from_pretrained("tester/as", revision=revision)
assert AnchorSet.from_pretrained("tester/run").revision == shas["run"]
for revision in (None, shas["proj1"]):
    RelativeProjector.from_pretrained("tester/proj", revision=revision)
RelativeProjector.from_pretrained("tester/run-projector-b")
RelativeHeadForClassification.from_pretrained("tester/run-head-topic")
try:
    AnchorSet.from_pretrained("tester/never-downloaded")
except HubError as error:
    assert "HF_HUB_OFFLINE" in str(error) and "'tester/never-downloaded'" in str(error), error
else:
    raise AssertionError("offline mode served a repo it never saw")
print("offline ok")
"""

# One process pushes, pulls into an empty cache and reloads from it offline: the process is
# there for HF_ENDPOINT, which huggingface_hub reads at import (a fork of this one, pointed at
# the server: fork_client); the cache and offline mode are read on every call, so the pull's
# cache is as empty as a fresh interpreter's, and offline mode is what HF_HUB_OFFLINE=1 sets.
CLIENT = PUSH + PULL + OFFLINE

REMOTE = r"""
import sys
sys.path += sys.argv[2:]  # the parent's site-packages, without their .pth files
try:
    import relrep_hf
except ModuleNotFoundError:
    pass
else:
    raise AssertionError(f"relrep_hf is importable from {relrep_hf.__file__}")
import torch
from huggingface_hub import constants
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel

work = sys.argv[1]
sys.stdin.readline()  # imported while the others ran
embeddings = load_file(work + "/expected.safetensors")["embeddings_a"]
model = AutoModel.from_pretrained("tester/run-projector-a", trust_remote_code=True)
assert type(model).__name__ == "RelativeProjector" and "relrep_hf" not in type(model).__module__
assert AutoConfig.from_pretrained("tester/run-projector-a", trust_remote_code=True).num_anchors == 16
with torch.no_grad():
    save_file({"relative": model(embeddings).contiguous()}, work + "/remote.safetensors")
print("remote ok")
"""


# ---------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_push_pull_revisions_offline_and_failures(hub, work, tmp_path):
    pushed = [work / "run", work / "anchor_set_v2", work / "projector_v2", work / "head_v2"]
    before = {path: folder_hash(path) for path in pushed}
    remote_env = hub_env(hub, tmp_path / "remote", OMP_NUM_THREADS="1")
    remote_env["PYTHONPATH"] = python_path(checkout=False)  # relrep_hf is not importable
    offline, go = tmp_path / "offline", tmp_path / "go"
    args = work, closed_port(), tmp_path / "pull-cache", offline, go
    # transformers alone: -S skips site's .pth files (the editable install of relrep_hf);
    # the site-packages folders come from this interpreter, since -S also skips a venv's
    remote = Client(
        REMOTE, remote_env, str(work), *site_packages(), cwd=tmp_path, python_flags=("-I", "-S")
    )  # starts now, its imports overlapping the pushes
    client = fork_client(hub, CLIENT, *args, home=tmp_path / "push")
    try:
        # pushes and failures, then an empty cache by repo id, until it goes offline
        deadline = time.monotonic() + 240
        while not offline.exists() and client.poll() is None:
            assert time.monotonic() < deadline, "the client did not go offline in 240 s"
            time.sleep(0.01)
        # the same cache, offline: not one request
        n_requests = len(hub.requests)
        go.write_text("go")
        returncode = client.wait(240)
        out, err = client.output()
        assert returncode == 0, f"client failed:\n{out}\n{err[-8000:]}"
        assert len(hub.requests) == n_requests
        *_, printed_shas, pulled, went_offline = out.splitlines()
        assert (pulled, went_offline) == ("pull ok", "offline ok"), out
        shas = json.loads(printed_shas)
        # transformers alone, relrep_hf not importable: the same output as RelativeProjector
        assert "remote ok" in remote.finish()
    finally:
        client.kill()
        remote.process.kill()
        remote.process.wait()
    assert {path: folder_hash(path) for path in pushed} == before  # nothing local touched
    assert hub.branch_head("tester/as") == shas["as2"] and hub.branch_head("tester/as", "dev")
    repos = {repo_id for _, repo_id in hub.server.repos}
    assert "tester/run2-projector-a" in repos and "tester/run2-head-topic" not in repos
    assert len(hub.history("tester/run-projector-a")) == 2  # initial commit, then ours
    projector = RelativeProjector.from_pretrained(work / "run" / "projectors" / "a")
    embeddings = load_file(work / "expected.safetensors")["embeddings_a"]
    with torch.no_grad():
        relative = projector(embeddings)
    assert torch.equal(load_file(work / "remote.safetensors")["relative"], relative)


@pytest.mark.parametrize("similarity", sorted(SIMILARITIES))
def test_remote_code_equals_the_package(similarity, tmp_path):
    from relrep_hf.models.remote_code import modeling_relative_projector as remote

    assert set(remote.APPLY) == set(SIMILARITIES)  # a new similarity needs its remote apply
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, 8, generator=generator, dtype=torch.float64) @ torch.randn(
        8, 8, generator=generator, dtype=torch.float64
    )
    projector = RelativeProjector.from_statistics(
        x[:5], Statistics.from_embeddings(x), similarity=similarity, pooling="mean"
    )
    projector.save_pretrained(tmp_path)
    write_remote_code(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["auto_map"] == AUTO_MAP
    loaded = remote.RelativeProjector.from_pretrained(tmp_path)
    rows = x[5:40].float().reshape(5, 7, 8)  # any leading shape
    with torch.no_grad():
        assert torch.equal(loaded(rows), projector(rows))
    # the package still loads its own class from a folder that carries remote code
    assert type(RelativeProjector.from_pretrained(tmp_path)) is RelativeProjector
    assert type(transformers.AutoModel.from_pretrained(tmp_path)) is RelativeProjector


def test_push_artifact_validates_before_any_network(tmp_path):
    # no Hub at all here: every one of these fails while validating the local folder
    with pytest.raises(FileNotFoundError, match="holds no relrep_hf artifact"):
        push_artifact(tmp_path, "tester/x")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        push_artifact(tmp_path / "missing", "tester/x")
    anchor_set = AnchorSet.random([f"s{i}" for i in range(10)], num_anchors=4)
    anchor_set.save_pretrained(tmp_path / "as")
    (tmp_path / "as" / "support.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="looks like an anchor set but lacks support.jsonl"):
        push_artifact(tmp_path / "as", "tester/x")
    anchor_set.save_pretrained(tmp_path / "as")
    assert artifact_kind(tmp_path / "as") == "anchor_set"
    (tmp_path / "as" / "anchor_set.safetensors").write_bytes(b"truncated")
    with pytest.raises(ValueError, match="cannot be loaded .* nothing was pushed"):
        push_artifact(tmp_path / "as", "tester/x")

    # a run whose projector belongs to another anchor set
    run = tmp_path / "run"
    anchor_set.save_pretrained(run / "anchor_set")
    x = torch.randn(50, 4, dtype=torch.float64)
    RelativeProjector.from_statistics(x[:3], Statistics.from_embeddings(x)).save_pretrained(
        run / "projectors" / "p"
    )
    assert artifact_kind(run) == "run"
    with pytest.raises(ValueError, match="another anchor set .3 anchors, the run's anchor set 4"):
        push_artifact(run, "tester/x")
    # as many anchors, but another anchor set's (a fit replaced under it): its fingerprint says so
    other = AnchorSet.random([f"s{i}" for i in range(10)], num_anchors=4, seed=1)
    assert other.fingerprint != anchor_set.fingerprint
    RelativeProjector.from_anchor_set(other, x[:10], Statistics.from_embeddings(x)).save_pretrained(
        run / "projectors" / "p"
    )
    with pytest.raises(
        ValueError, match=rf"another anchor set .anchor set {other.fingerprint[:12]}"
    ):
        push_artifact(run, "tester/x")
    (run / "anchor_set" / "anchor_set.json").rename(run / "anchor_set" / "moved.json")
    with pytest.raises(FileNotFoundError, match="lacks anchor_set.json"):
        push_artifact(run, "tester/x")
    assert set(ARTIFACT_FILES) == {"anchor_set", "projector", "head", "migration_map", "classifier"}
