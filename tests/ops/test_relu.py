"""ReLU (leaky) and ReLU6 (clamp): CPU execution vs reference."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Relu import ReluT
from mnnpy._schema.MNN.Relu6 import Relu6T
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.relu import reference_relu, reference_relu6
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_op

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def relu(slope: float) -> ReluT:
    p = ReluT()
    p.slope = slope
    return p


def relu6(lo: float, hi: float) -> Relu6T:
    p = Relu6T()
    p.minValue, p.maxValue = lo, hi
    return p


def op(op_type: int, p: object, pt: int) -> OpDef:
    return OpDef(0, op_type, "op", (0,), (1,), p, pt, DimensionFormat.NHWC)


def data(c: int) -> np.ndarray:
    return np.random.default_rng(c).standard_normal((2, c, 5, 7)).astype(np.float32) * 4


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("slope", [0.0, 0.1])
def test_relu(c: int, fmt: DimensionFormat, slope: float) -> None:
    x = data(c)
    one, two = (
        run_op(OpType.ReLU, [x], relu(slope), OpParameter.Relu, fmt=fmt, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    assert_close(one, reference_relu(op(OpType.ReLU, relu(slope), OpParameter.Relu), [x])[0])


def test_relu_without_param() -> None:
    x = data(3)
    assert_close(run_op(OpType.ReLU, [x])[0], np.maximum(x, 0))


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 4, 5, 17])
def test_relu6(c: int, fmt: DimensionFormat) -> None:
    x = data(c)
    for p in (relu6(0.0, 6.0), relu6(-1.0, 2.5)):
        got = run_op(OpType.ReLU6, [x], p, OpParameter.Relu6, fmt=fmt, num_thread=2)[0]
        assert_close(got, reference_relu6(op(OpType.ReLU6, p, OpParameter.Relu6), [x])[0])
    assert_close(run_op(OpType.ReLU6, [x], fmt=fmt)[0], np.clip(x, 0, 6))


def test_relu6_with_positive_min_keeps_padding_zero() -> None:
    x = data(5)
    interp = mnnpy.Interpreter.from_buffer(
        make_single_op_net(OpType.ReLU6, [x], relu6(1.0, 2.0), OpParameter.Relu6)
    )
    session = interp.create_session()
    interp.get_session_input(session, "in0").copy_from(x)
    interp.run_session(session)
    out = interp.get_session_output(session, "out0")
    padding = out.host.reshape(2, 2, 35, 4)[:, 1, :, 1:]
    assert out.is_packed and not padding.any()
    assert_close(out.numpy(), np.clip(x, 1, 2))
