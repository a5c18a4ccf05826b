"""`as_embeddings`: the one conversion every function taking embeddings goes through."""

import numpy as np
import pytest
import torch

from relrep_hf.utils.validation import (
    DeviceMismatchError,
    as_embeddings,
    check_distinct_names,
    check_same_device,
)


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


def test_check_same_device_returns_the_one_device_and_names_each_otherwise():
    cpu, meta = torch.zeros(2), torch.empty(2, device="meta")
    assert check_same_device(a=cpu, b=cpu, c=None) == torch.device("cpu")
    assert check_same_device(a=None) is None and check_same_device() is None
    with pytest.raises(DeviceMismatchError, match=r"support embeddings on cpu, mean on meta\."):
        check_same_device(support_embeddings=cpu, mean=meta)
    assert issubclass(DeviceMismatchError, ValueError)


def test_check_distinct_names_refuses_names_equal_as_text():
    check_distinct_names({"a": 1, "b": 2, 3: 4})
    with pytest.raises(ValueError, match=r"1 and '1' have the same name"):
        check_distinct_names({1: None, "1": None})
