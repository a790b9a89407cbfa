"""GatherElements: CPU execution vs reference and an independent loop (axes, layouts, threads)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpType
from mnnpy.ops.gather_elements import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def loop(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    out = np.empty(indices.shape, data.dtype)
    for p in np.ndindex(indices.shape):
        q = list(p)
        q[axis] = int(indices[p]) % data.shape[axis]
        out[p] = data[tuple(q)]
    return out


def check(data: np.ndarray, indices: np.ndarray, axis: int, fmt: DimensionFormat = NCHW):
    inputs = [data, indices, np.array([axis], np.int32)]
    one, two = (
        run_op(OpType.GatherElements, inputs, consts={2: inputs[2]}, fmt=fmt, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.GatherElements, "op", (0, 1, 2), (3,), None, 0, NHWC)
    assert_close(one, reference(op, inputs)[0])
    np.testing.assert_array_equal(one, loop(data, indices, axis))
    return one


@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("axis", [0, 1, 3, -1])
def test_axes_and_layouts(axis: int, c: int, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(c)
    data = rng.standard_normal((2, c, 3, 5)).astype(np.float32)
    shape = [2, max(c - 1, 1), 3, 4]
    shape[axis] = 6  # may exceed data's extent on the axis
    n = data.shape[axis]
    indices = rng.integers(-n, n, shape).astype(np.int32)
    check(data, indices, axis, fmt)


def test_int32_and_onnx_example() -> None:
    data = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.int32)
    out = check(data, np.array([[-1, -2, 0], [-2, 0, 0]], np.int32), 0)
    np.testing.assert_array_equal(out, [[7, 5, 3], [4, 2, 3]])


def test_out_of_range_index_is_invalid_value() -> None:
    data = np.zeros((3, 3), np.float32)
    for bad in (3, -4):
        with pytest.raises(MNNError) as e:
            check(data, np.array([[0, bad]], np.int32), 1)
        assert e.value.code == ErrorCode.INVALID_VALUE
