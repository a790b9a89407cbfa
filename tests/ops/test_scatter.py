"""ScatterElements and ScatterNd: CPU execution vs reference and independent loops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC
UFUNC = {-1: None, B.ADD: np.add, B.MUL: np.multiply, B.MAXIMUM: np.maximum, B.MINIMUM: np.minimum}


def reduction(op_type: int) -> BinaryOpT:
    p = BinaryOpT()
    p.opType = op_type
    return p


def check(op_type: int, inputs: list[np.ndarray], p: Any, consts: dict, want: np.ndarray,
          fmt: DimensionFormat = NCHW) -> np.ndarray:  # fmt: skip
    ptype = OpParameter.BinaryOp if p is not None else 0
    one, two = (
        run_op(op_type, inputs, p, ptype, consts=consts, fmt=fmt, num_thread=t)[0] for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    n = len(inputs)
    op = OpDef(0, op_type, "op", tuple(range(n)), (n,), p, ptype, NHWC)
    assert_close(one, reference_of(op_type)(op, inputs)[0])
    assert_close(one, want)
    return one


def loop_elements(data, indices, updates, axis, ufunc):  # type: ignore[no-untyped-def]
    out = data.copy()
    for p in np.ndindex(indices.shape):
        q = list(p)
        q[axis] = int(indices[p]) % data.shape[axis]
        q = tuple(q)
        out[q] = updates[p] if ufunc is None else ufunc(out[q], updates[p])
    return out


@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_axes(axis: int, c: int, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(c)
    data = rng.standard_normal((2, c, 3, 5)).astype(np.float32)
    shape = [2, c, 3, 4]
    n = data.shape[axis]
    indices = rng.integers(-n, n, shape).astype(np.int32)
    updates = rng.standard_normal(shape).astype(np.float32)
    ax = np.array([axis], np.int32)
    want = loop_elements(data, indices, updates, axis, None)
    check(OpType.ScatterElements, [data, indices, updates, ax], reduction(-1), {3: ax}, want, fmt)


@pytest.mark.parametrize("op_type", list(UFUNC))
def test_scatter_elements_reductions_and_duplicates(op_type: int) -> None:
    data = np.array([[1, 2, 3, 4, 5]], np.int32)
    indices = np.array([[1, 1, -1]], np.int32)
    updates = np.array([[7, -3, 2]], np.int32)
    want = loop_elements(data, indices, updates, 1, UFUNC[op_type])
    ax = np.array([1], np.int32)
    check(OpType.ScatterElements, [data, indices, updates, ax], reduction(op_type), {3: ax}, want)
    if op_type == -1:  # no axis input: axis 0; no parameter: assign
        d2 = np.zeros((3, 3), np.float32)
        i2 = np.array([[1, 0, 2], [0, 2, 1]], np.int32)
        u2 = np.array([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]], np.float32)
        want = [[2.0, 1.1, 0.0], [1.0, 0.0, 2.2], [0.0, 2.1, 1.2]]
        check(OpType.ScatterElements, [d2, i2, u2], None, {}, np.array(want, np.float32))


def loop_nd(data, indices, updates, ufunc):  # type: ignore[no-untyped-def]
    out = data.copy()
    depth = indices.shape[-1]
    for p in np.ndindex(indices.shape[:-1]):
        q = tuple(int(v) % n for v, n in zip(indices[p], data.shape, strict=False))
        out[q] = updates[p] if ufunc is None else ufunc(out[q], updates[p])
    assert depth <= data.ndim
    return out


@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("c", [1, 3, 5, 17])
def test_scatter_nd_with_data(c: int, depth: int, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(depth * 10 + c)
    data = rng.standard_normal((2, c, 3, 5)).astype(np.float32)
    lim = np.array(data.shape[:depth])
    indices = (rng.integers(0, 1 << 20, (4, 3, depth)) % lim).astype(np.int32)
    indices[0, 0] -= lim.astype(np.int32)  # negative ones count from the end
    updates = rng.standard_normal((4, 3, *data.shape[depth:])).astype(np.float32)
    shape = np.array(data.shape, np.int32)
    want = loop_nd(data, indices, updates, None)
    check(OpType.ScatterNd, [indices, updates, shape, data], None, {2: shape}, want, fmt)


@pytest.mark.parametrize("op_type", list(UFUNC))
def test_scatter_nd_without_data_and_reductions(op_type: int) -> None:
    indices = np.array([[1], [3], [1]], np.int32)
    updates = np.array([[9, 10], [11, 12], [13, -14]], np.int32)
    shape = np.array([5, 2], np.int32)
    want = loop_nd(np.zeros((5, 2), np.int32), indices, updates, UFUNC[op_type])
    check(OpType.ScatterNd, [indices, updates, shape], reduction(op_type), {2: shape}, want)


def test_out_of_range_is_invalid_value() -> None:
    ax = np.array([0], np.int32)
    with pytest.raises(MNNError) as e:
        data = np.zeros((3,), np.float32)
        check(OpType.ScatterElements, [data, np.array([3], np.int32), np.ones(1, np.float32), ax],
              None, {3: ax}, data)  # fmt: skip
    assert e.value.code == ErrorCode.INVALID_VALUE
    shape = np.array([4, 2], np.int32)
    with pytest.raises(MNNError) as e:
        check(OpType.ScatterNd, [np.array([[-5]], np.int32), np.ones((1, 2), np.float32), shape],
              None, {2: shape}, np.zeros((4, 2), np.float32))  # fmt: skip
    assert e.value.code == ErrorCode.INVALID_VALUE
