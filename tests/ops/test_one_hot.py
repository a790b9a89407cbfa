"""OneHot: CPU execution vs reference (axes, dtypes, out-of-range indices)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.OneHotParam import OneHotParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat
from tests.ops.test_gather import check

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def param(axis: int = -1) -> OneHotParamT:
    p = OneHotParamT()
    p.axis = axis
    return p


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_one_hot(axis: int, dtype: type, fmt: DimensionFormat) -> None:
    idx = np.array([[0, 3, -1], [5, 2, 4]], np.int32)  # -1 and 5 (= depth) select nothing
    depth, on, off = np.array(5, np.int32), np.array(7, dtype), np.array(-2, dtype)
    out = check(OpType.OneHot, [idx, depth, on, off], param(axis), OpParameter.OneHotParam,
                fmt=fmt, consts={1: depth, 2: on, 3: off})  # fmt: skip
    assert out.dtype == dtype and out.shape[axis] == 5
    assert (out == 7).sum() == 4


def test_one_hot_runtime_values_and_fold() -> None:
    idx, depth = np.array([1, 0], np.int32), np.array(3, np.int32)
    on, off = np.array([1.5], np.float32), np.array([0.5], np.float32)
    check(OpType.OneHot, [idx, depth, on, off], param(), OpParameter.OneHotParam, fmt=NCHW,
          consts={1: depth})  # fmt: skip
    out = check(OpType.OneHot, [idx, depth, on, off], param(), OpParameter.OneHotParam,
                consts={0: idx, 1: depth, 2: on, 3: off})  # fmt: skip
    np.testing.assert_array_equal(out, [[0.5, 1.5, 0.5], [1.5, 0.5, 0.5]])


def test_one_hot_errors() -> None:
    idx, on, off = np.zeros(2, np.int32), np.ones(1, np.float32), np.zeros(1, np.float32)
    for depth, p, code in (
        (np.array(-1, np.int32), param(), ErrorCode.COMPUTE_SIZE_ERROR),
        (np.array(2, np.int32), param(3), ErrorCode.COMPUTE_SIZE_ERROR),
    ):
        with pytest.raises(MNNError) as e:
            check(OpType.OneHot, [idx, depth, on, off], p, OpParameter.OneHotParam,
                  consts={1: depth})  # fmt: skip
        assert e.value.code == code
    # a depth known only at run time is evaluated then (the session re-plans)
    out = check(OpType.OneHot, [idx, np.array(2, np.int32), on, off], param(),
                OpParameter.OneHotParam)  # fmt: skip
    assert out.shape == (2, 2)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("axis", [1, -2])
def test_one_hot_float_indices_and_depth(axis: int, fmt: DimensionFormat) -> None:
    # ONNX allows any numeric indices / depth: floats truncate toward zero; NaN, inf, negative
    # and too-large ones select nothing
    idx = np.array([[1.0, 9.7, np.nan], [-0.5, -1.0, np.inf], [4.2, 10.0, 0.0]], np.float32)
    depth, on, off = np.array([10.0], np.float32), np.array([3], np.int32), np.array([1], np.int32)
    out = check(OpType.OneHot, [idx, depth, on, off], param(axis), OpParameter.OneHotParam,
                fmt=fmt, consts={1: depth})  # fmt: skip
    assert out.shape == (3, 10, 3)
    hot = [(0, 1, 0), (0, 9, 1), (1, 0, 0), (2, 4, 0), (2, 0, 2)]  # -0.5 truncates to 0
    want = np.ones((3, 10, 3), np.int32)
    for p in hot:
        want[p] = 3
    np.testing.assert_array_equal(out, want)
