"""A ``save_to_disk`` folder of one `datasets.Dataset` with a vector column: the ``datasets``
store kind. Its space is recorded in a file of the folder (``store_space.json``); its features,
format and other columns are carried over."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from relrep_hf.migration.space import StoreSpace
from relrep_hf.migration.stores.arrow import _ArrowStore, _column
from relrep_hf.migration.stores.base import (
    StoreKind,
    Transform,
    VectorStoreError,
    existing_path,
    folder_with,
    kept_rows,
)

__all__ = ["DATASETS_SPACE_FILE", "KIND", "DatasetsStore", "is_datasets_folder"]

DATASETS_SPACE_FILE = "store_space.json"  # a datasets folder's record of its space


def is_datasets_folder(path: Path) -> bool:
    """``path`` holds what ``Dataset.save_to_disk`` writes."""
    return (path / "dataset_info.json").is_file() or (path / "state.json").is_file()


class DatasetsStore(_ArrowStore):
    """A ``save_to_disk`` folder of one `datasets.Dataset`; its features, format (``torch``,
    ``numpy``...) and other columns are kept. Its space is recorded in a file of the folder,
    ``store_space.json``."""

    kind = "datasets"
    records_space = True

    def __init__(self, path: Path, *, column: str | None = None, **_: object):
        self.path = path
        self.dataset = _load_dataset(path)
        self.rows = len(self.dataset)
        table = self.dataset.with_format("arrow")
        self._setup(table.data.schema, column, lambda: next(iter(table[:1].to_batches()), None))

    def batches(self, chunk_rows: int) -> Iterator[pa.RecordBatch]:
        for start in range(0, self.rows, chunk_rows):
            table = self.dataset.with_format("arrow")[start : start + chunk_rows]
            yield from table.combine_chunks().to_batches() or []

    def read_space(self) -> StoreSpace | None:
        record = self.path / DATASETS_SPACE_FILE
        if not record.is_file():
            return None
        return StoreSpace.from_json(record.read_bytes(), where=str(record))

    def write(
        self,
        staging: Path,
        transform: Transform,
        dim: int,
        chunk_rows: int,
        *,
        dtype=None,
        space: StoreSpace | None = None,
        skip=None,
    ) -> None:
        import datasets

        staging = Path(staging).absolute()  # datasets cannot cache beside a bare relative name
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        features = self.dataset.features.copy()
        features[self.column] = datasets.List(datasets.Value(str(dtype)), length=dim)
        if not pa.types.is_fixed_size_list(self.schema.field(self.column).type):
            features[self.column] = datasets.List(datasets.Value(str(dtype)))
        # beside the staging folder, under its name: a killed run's is removed with it
        cache = staging.parent / f"{staging.name}.cache"
        cache.mkdir()
        try:
            rows = self._mapped(
                transform, dim, chunk_rows, features, cache / "map.arrow", dtype, skip
            )
            kept = self.dataset.format
            rows = rows.with_format(
                kept["type"],
                columns=kept["columns"],
                output_all_columns=kept["output_all_columns"],
                **kept["format_kwargs"],
            )
            rows.save_to_disk(str(staging))
            if space is not None:  # inside the folder: swapped in with it
                (staging / DATASETS_SPACE_FILE).write_text(space.to_json())
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def _mapped(self, transform, dim, chunk_rows, features, cache, dtype, skip=None):
        index = self.schema.get_field_index(self.column)
        like = self.schema.field(index).type
        field = self.new_schema(dim, dtype).field(index)
        position = 0

        def replace(table: pa.Table) -> pa.Table:
            nonlocal position
            read = table.num_rows
            keep = None if skip is None else kept_rows(skip, position, read)
            if keep is not None:  # rows left out (a re-embed's without text)
                table = table.filter(pa.array(keep))
            vectors = transform(self.vectors(table.column(self.column), position))
            position += read
            column = _column(vectors.astype(dtype, copy=False), like)
            return table.set_column(index, field, column)

        if self.rows == 0:  # no rows to map: a dataset of the new features
            import datasets

            return datasets.Dataset.from_dict({n: [] for n in features}, features=features)
        return self.dataset.with_format("arrow").map(
            replace,
            batched=True,
            batch_size=chunk_rows,
            features=features,
            cache_file_name=str(cache),
            load_from_cache_file=False,
        )


def _load_dataset(path: Path):
    """``load_from_disk(path)``; a folder of no rows (which ``datasets`` saves with no data file
    and cannot load) gives an empty dataset of its features."""
    import datasets

    try:
        dataset = datasets.load_from_disk(str(path))
    except IndexError:  # no data file: a dataset of 0 rows
        try:
            info = datasets.DatasetInfo.from_directory(str(path))
        except (OSError, ValueError) as error:
            raise VectorStoreError(
                f"{str(path)!r}: not a readable datasets folder ({error})."
            ) from None
        dataset = datasets.Dataset.from_dict(
            {name: [] for name in info.features}, features=info.features
        )
    except (OSError, ValueError) as error:
        raise VectorStoreError(
            f"{str(path)!r}: not a readable datasets folder ({error})."
        ) from None
    if not isinstance(dataset, datasets.Dataset):
        raise VectorStoreError(f"{str(path)!r} holds a DatasetDict: give one split's folder.")
    return dataset


KIND = StoreKind(
    "datasets",
    folder_with(is_datasets_folder),
    existing_path(DatasetsStore),
    "a datasets folder (save_to_disk)",
)
