"""Property tests over the public API (issue #25): random shapes, dtypes, NaN / Inf, huge
values, empty tables, duplicated rows, negative and float indices. The property: the call
either raises an error of relrep_hf's own (a ValueError / TypeError / OSError raised inside
relrep_hf, which says what to do) or returns a finite result.

``python -m pytest -q -s tests/test_hostile.py`` prints how many cases were tried.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import relrep_hf
from relrep_hf import AnchorSet, RelativeProjector, Statistics
from relrep_hf.functional import relative_projection

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same cases on every run
    suppress_health_check=[HealthCheck.too_slow],
)
PACKAGE = str(Path(relrep_hf.__file__).resolve().parent)
TRIED: dict[str, int] = {}


def clear_or_finite(name: str, call: Callable[[], object]) -> object:
    """``call()``'s result, checked finite; an error must be raised on purpose inside relrep_hf."""
    TRIED[name] = TRIED.get(name, 0) + 1
    try:
        result = call()
    except (ValueError, TypeError, OSError) as error:
        raised_in = traceback.extract_tb(error.__traceback__)[-1].filename
        assert raised_in.startswith(PACKAGE), (
            f"a raw {type(error).__name__} from {raised_in}: {error}"
        )
        assert len(str(error)) > 20, f"a terse message: {error}"
        return None
    for tensor in _tensors(result):
        assert bool(torch.isfinite(tensor).all()), f"a non-finite result: {tensor}"
    return result


def _tensors(result: object) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, Statistics):
        return [result.mean, result.scatter]
    if isinstance(result, AnchorSet):
        return [result.mixture]
    if isinstance(result, RelativeProjector):
        return [t for t in result.state_dict().values() if t.is_floating_point()]
    return []


VALUES = st.one_of(
    st.floats(-3, 3, width=32),
    st.sampled_from([0.0, float("nan"), float("inf"), -float("inf"), 1e200, -1e30, 1e-300]),
)


ROW_COUNTS, DIMS = st.integers(0, 12), st.integers(0, 5)


@st.composite
def tables(draw, rows=ROW_COUNTS, dims=DIMS):
    """A table [n, d] of odd values, as a tensor, a NumPy array or a list, maybe with
    duplicated rows or the wrong number of dimensions."""
    n, d = draw(rows), draw(dims)
    values = draw(st.lists(VALUES, min_size=n * d, max_size=n * d))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.float16, np.int64]))
    with np.errstate(all="ignore"):
        array = np.array(values, dtype=np.float64).reshape(n, d).astype(dtype)
    if n > 1 and draw(st.booleans()):
        array[1:] = array[:1]  # every row the same
    shape = draw(st.sampled_from(["table", "flat", "3d"]))
    if shape == "flat":
        array = array.reshape(-1)
    elif shape == "3d":
        array = array[None]
    kind = draw(st.sampled_from(["tensor", "numpy", "list"]))
    if kind == "tensor":
        return torch.from_numpy(array.copy())
    return array if kind == "numpy" else array.tolist()


ROWS = st.one_of(
    st.lists(st.integers(-20, 30), max_size=20),
    st.lists(st.floats(-2, 20), min_size=1, max_size=20),
    st.lists(st.integers(0, 11), min_size=1, max_size=20).map(np.array),
    st.lists(st.integers(0, 11), min_size=1, max_size=20).map(torch.tensor),
    st.just(range(0, 8)),
)


@SETTINGS
@given(x=tables())
def test_statistics(x):
    clear_or_finite("Statistics.from_embeddings", lambda: Statistics.from_embeddings(x))


@SETTINGS
@given(x=tables(rows=st.integers(0, 12)), m=st.integers(-1, 6), data=st.data())
def test_projector(x, m, data):
    similarity = data.draw(st.sampled_from(["wip", "cosine", "euclidean", "inner"]))

    def build_and_project():
        table = torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x
        stats = Statistics.from_embeddings(x)
        projector = RelativeProjector.from_statistics(
            table[:m] if table.ndim else table, stats, similarity=similarity
        )
        return projector(x)

    clear_or_finite("RelativeProjector.from_statistics + forward", build_and_project)


@SETTINGS
@given(x=tables(rows=st.integers(1, 12)), a=tables(rows=st.integers(1, 6)), data=st.data())
def test_relative_projection(x, a, data):
    similarity = data.draw(st.sampled_from(["cosine", "euclidean", "inner"]))
    clear_or_finite("relative_projection", lambda: relative_projection(x, a, similarity=similarity))


@pytest.mark.parametrize("similarity", ["wip", "cosine", "euclidean", "inner"])
def test_relative_projection_of_mixed_float_dtypes_is_computed_in_the_wider(similarity):
    """Found by the property test above (float64 rows, float32 anchors: a raw torch error)."""
    x = torch.randn(5, 3, dtype=torch.float64)
    anchors = torch.randn(2, 3)
    stats = {"mean": torch.zeros(3), "whitening": torch.eye(3)} if similarity == "wip" else {}
    features = relative_projection(x, anchors, similarity=similarity, **stats)
    assert features.dtype == torch.float64 and bool(torch.isfinite(features).all())
    expected = relative_projection(x, anchors.double(), similarity=similarity, **stats)
    assert torch.allclose(features, expected)


@SETTINGS
@given(x=tables(rows=st.integers(0, 16)), m=st.integers(-1, 8), data=st.data())
def test_baseline_anchor_sets(x, m, data):
    strategy = data.draw(st.sampled_from(["kmeans", "farthest_point", "random", "full_support"]))
    size = len(x) if isinstance(x, list) else (x.shape[0] if x.ndim else 0)
    support = [f"input {i}" for i in range(size)]
    if strategy in ("kmeans", "farthest_point"):
        call = lambda: getattr(AnchorSet, strategy)(support, x, m)  # noqa: E731
    elif strategy == "random":
        call = lambda: AnchorSet.random(support, m)  # noqa: E731
    else:
        call = lambda: AnchorSet.full_support(support)  # noqa: E731
    clear_or_finite(f"AnchorSet.{strategy}", call)


@SETTINGS
@given(
    n=st.integers(1, 40),
    extra=st.integers(0, 3),
    support_rows=ROWS,
    fit_rows=st.one_of(st.none(), ROWS),
    kind=st.sampled_from(["tensor", "numpy"]),
    poison=st.sampled_from([None, float("nan"), 1e200]),
)
def test_shared_linear_rows(n, extra, support_rows, fit_rows, kind, poison):
    generator = torch.Generator().manual_seed(n)
    spaces = {
        "e0": torch.randn(n, 3, generator=generator, dtype=torch.float64),
        "e1": torch.randn(n + extra, 4, generator=generator, dtype=torch.float64),
    }
    if poison is not None:
        spaces["e1"][0, 0] = poison
    if kind == "numpy":
        spaces = {name: space.numpy() for name, space in spaces.items()}
    size = len(support_rows) if hasattr(support_rows, "__len__") else 0
    support = [f"input {i}" for i in range(size)]
    clear_or_finite(
        "AnchorSet.shared_linear",
        lambda: AnchorSet.shared_linear(
            support, spaces, 2, support_rows=support_rows, fit_rows=fit_rows, shrinkage=0.15
        ),
    )


@pytest.fixture(scope="module", autouse=True)
def report_cases():
    yield
    print(f"\nproperty cases tried: {sum(TRIED.values())} ({TRIED})")


def test_embed_over_a_fitted_run_refuses_or_overwrites(tmp_path):
    """A fitted run is refused without ``overwrite``; with it, the fit goes and the cache stays."""
    from relrep_hf.pipeline.run_folder import RunError, prepare_embed

    (tmp_path / "anchor_set").mkdir()
    (tmp_path / "embeddings").mkdir()
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "run.json").write_text('{"encoders": [], "support_rows": [0]}')
    with pytest.raises(RunError, match="--overwrite"):
        prepare_embed(tmp_path, overwrite=False)
    assert (tmp_path / "anchor_set").is_dir()
    prepare_embed(tmp_path, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["embeddings"]
    prepare_embed(tmp_path, overwrite=False)  # nothing fitted left: allowed


def test_row_indices_are_checked():
    from relrep_hf.utils.validation import check_row_indices

    assert check_row_indices(range(3), 3).tolist() == [0, 1, 2]
    assert check_row_indices(np.array([2, 0]), 3).tolist() == [2, 0]
    for rows, error in (([-1], ValueError), ([3], ValueError), ([], ValueError),
                        ([0.0], TypeError), ([True], TypeError),
                        (torch.tensor([0.5]), TypeError)):  # fmt: skip
        with pytest.raises(error):
            check_row_indices(rows, 3)
