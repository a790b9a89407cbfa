"""SliceTf: const begin / size (-1 = to the end, negative begin), folding of int32 content."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def run(x: np.ndarray, begin: list[int], size: list[int], **kw: object) -> np.ndarray:
    b, s = np.array(begin, np.int32), np.array(size, np.int32)
    one, two = (
        run_op(OpType.SliceTf, [x, b, s], consts={1: b, 2: s}, num_thread=t, **kw)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    return one


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW, NHWC])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_slice(c: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 5, 7)).astype(np.float32)
    np.testing.assert_array_equal(run(x, [1, 0, 1, 2], [-1, -1, 3, 4], fmt=fmt), x[1:, :, 1:4, 2:6])
    np.testing.assert_array_equal(
        run(x, [0, c - 1, -2, 0], [2, 1, -1, 1], fmt=fmt), x[:, c - 1 :, 3:, :1]
    )


def test_int32_shape_vector_folds() -> None:
    s = np.array([2, 16, 1, 1], np.int32)
    b, n = np.array([1], np.int32), np.array([2], np.int32)
    out = run_op(OpType.SliceTf, [s, b, n], consts={0: s, 1: b, 2: n})[0]
    np.testing.assert_array_equal(out, [16, 1])


@pytest.mark.parametrize(
    ("begin", "size"), [([0, 3], [1, 1]), ([0, 1], [1, 3]), ([0, -4], [1, 1]), ([0], [1])]
)
def test_out_of_range(begin: list[int], size: list[int]) -> None:
    with pytest.raises(MNNError) as e:
        run(np.zeros((2, 3), np.float32), begin, size)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_begin_known_only_at_run_time() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, 1], np.int32)
    (got,) = run_op(
        OpType.SliceTf,
        [x, b, np.ones(2, np.int32)],
        consts={2: np.ones(2, np.int32)},
        fmt=DimensionFormat.NCHW,
    )
    np.testing.assert_array_equal(got, x[1:2, 1:2])


def test_begin_out_of_range_at_run_time_is_an_error() -> None:
    x, b = np.zeros((2, 3), np.float32), np.array([5, 0], np.int32)
    with pytest.raises(MNNError) as e:
        run_op(
            OpType.SliceTf,
            [x, b, np.ones(2, np.int32)],
            consts={2: np.ones(2, np.int32)},
            fmt=DimensionFormat.NCHW,
        )
    assert e.value.code in (ErrorCode.COMPUTE_SIZE_ERROR, ErrorCode.INVALID_VALUE)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("size", [[1, 3, 2, -1], [1, 2, 2, 3]])
def test_run_time_begin_with_and_without_size_to_the_end(
    fmt: DimensionFormat, size: list[int]
) -> None:
    """Sizes alone give the shape (the begin is read when the op runs); a size of -1 still
    needs the begin's values for the shape."""
    x = np.random.default_rng(5).standard_normal((2, 5, 4, 5)).astype(np.float32)
    b, s = np.array([1, 2, 1, 2], np.int32), np.array(size, np.int32)
    (got,) = run_op(OpType.SliceTf, [x, b, s], consts={2: s}, fmt=fmt)
    n = [x.shape[d] - b[d] if v == -1 else v for d, v in enumerate(size)]
    np.testing.assert_array_equal(got, x[1 : 1 + n[0], 2 : 2 + n[1], 1 : 1 + n[2], 2 : 2 + n[3]])


def test_size_that_cannot_fit_is_an_error_before_the_begin_is_known() -> None:
    with pytest.raises(MNNError) as e:
        run_op(
            OpType.SliceTf,
            [np.zeros((2, 3), np.float32), np.zeros(2, np.int32), np.array([1, 4], np.int32)],
            consts={2: np.array([1, 4], np.int32)},
            fmt=DimensionFormat.NCHW,
        )
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW, NHWC])
@pytest.mark.parametrize("c", [3, 4, 5, 17])
@pytest.mark.parametrize("first", [0, 2, 3, -1, -4])
def test_run_time_begin_of_whole_rows(c: int, fmt: DimensionFormat, first: int) -> None:
    """A GRU / LSTM body's gate slice (only dim 0 cut, begin read at run time) is one storage
    copy of the rows (``CPUSliceTfAtRun.bind``); negative begins go through the checks."""
    x = np.random.default_rng(c).standard_normal((4, c, 1, 3)).astype(np.float32)
    b, s = np.array([first, 0, 0, 0], np.int32), np.array([1, c, 1, 3], np.int32)
    for t in (1, 2):
        (got,) = run_op(OpType.SliceTf, [x, b, s], consts={2: s}, fmt=fmt, num_thread=t)
        np.testing.assert_array_equal(got, x[first % 4 : first % 4 + 1])


@pytest.mark.parametrize("begin", [[4, 0], [-5, 0], [1, 1], [0, -1]])
def test_run_time_begin_of_whole_rows_out_of_range(begin: list[int]) -> None:
    x, b, s = np.zeros((4, 3), np.float32), np.array(begin, np.int32), np.array([1, 3], np.int32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.SliceTf, [x, b, s], consts={2: s}, fmt=DimensionFormat.NCHW)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    assert "SliceTf" in str(e.value)
