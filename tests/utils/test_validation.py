"""`as_embeddings`: the one conversion every function taking embeddings goes through."""

import numpy as np
import pytest
import torch

from relrep_hf.utils.validation import as_embeddings


def test_numpy_is_shared_and_keeps_its_dtype():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = as_embeddings(array)
    assert tensor.dtype == torch.float32 and tensor.shape == (3, 4)
    array[0, 0] = 7.0  # shared memory: no copy of large embedding matrices
    assert tensor[0, 0] == 7.0
    assert as_embeddings(array.astype(np.float16)).dtype == torch.float16


def test_lists_of_floats_rows_and_arrays_become_float64():
    rows = [[0.5, 1.5], [2.0, -1.0]]
    expected = torch.tensor(rows, dtype=torch.float64)
    assert torch.equal(as_embeddings(rows), expected)
    assert torch.equal(as_embeddings([np.array(r) for r in rows]), expected)
    assert torch.equal(as_embeddings([0.5, 1.5]), expected[0])
    stacked = as_embeddings([torch.tensor(r) for r in rows])
    assert torch.equal(stacked, expected.float())


def test_a_tensor_is_returned_as_it_is():
    tensor = torch.randn(2, 3)
    assert as_embeddings(tensor) is tensor


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (np.array([["a", "b"]]), TypeError, "must hold floats"),
        (np.ones((2, 2), dtype=np.int64), TypeError, "astype"),
        ([[1.0, 2.0], [3.0]], ValueError, "rectangular table of floats"),
        ("0.5 1.5", TypeError, "a NumPy array or a list of floats, got str"),
    ],
)
def test_what_cannot_be_embeddings_is_named(value, error, match):
    with pytest.raises(error, match=match):
        as_embeddings(value)
