"""ArgMax / ArgMin: CPU execution vs reference (axes, ties, NaN, int32, layouts, threads)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.ArgMax import ArgMaxT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.arg_max import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(axis: int) -> ArgMaxT:
    p = ArgMaxT()
    p.axis, p.topK = axis, 1
    return p


def check(op_type: int, x: np.ndarray, axis: int, fmt: DimensionFormat = NCHW) -> np.ndarray:
    p = param(axis)
    one, two = (
        run_op(op_type, [x], p, OpParameter.ArgMax, fmt=fmt, num_thread=t)[0] for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, op_type, "op", (0,), (1,), p, OpParameter.ArgMax, NHWC)
    want = reference(op, [x])[0]
    assert one.dtype == np.int32 and want.dtype == np.int32
    np.testing.assert_array_equal(one, want)
    return one


@pytest.mark.parametrize("op_type", [OpType.ArgMax, OpType.ArgMin])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_axes(op_type: int, c: int, axis: int) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
    out = check(op_type, x, axis)
    found = np.argmax(x, axis) if op_type == OpType.ArgMax else np.argmin(x, axis)
    np.testing.assert_array_equal(out, found)  # independent of the reference


@pytest.mark.parametrize("op_type", [OpType.ArgMax, OpType.ArgMin])
def test_ties_first_nan_and_int32(op_type: int) -> None:
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-5, -7, -7, -5]], np.float32)
    out = check(op_type, x, 1)
    want = [1, 0, 0] if op_type == OpType.ArgMax else [3, 0, 1]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(check(op_type, x.astype(np.int32) - 3, -1), want)
    nan = np.array([[np.nan, 1, np.nan, 4], [np.nan] * 4], np.float32)
    np.testing.assert_array_equal(check(op_type, nan, 1), [3, 0] if op_type == OpType.ArgMax
                                  else [1, 0])  # fmt: skip


def test_nhwc_layout_and_bad_axis() -> None:
    x = np.random.default_rng(3).standard_normal((3, 5, 7)).astype(np.float32)
    check(OpType.ArgMax, x, 2, fmt=NHWC)
    with pytest.raises(MNNError) as e:
        check(OpType.ArgMax, x, 3)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
