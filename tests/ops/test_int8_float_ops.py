"""Int8 LayerNorm, Softmax and table UnaryOp of post-training quantized models.

MNN 3.6.1's CPU runs these between quantized tensors in int8 (``_supportQuant``): CPULayerNorm and
CPUSoftmax dequantize the input with its scale, compute in float and quantize the result with the
output's (``CPUCastCreator::cast``); CPUUnary with ``tableInt8`` looks the stored code up in a
255-entry table (``out = table[x + 127]``). One-op models with quantized input and output run
through the whole runtime (the plan adds the FloatToInt8 of the float input and the Int8ToFloat of
the output) and are compared with NumPy references of that arithmetic and with MNN's own run of the
same bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.LayerNorm import LayerNormT
from mnnpy._schema.MNN.Net import Net as FbNet
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.TensorDescribe import TensorDescribeT
from mnnpy._schema.MNN.TensorQuantInfo import TensorQuantInfoT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType, load_net, pack_net
from mnnpy.quant import plan_quant
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import make_single_op_net, run_mnn, run_net

F32 = np.float32
S_IN, S_OUT = 0.031, 0.0123


def quantized(op_type: int, x: np.ndarray, param, param_type: int, scales=(S_IN, S_OUT)) -> bytes:
    """A one-op NCHW model whose input and output carry int8 quantization (as mnnquant writes)."""
    data = make_single_op_net(op_type, [x], param, param_type, fmt=DimensionFormat.NCHW)
    raw = NetT.InitFromObj(FbNet.GetRootAs(data, 0))
    raw.extraTensorDescribe = []
    for index, scale in enumerate(scales):
        d = TensorDescribeT()
        d.index = index
        d.quantInfo = TensorQuantInfoT()
        d.quantInfo.scale, d.quantInfo.zero, d.quantInfo.type = scale, 0.0, 6
        d.quantInfo.min, d.quantInfo.max = -127.0, 127.0
        raw.extraTensorDescribe.append(d)
    return pack_net(raw)


def quantize(x: np.ndarray, scale: float) -> np.ndarray:
    """MNN's FloatToInt8 (AVX2): x * (1/scale), clamp to [-127, 127], +-0.5 by sign, truncate."""
    f = (x.astype(F32) * (F32(1) / F32(scale))).astype(F32)
    f = np.clip(f, F32(-127), F32(127))
    return np.trunc(f + np.where(f < 0, F32(-0.5), F32(0.5))).astype(np.int8)


def dequantize(q: np.ndarray, scale: float) -> np.ndarray:
    return (q.astype(F32) * F32(scale)).astype(F32)


def run(data: bytes, x: np.ndarray) -> np.ndarray:
    return run_net(data, {"in0": x})[1]["out0"]


def layer_norm_ref(x, gamma, beta, eps):
    xd = x.astype(np.float64)
    mean = xd.mean(axis=-1, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((xd - mean) / np.sqrt(var + eps) * gamma + beta).astype(F32)


def softmax_ref(x):
    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(F32)


def layer_norm_model(x, seed=0):
    rng = np.random.default_rng(seed)
    p = LayerNormT()
    p.axis, p.epsilon = [-1], 1e-5
    p.gamma = rng.uniform(0.5, 1.5, x.shape[-1]).astype(F32)
    p.beta = rng.uniform(-0.2, 0.2, x.shape[-1]).astype(F32)
    return quantized(OpType.LayerNorm, x, p, OpParameter.LayerNorm), p


def test_layer_norm_int8_equals_reference(tmp_path):
    x = (np.random.default_rng(1).standard_normal((2, 5, 64)) * 1.5).astype(F32)
    data, p = layer_norm_model(x)
    want = dequantize(quantize(
        layer_norm_ref(dequantize(quantize(x, S_IN), S_IN), p.gamma, p.beta, 1e-5), S_OUT
    ), S_OUT)  # fmt: skip
    got = run(data, x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, run_mnn(data, x, tmp_path))


def test_softmax_int8_equals_reference(tmp_path):
    x = (np.random.default_rng(2).standard_normal((1, 4, 6, 16)) * 2).astype(F32)
    p = AxisT()
    p.axis = -1
    s_out = 1 / 127  # [0, 1] results over the whole code range
    data = quantized(OpType.Softmax, x, p, OpParameter.Axis, (S_IN, s_out))
    want = dequantize(quantize(softmax_ref(dequantize(quantize(x, S_IN), S_IN)), s_out), s_out)
    got = run(data, x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, run_mnn(data, x, tmp_path))


def erf_table(s_in: float, s_out: float) -> np.ndarray:
    """A table as mnnquant writes one: erf of each input code, quantized with the output scale."""
    from math import erf

    codes = np.arange(-127, 128)
    return quantize(np.array([erf(c * s_in) for c in codes], F32), s_out)


def test_unary_table_int8_equals_reference(tmp_path):
    table = erf_table(S_IN, S_OUT)
    p = UnaryOpT()
    p.opType, p.tableInt8 = 25, table  # ERF
    # every code: -127..127 after quantization (the clamp), plus ties and out-of-range values
    x = (np.arange(-130, 131, dtype=F32) * F32(S_IN)).reshape(1, 1, 1, -1)
    data = quantized(OpType.UnaryOp, x, p, OpParameter.UnaryOp)
    want = dequantize(table[quantize(x, S_IN).astype(np.int64) + 127], S_OUT)
    got = run(data, x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, run_mnn(data, x, tmp_path))


def test_unary_lookup_covers_minus_128():
    """-128 (possible only with a file's clamp range) takes entry 0, not a read before the table."""
    from types import SimpleNamespace

    from mnnpy.backend.cpu.executions.unary_int8 import lookup_table

    table = np.arange(-127, 128).astype(np.int8)[::-1].copy()
    lut = lookup_table(SimpleNamespace(param=SimpleNamespace(tableInt8=table), name="u"))
    codes = np.arange(-128, 128).astype(np.int8)
    want = table[np.clip(codes.astype(np.int64) + 127, 0, 254)]
    np.testing.assert_array_equal(lut[codes.view(np.uint8)], want)


def test_short_table_is_invalid():
    p = UnaryOpT()
    p.opType, p.tableInt8 = 25, np.zeros(254, np.int8)
    x = np.zeros((1, 1, 1, 8), F32)
    with pytest.raises(MNNError) as e:
        run(quantized(OpType.UnaryOp, x, p, OpParameter.UnaryOp), x)
    assert e.value.code == ErrorCode.INVALID_VALUE and "254" in str(e.value)


def test_int8_neg_without_table_is_refused():
    p = UnaryOpT()
    p.opType = 1  # NEG: MNN has an int8 kernel, mnnpy does not
    x = np.zeros((1, 1, 1, 8), F32)
    with pytest.raises(MNNError) as e:
        run(quantized(OpType.UnaryOp, x, p, OpParameter.UnaryOp), x)
    assert e.value.code == ErrorCode.NOT_SUPPORT and "NEG" in str(e.value)


def test_plan_puts_layer_norm_between_casts():
    x = np.zeros((1, 2, 8), F32)
    data, _ = layer_norm_model(x)
    plan = plan_quant(load_net(data))
    seq = [(o.type_name, [plan.names[i] for i in o.outputs]) for o in plan.ops]
    assert seq == [
        ("Input", ["in0"]),
        ("FloatToInt8", ["in0__int8"]),
        ("Int8ToFloat", ["in0__int8__float"]),
        ("LayerNorm", ["out0__int8__float"]),
        ("FloatToInt8", ["out0__int8"]),
        ("Int8ToFloat", ["out0"]),
    ]
