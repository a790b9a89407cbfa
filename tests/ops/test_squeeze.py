"""Squeeze / Unsqueeze: axes from the parameter (negative allowed, empty = all 1s) or input 1."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.SqueezeParam import SqueezeParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def param(dims: list[int] | None) -> SqueezeParamT:
    p = SqueezeParamT()
    p.squeezeDims = dims
    return p


def run(op_type: int, x: np.ndarray, dims: list[int] | None, **kw: object) -> np.ndarray:
    one, two = (
        run_op(op_type, [x], param(dims), OpParameter.SqueezeParam, num_thread=t, **kw)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    return one


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 5])
def test_squeeze(c: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 1, 3, 1)).astype(np.float32)
    np.testing.assert_array_equal(run(OpType.Squeeze, x, [2], fmt=fmt), x[:, :, 0])
    np.testing.assert_array_equal(run(OpType.Squeeze, x, [-1, 2], fmt=fmt), x[:, :, 0, :, 0])
    np.testing.assert_array_equal(run(OpType.Squeeze, x, [], fmt=fmt), np.squeeze(x))


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [3, 17])
def test_unsqueeze(c: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3)).astype(np.float32)
    np.testing.assert_array_equal(run(OpType.Unsqueeze, x, [0], fmt=fmt), x[None])
    np.testing.assert_array_equal(run(OpType.Unsqueeze, x, [-1], fmt=fmt), x[..., None])
    np.testing.assert_array_equal(run(OpType.Unsqueeze, x, [1, 3], fmt=fmt), x[:, None, :, None])


def test_unsqueeze_int_scalar_folds() -> None:
    x = np.array(2, np.int32)
    out = run_op(OpType.Unsqueeze, [x], param([0]), OpParameter.SqueezeParam, consts={0: x})[0]
    np.testing.assert_array_equal(out, [2])


def test_axes_from_const_input() -> None:
    x = np.zeros((2, 1, 3), np.float32)
    axes = np.array([1], np.int32)
    out = run_op(
        OpType.Squeeze, [x, axes], param(None), OpParameter.SqueezeParam, consts={1: axes}, fmt=NCHW
    )[0]
    assert out.shape == (2, 3)


@pytest.mark.parametrize(
    ("op_type", "dims"),
    [
        (OpType.Squeeze, [0]),
        (OpType.Squeeze, [3]),
        (OpType.Unsqueeze, [4]),
        (OpType.Unsqueeze, [1, 1]),
    ],
)
def test_bad_axes(op_type: int, dims: list[int]) -> None:
    with pytest.raises(MNNError) as e:
        run_op(op_type, [np.zeros((2, 1, 3), np.float32)], param(dims), OpParameter.SqueezeParam)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
