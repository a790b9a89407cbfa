"""Softmax: CPU kernel (plain and through NC4HW4 scratch) vs reference."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.softmax import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def axis(a: int) -> AxisT:
    p = AxisT()
    p.axis = a
    return p


def check(x: np.ndarray, a: int, fmt: DimensionFormat) -> np.ndarray:
    one, two = (
        run_op(OpType.Softmax, [x], axis(a), OpParameter.Axis, fmt=fmt, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.Softmax, "op", (0,), (1,), axis(a), OpParameter.Axis, DimensionFormat.NHWC)
    assert_close(one, reference(op, [x])[0])
    return one


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("a", [1, -1, 0, 2])
def test_axes(c: int, a: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
    out = check(x, a, fmt)
    assert_close(out.sum(axis=a), np.ones_like(out.sum(axis=a)))


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_two_dims_and_large_values(fmt: DimensionFormat) -> None:
    x = np.random.default_rng(0).standard_normal((2, 10)).astype(np.float32) * 1000
    out = check(x, 1, fmt)
    assert np.isfinite(out).all()


def test_axis_out_of_range() -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.Softmax, [np.zeros((2, 3), np.float32)], axis(2), OpParameter.Axis)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_int_input_is_not_supported_and_says_why() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Softmax, [x], axis(1), OpParameter.Axis, fmt=NCHW)
    assert e.value.code == ErrorCode.NOT_SUPPORT
    assert "Softmax" in str(e.value) and "'op'" in str(e.value) and "dtype int32" in str(e.value)
