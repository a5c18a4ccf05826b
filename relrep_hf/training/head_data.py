"""A `datasets.Dataset` of relative features and labels, read into what `HeadTrainer` trains on.

One feature column per encoder (each row a list of m floats: the relative features of that
row through that encoder's projector) and one label column (class indices, a `ClassLabel`,
class names, or multi-hot floats). The columns' default names are ``"relative"`` (one encoder)
and ``"label"``; ``feature_columns`` names others: a column, a list of columns (one encoder
each, named by its column) or ``{encoder: column}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import datasets
import numpy as np

__all__ = [
    "DEFAULT_FEATURE_COLUMN",
    "DEFAULT_LABEL_COLUMN",
    "FeatureColumns",
    "dataset_columns",
    "feature_column_map",
]

DEFAULT_FEATURE_COLUMN = "relative"  # the head's main_input_name
DEFAULT_LABEL_COLUMN = "label"  # datasets' convention (a ClassLabel column is named so)

FeatureColumns = str | Sequence[str] | Mapping[str, str] | None


def feature_column_map(feature_columns: FeatureColumns) -> dict[str, str]:
    """``{encoder: column}``; one column is one unnamed encoder (``""``)."""
    if feature_columns is None:
        return {"": DEFAULT_FEATURE_COLUMN}
    if isinstance(feature_columns, str):
        return {"": feature_columns}
    if isinstance(feature_columns, Mapping):
        columns = {str(encoder): column for encoder, column in feature_columns.items()}
    else:
        columns = {str(column): column for column in feature_columns}
    if not columns or not all(isinstance(column, str) for column in columns.values()):
        raise ValueError(
            f"feature_columns must name one or more columns (a str, a list of str or "
            f"{{encoder: column}}), got {feature_columns!r}."
        )
    return columns


def dataset_columns(
    dataset: Any,
    *,
    feature_columns: FeatureColumns,
    label_column: str | None,
    split: str,
) -> tuple[dict[str, np.ndarray], Any, dict[str, str]]:
    """``({encoder: features [N, m]}, labels or None, {encoder: name for messages})`` read
    from the columns of ``dataset`` (``label_column=None``: no labels, for predictions).

    Raises:
        TypeError: ``dataset`` is not a `datasets.Dataset` (a `DatasetDict`: pick a split).
        ValueError: a column is missing, or a feature column does not hold lists of numbers
            of one length.
    """
    what = f"{split}_dataset"
    if isinstance(dataset, datasets.DatasetDict):
        raise TypeError(
            f"{what} is a DatasetDict with splits {list(dataset)}: pass one split, e.g. "
            f"dataset[{next(iter(dataset), 'train')!r}]."
        )
    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(f"{what} must be a datasets.Dataset, got {type(dataset).__name__}.")
    columns = feature_column_map(feature_columns)
    wanted = [*columns.values(), *([label_column] if label_column is not None else [])]
    missing = [column for column in wanted if column not in dataset.column_names]
    if missing:
        raise ValueError(
            f"{what} has no column {', '.join(map(repr, missing))}; its columns are "
            f"{dataset.column_names}. Name the feature columns with feature_columns= (one per "
            f"encoder) and the labels with label_column=."
        )
    rows = dataset.with_format("numpy", columns=wanted)[:]
    names = {encoder: f"{what}[{column!r}]" for encoder, column in columns.items()}
    features = {
        encoder: _feature_rows(rows[column], names[encoder]) for encoder, column in columns.items()
    }
    labels = rows[label_column] if label_column is not None else None
    return features, labels, names


def _feature_rows(values: np.ndarray, name: str) -> np.ndarray:
    """A feature column as one array ``[N, m]``, or an error that says what the rows hold."""
    if values.dtype == object:  # rows of different lengths (or of other things)
        lengths = sorted({len(row) if hasattr(row, "__len__") else 1 for row in values})
        raise ValueError(
            f"{name} must hold one list of m numbers per row ([N, m]), got rows of lengths "
            f"{lengths[:5]}: every row needs the same number of relative features."
        )
    if values.ndim != 2 or values.dtype.kind not in "fiu":
        raise ValueError(
            f"{name} must hold one list of m numbers per row ([N, m]), got an array of shape "
            f"{values.shape} and dtype {values.dtype}."
        )
    return values
