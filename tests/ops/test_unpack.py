"""Unpack and Pack: CPU execution vs reference (axes, layouts, dropped slices)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.PackParam import PackParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.unpack import reference, reference_pack
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("n_out", [None, 2])
def test_unpack(axis: int, n_out: int | None, fmt: DimensionFormat) -> None:
    p = AxisT()
    p.axis = axis
    x = data((3, 5, 4, 3))
    n = n_out or x.shape[axis]
    outs = [
        run_op(OpType.Unpack, [x], p, OpParameter.Axis, num_outputs=n, fmt=fmt, num_thread=t)
        for t in (1, 2)
    ]
    op = OpDef(0, OpType.Unpack, "op", (0,), tuple(range(1, n + 1)), p, OpParameter.Axis, NHWC)
    for one, two, want in zip(outs[0], outs[1], reference(op, [x]), strict=True):
        np.testing.assert_array_equal(one, two)
        np.testing.assert_array_equal(one, want)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("axis", [0, 1, 3, -1])
def test_pack(axis: int, fmt: DimensionFormat) -> None:
    p = PackParamT()
    p.axis = axis
    xs = [data((2, 5, 3), seed) for seed in range(3)]
    op = OpDef(0, OpType.Pack, "op", (0, 1, 2), (3,), p, OpParameter.PackParam, NHWC)
    for t in (1, 2):
        out = run_op(OpType.Pack, xs, p, OpParameter.PackParam, fmt=fmt, num_thread=t)[0]
        np.testing.assert_array_equal(out, reference_pack(op, xs)[0])
    with pytest.raises(MNNError) as e:
        run_op(OpType.Pack, [xs[0], data((2, 5, 4))], p, OpParameter.PackParam)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_unpack_too_many_outputs() -> None:
    p = AxisT()
    p.axis = 0
    with pytest.raises(MNNError) as e:
        run_op(OpType.Unpack, [data((2, 3))], p, OpParameter.Axis, num_outputs=3)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
