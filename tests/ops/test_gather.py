"""Gather, GatherV2, GatherND: CPU execution vs reference (axes, layouts, folding, bad indices)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def axis_param(axis: int) -> AxisT:
    p = AxisT()
    p.axis = axis
    return p


def expected(op_type: int, inputs: list[np.ndarray], p: Any, ptype: int) -> np.ndarray:
    n = len(inputs)
    op = OpDef(0, op_type, "op", tuple(range(n)), (n,), p, ptype, NHWC)
    return reference_of(op_type)(op, inputs)[0]


def check(op_type: int, inputs: list[np.ndarray], p: Any = None, ptype: int = 0, **kw: Any):
    """1 and 2 threads identical and equal to the reference."""
    one, two = (run_op(op_type, inputs, p, ptype, num_thread=t, **kw)[0] for t in (1, 2))
    np.testing.assert_array_equal(one, two)
    assert_close(one, expected(op_type, inputs, p, ptype))
    return one


def data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_v2_axis_param(axis: int, c: int, fmt: DimensionFormat) -> None:
    x = data((2, c, 3, 5))
    n = x.shape[axis]
    idx = np.array([[0, n - 1, -1], [n // 2, 0, -n]], np.int32)
    out = check(OpType.GatherV2, [x, idx], axis_param(axis), OpParameter.Axis, fmt=fmt,
                consts={1: idx})  # fmt: skip
    assert out.ndim == 5


def test_gather_axis_input_and_runtime_indices() -> None:
    x = data((4, 6, 5))
    idx = np.array([5, 0, 2, 2], np.int32)
    axis = np.array(1, np.int32)
    out = check(OpType.GatherV2, [x, idx, axis], fmt=NCHW, consts={2: axis})
    assert out.shape == (4, 4, 5)


def test_gather_int32_and_scalar_index() -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    idx = np.array(1, np.int32)
    out = check(OpType.Gather, [x, idx], fmt=NC4HW4, consts={1: idx})
    np.testing.assert_array_equal(out, x[1])


def test_gather_folds_shape_arithmetic() -> None:
    shape = np.array([1, 128, 256], np.int32)
    idx = np.array([-1], np.int32)
    out = run_op(OpType.GatherV2, [shape, idx], consts={0: shape, 1: idx})[0]
    np.testing.assert_array_equal(out, [256])


@pytest.mark.parametrize("bad", [3, -4, 100])
def test_out_of_range_index_is_invalid_value(bad: int) -> None:
    x, idx = data((2, 3)), np.array([0, bad], np.int32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.GatherV2, [x, idx], axis_param(1), OpParameter.Axis, fmt=NCHW)
    assert e.value.code == ErrorCode.INVALID_VALUE


def test_bad_axis_and_float_indices() -> None:
    x = data((2, 3))
    with pytest.raises(MNNError) as e:
        run_op(OpType.GatherV2, [x, np.zeros(1, np.int32)], axis_param(2), OpParameter.Axis)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    with pytest.raises(MNNError) as e:
        run_op(OpType.GatherV2, [x, np.zeros(1, np.float32)])
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize(
    ("shape", "idx"),
    [
        ((4, 5, 3), [[1, 2], [3, -1], [0, 0]]),
        ((4, 5, 3), [[[1], [3]], [[0], [2]]]),
        ((4, 5, 3), [[1, 2, 0], [3, 4, 2]]),
        ((6, 5), [[1], [5]]),
    ],
)
def test_gather_nd(shape: tuple[int, ...], idx: list, fmt: DimensionFormat) -> None:
    x, i = data(shape), np.array(idx, np.int32)
    check(OpType.GatherND, [x, i], fmt=fmt)
    check(OpType.GatherND, [x, i], fmt=fmt, consts={1: i})


def test_gather_nd_errors() -> None:
    x = data((4, 5))
    with pytest.raises(MNNError) as e:
        run_op(OpType.GatherND, [x, np.array([[4, 0]], np.int32)], fmt=NCHW)
    assert e.value.code == ErrorCode.INVALID_VALUE
    with pytest.raises(MNNError) as e:  # depth 2 after 1 batch dim of a rank-2 params
        run_op(OpType.GatherND, [x, np.array([[0, 0]], np.int32)], axis_param(1), OpParameter.Axis)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    with pytest.raises(MNNError) as e:
        run_op(OpType.GatherND, [x, np.zeros((1, 3), np.int32)], fmt=NCHW)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize(
    ("shape", "idx_shape", "b"),
    [((2, 2, 2), (2, 1), 1), ((3, 4, 5, 2), (3, 2, 2), 1), ((2, 3, 4, 5), (2, 3, 6, 1), 2)],
)
def test_gather_nd_batch_dims(shape: tuple, idx_shape: tuple, b: int, fmt: DimensionFormat) -> None:
    # MNN's converter adds each batch's offset to the first index column (ONNX batch_dims)
    x = data(shape, 3)
    depth = idx_shape[-1]
    lim = np.array(shape[b : b + depth])
    i = (np.random.default_rng(b).integers(0, 1 << 20, idx_shape) % lim).astype(np.int32)
    shifted = i.copy()
    batch = np.arange(int(np.prod(shape[:b]))).reshape(idx_shape[:b] + (1,) * (i.ndim - b))
    shifted[..., 0] += (batch * shape[b])[..., 0]
    out = check(OpType.GatherND, [x, shifted], axis_param(b), OpParameter.Axis, fmt=fmt)
    want = np.empty(out.shape, np.float32)
    for p in np.ndindex(idx_shape[:-1]):  # ONNX's batch_dims on the unshifted indices
        want[p] = x[(*p[:b], *(int(v) for v in i[p]))]
    np.testing.assert_array_equal(out, want)
