"""OpenCL executions, one op at a time, against NumPy references and the CPU backend.

Every case runs with ``strict=True``, so an op that would fall back to the CPU fails the test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import mnnpy  # noqa: E402 - after the skip
from mnnpy._schema.MNN.Axis import AxisT  # noqa: E402
from mnnpy._schema.MNN.BinaryOp import BinaryOpT  # noqa: E402
from mnnpy._schema.MNN.Convolution2D import Convolution2DT  # noqa: E402
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT  # noqa: E402
from mnnpy._schema.MNN.Interp import InterpT  # noqa: E402
from mnnpy._schema.MNN.LayerNorm import LayerNormT  # noqa: E402
from mnnpy._schema.MNN.MatMul import MatMulT  # noqa: E402
from mnnpy._schema.MNN.PadParam import PadParamT  # noqa: E402
from mnnpy._schema.MNN.PRelu import PReluT  # noqa: E402
from mnnpy._schema.MNN.ReductionParam import ReductionParamT  # noqa: E402
from mnnpy._schema.MNN.Relu6 import Relu6T  # noqa: E402
from mnnpy._schema.MNN.UnaryOp import UnaryOpT  # noqa: E402
from mnnpy.net import OpParameter, OpType  # noqa: E402
from mnnpy.tensor_format import DimensionFormat  # noqa: E402
from mnnpy.testing.families.compute import conv_param  # noqa: E402
from tests.helpers import assert_close, make_single_op_net, run_net, run_op  # noqa: E402

OPENCL = mnnpy.ForwardType.OPENCL
NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def _both(op_type: int, inputs: list[np.ndarray], param: Any, ptype: int, **kw: Any) -> tuple:
    """(OpenCL outputs, CPU outputs) of a one-op model; OpenCL must not fall back."""
    cfg = mnnpy.ScheduleConfig(type=OPENCL, strict=True)
    got = run_op(op_type, inputs, param, ptype, config=cfg, **kw)
    want = run_op(op_type, inputs, param, ptype, **kw)
    return got, want


def _data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("c", "group"), [(1, 1), (3, 1), (4, 1), (5, 1), (17, 1), (4, 2), (6, 2), (6, 3)]
)
def test_grouped_and_dense_convolution(c: int, group: int) -> None:
    x = _data((2, c, 7, 6), c)
    p = conv_param(c, 2 * group * 3, group=group, pads=[1, 0, 1, 2], strideY=2, relu=True)
    got, want = _both(OpType.Convolution, [x], p, OpParameter.Convolution2D)
    assert_close(got[0], want[0])
    assert (got[0] >= 0).all()


CODES = {  # UnaryOpOperation -> NumPy
    0: np.abs,
    7: np.exp,
    25: None,  # erf: compared with the CPU backend (NumPy has no erf)
    29: lambda x: 1 / (1 + np.exp(-x)),
    30: np.tanh,
    32: None,  # GELU (MNN's approximation)
    33: None,  # GELU with erf
    34: lambda x: x / (1 + np.exp(-x)),
}


@pytest.mark.parametrize("code", sorted(CODES))
@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_unary(code: int, fmt: DimensionFormat) -> None:
    x = _data((2, 5, 3, 4), code) * 2
    got, want = _both(OpType.UnaryOp, [x], UnaryOpT(opType=code), OpParameter.UnaryOp, fmt=fmt)
    assert_close(got[0], want[0])
    fn = CODES[code]
    if fn is not None:
        assert_close(got[0], fn(x.astype(np.float64)).astype(np.float32))


def test_relu6_with_a_positive_floor_keeps_padding_lanes_zero() -> None:
    x = _data((1, 5, 3, 3))
    p = Relu6T(minValue=0.5, maxValue=1.0)
    got, want = _both(OpType.ReLU6, [x], p, OpParameter.Relu6)
    assert_close(got[0], np.clip(x, 0.5, 1.0))
    assert_close(got[0], want[0])


@pytest.mark.parametrize(
    ("a", "b", "code"),
    [
        ((2, 5, 3, 4), (2, 5, 3, 4), 0),
        ((2, 5, 3, 4), (1, 5, 1, 1), 2),  # per-channel scale
        ((2, 5, 3, 4), (4,), 1),
        ((2, 1, 3, 1), (1, 5, 1, 4), 9),
        ((3, 4), (2, 1, 3, 4), 7),
    ],
)
def test_binary_broadcast(a: tuple, b: tuple, code: int) -> None:
    x, y = _data(a, 1), _data(b, 2) + 3.0
    fmt = NC4HW4 if len(a) == len(b) == 4 else NCHW
    p = BinaryOpT(opType=code)
    got, want = _both(OpType.BinaryOp, [x, y], p, OpParameter.BinaryOp, fmt=fmt)
    fn = {0: np.add, 1: np.subtract, 2: np.multiply, 7: np.divide, 9: np.maximum}[code]
    assert_close(got[0], fn(x, y))
    assert_close(got[0], want[0])


def test_binary_with_a_constant_operand_makes_no_copy_for_it() -> None:
    x, w = _data((1, 6, 2, 3)), _data((1, 6, 1, 1), 5)
    cfg = mnnpy.ScheduleConfig(type=OPENCL, strict=True)
    net = make_single_op_net(
        OpType.BinaryOp, [x, w], BinaryOpT(opType=0), OpParameter.BinaryOp, consts={1: w}
    )
    session, out = run_net(net, {"in0": x}, cfg)
    assert_close(out["out0"], x + w)
    if session.backend.mapped:  # the input is read in place (imported), the constant uploaded
        assert session.copy_stats() == (0, 0) and session.edge_stats()["import"] == 1
    else:
        assert session.copy_stats() == (1, 8 * 2 * 3 * 4)  # the input only, NC4HW4: 8 channels


@pytest.mark.parametrize("axis", [1, -1, 0])
@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_softmax(axis: int, fmt: DimensionFormat) -> None:
    x = _data((2, 5, 3, 4), 3) * 3
    got, want = _both(OpType.Softmax, [x], AxisT(axis=axis), OpParameter.Axis, fmt=fmt)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    assert_close(got[0], e / e.sum(axis=axis, keepdims=True))
    assert_close(got[0], want[0])


@pytest.mark.parametrize("rms", [False, True])
def test_layer_norm(rms: bool) -> None:
    x = _data((2, 7, 12), 4)
    g, b = _data((12,), 5), _data((12,), 6)
    p = LayerNormT(axis=[-1], epsilon=1e-5, gamma=g, beta=b, useRmsnorm=rms)
    got, want = _both(OpType.LayerNorm, [x], p, OpParameter.LayerNorm, fmt=NCHW)
    v = x.astype(np.float64)
    mean = 0 if rms else v.mean(-1, keepdims=True)
    y = (v - mean) / np.sqrt(((v - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    assert_close(got[0], y.astype(np.float32))
    assert_close(got[0], want[0])


@pytest.mark.parametrize(("ta", "tb"), [(False, False), (True, False), (False, True)])
def test_matmul_batched_with_broadcast(ta: bool, tb: bool) -> None:
    a = _data((3, 4, 5) if not ta else (3, 5, 4), 7)
    b = _data((5, 6) if not tb else (6, 5), 8)
    p = MatMulT(transposeA=ta, transposeB=tb)
    got, want = _both(OpType.MatMul, [a, b], p, OpParameter.MatMul, fmt=NCHW)
    aa = np.swapaxes(a, -1, -2) if ta else a
    bb = b.T if tb else b
    assert_close(got[0], aa @ bb)
    assert_close(got[0], want[0])


@pytest.mark.parametrize(("code", "fn"), [(0, np.sum), (3, np.mean), (4, np.max), (6, np.prod)])
@pytest.mark.parametrize("keep", [False, True])
def test_reduction_over_spatial_dims(code: int, fn: Any, keep: bool) -> None:
    x = _data((2, 5, 3, 4), 9)
    p = ReductionParamT(operation=code, dim=[2, 3], keepDims=keep)
    got, want = _both(OpType.Reduction, [x], p, OpParameter.ReductionParam)
    assert_close(got[0], fn(x.astype(np.float64), axis=(2, 3), keepdims=keep).astype(np.float32))
    assert_close(got[0], want[0])


@pytest.mark.parametrize(
    ("c", "oc", "group", "common"),
    [
        (3, 5, 1, dict(strideX=2, strideY=2, pads=[1, 1, 1, 1])),
        (4, 6, 2, dict(strideX=2, strideY=1, dilateX=2, dilateY=1)),
        (5, 5, 5, dict(strideX=2, strideY=2, relu6=True)),
    ],
)
def test_deconvolution(c: int, oc: int, group: int, common: dict) -> None:
    rng = np.random.default_rng(c)
    p = Convolution2DT()
    p.common = Convolution2DCommonT(
        kernelX=3, kernelY=3, outputCount=oc, inputCount=c, group=group, **common
    )
    p.weight = rng.standard_normal(c * (oc // group) * 9).astype(np.float32)
    p.bias = rng.standard_normal(oc).astype(np.float32)
    x = _data((2, c, 5, 4), c)
    op_type = OpType.DeconvolutionDepthwise if group == c == oc else OpType.Deconvolution
    got, want = _both(op_type, [x], p, OpParameter.Convolution2D)
    assert_close(got[0], want[0])


@pytest.mark.parametrize("resize_type", [1, 2, 3, 4])
@pytest.mark.parametrize("align", [False, True])
def test_interp(resize_type: int, align: bool) -> None:
    x = _data((2, 5, 4, 6), resize_type)
    p = InterpT(resizeType=resize_type, outputHeight=7, outputWidth=11, alignCorners=align)
    got, want = _both(OpType.Interp, [x], p, OpParameter.Interp)
    assert got[0].shape == (2, 5, 7, 11)
    assert_close(got[0], want[0])


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_padding(mode: int, fmt: DimensionFormat) -> None:
    x = _data((2, 5, 4, 3), mode)
    pads = np.array([0, 0, 1, 2, 2, 1, 1, 2], np.int32)
    got, want = _both(
        OpType.Padding, [x, pads], PadParamT(mode=mode), OpParameter.PadParam,
        consts={1: pads}, fmt=fmt,
    )  # fmt: skip
    names = {0: "constant", 1: "reflect", 2: "symmetric", 3: "edge"}
    assert_close(got[0], np.pad(x, [(0, 0), (1, 2), (2, 1), (1, 2)], mode=names[mode]))
    assert_close(got[0], want[0])


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_prelu(fmt: DimensionFormat) -> None:
    x = _data((2, 5, 3, 4), 11)
    slopes = np.linspace(0.1, 0.5, 5).astype(np.float32)
    p = PReluT(slopeCount=5, slope=slopes)
    got, want = _both(OpType.PReLU, [x], p, OpParameter.PRelu, fmt=fmt)
    assert_close(got[0], np.where(x < 0, x * slopes.reshape(1, 5, 1, 1), x))
    assert_close(got[0], want[0])
