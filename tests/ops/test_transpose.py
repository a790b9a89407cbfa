"""Transpose (perm input) and ExpandDims: CPU execution vs reference, layouts, folding."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.ExpandDims import ExpandDimsT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op
from tests.ops.test_gather import check

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def data(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 5, 17])
@pytest.mark.parametrize("perm", [(0, 2, 3, 1), (3, 1, 0, 2), (0, 1, 2, 3)])
def test_transpose(perm: tuple, c: int, fmt: DimensionFormat) -> None:
    p = np.array(perm, np.int32)
    out = check(OpType.Transpose, [data((2, c, 3, 5)), p], fmt=fmt, consts={1: p})
    assert out.shape == tuple((2, c, 3, 5)[d] for d in perm)


def test_transpose_int_fold_and_errors() -> None:
    x, p = np.arange(6, dtype=np.int32).reshape(2, 3), np.array([1, 0], np.int32)
    np.testing.assert_array_equal(check(OpType.Transpose, [x, p], consts={0: x, 1: p}), x.T)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Transpose, [x, np.array([0, 0], np.int32)], consts={1: p * 0})
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    np.testing.assert_array_equal(check(OpType.Transpose, [x, p]), x.T)  # perm at run time


def expand_param(axis: int) -> ExpandDimsT:
    p = ExpandDimsT()
    p.axis = axis
    return p


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -4])
def test_expand_dims(axis: int, fmt: DimensionFormat) -> None:
    x = data((2, 5, 3))
    out = check(OpType.ExpandDims, [x], expand_param(axis), OpParameter.ExpandDims, fmt=fmt)
    assert out.shape == np.expand_dims(x, axis).shape
    a = np.array([axis], np.int32)
    check(OpType.ExpandDims, [x, a], fmt=fmt, consts={1: a})


def test_expand_dims_errors() -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.ExpandDims, [data((2, 3))], expand_param(3), OpParameter.ExpandDims)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
