"""UnaryOp: CPU execution (float32 and int32, NC4HW4 and plain, in place) vs reference and MNN."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as U
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import unary as UK
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType, pack_net
from mnnpy.ops.unary_op import FLOAT_FUNCS, INT_FUNCS, reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import _op, assert_close, input_op, make_single_op_net, run_mnn, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC
POSITIVE = {U.SQRT, U.RSQRT, U.LOG, U.RECIPROCAL}
UNIT = {U.ASIN, U.ACOS, U.ATANH, U.ERFINV}


def param(code: int) -> UnaryOpT:
    p = UnaryOpT()
    p.opType = code
    return p


def expected(code: int, x: np.ndarray) -> np.ndarray:
    op = OpDef(0, OpType.UnaryOp, "op", (0,), (1,), param(code), OpParameter.UnaryOp, NHWC)
    return reference(op, [x])[0]


def data(code: int, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Inputs inside the function's domain."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 2
    if code in POSITIVE:
        return np.abs(x) + np.float32(0.5)
    if code in UNIT:
        return np.tanh(x).astype(np.float32) * np.float32(0.99)
    if code == U.ACOSH:
        return np.abs(x) + np.float32(1)
    if code == U.TAN:
        return np.clip(x, -1.4, 1.4)
    return x


def check(code: int, x: np.ndarray, **kw: object) -> np.ndarray:
    """1 and 2 threads identical and equal to the reference (integers exactly)."""
    one, two = (
        run_op(OpType.UnaryOp, [x], param(code), OpParameter.UnaryOp, num_thread=t, **kw)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    assert_close(one, expected(code, x))
    return one


@pytest.mark.parametrize("code", sorted(FLOAT_FUNCS))
def test_float_ops(code: int) -> None:
    out = check(code, data(code, (2, 5, 3, 7)))
    assert out.dtype == np.float32


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("code", [U.ERF, U.COS, U.SIGMOID])
def test_channels_and_layouts(code: int, c: int, fmt: DimensionFormat) -> None:
    check(code, data(code, (2, c, 5, 3)), fmt=fmt)


def test_large_buffer_splits_between_threads() -> None:
    x = data(U.GELU_STANDARD, (2, 17, 33, 65))  # several kernel chunks
    check(U.GELU_STANDARD, x, fmt=NCHW)
    check(U.GELU_STANDARD, x)


@pytest.mark.parametrize("isa", G.available_isas())
def test_erf_kernel_accuracy(isa: str) -> None:
    """The vectorized erf: under 1e-6 absolute against math.erf on a dense grid and the tails,
    relatively close near 0, NaN and infinities like libm, in place too."""
    dense = np.linspace(-10, 10, 400_001)
    tiny = np.geomspace(1e-38, 1e-2, 2_000)
    special = [np.inf, -np.inf, np.nan, 0.0, -0.0, 0.5, 4.0, 3.4e38, -3.4e38]
    x = np.concatenate([dense, tiny, -tiny, special]).astype(np.float32)
    ref = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    G.set_isa(isa)
    try:
        out = np.empty_like(x)
        UK.unary(x, out, x.size, U.ERF)
        inplace = x.copy()
        UK.unary(inplace, inplace, x.size, U.ERF, 2)
    finally:
        G.set_isa("best")
    np.testing.assert_array_equal(out, inplace)
    finite = ~np.isnan(x)
    assert np.abs(out[finite] - ref[finite]).max() < 1e-6
    near0 = finite & (np.abs(x) < 0.5) & (x != 0)
    assert (np.abs(out[near0] - ref[near0]) / np.abs(ref[near0])).max() < 1e-6
    assert np.isnan(out[~finite]).all()
    assert np.signbit(out[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("code", sorted(INT_FUNCS))
def test_int_ops(code: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(1).integers(-1000, 1000, (2, 5, 3, 3)).astype(np.int32)
    x.flat[:3] = [0, np.iinfo(np.int32).min, np.iinfo(np.int32).max]
    out = check(code, x, fmt=fmt)
    assert out.dtype == np.int32


def test_nc4hw4_padding_lanes_reset_when_f0_is_not_zero() -> None:
    x = data(U.COS, (2, 5, 3, 3))
    interp = mnnpy.Interpreter.from_buffer(
        make_single_op_net(OpType.UnaryOp, [x], param(U.EXP), OpParameter.UnaryOp)
    )
    session = interp.create_session()
    interp.get_session_input(session, "in0").copy_from(x)
    interp.run_session(session)
    out = interp.get_session_output(session, "out0")
    assert out.is_packed
    lanes = out.host.reshape(2, 2, 9, 4)[:, 1, :, 1:]  # channels 5..7 of the last block
    np.testing.assert_array_equal(lanes, 0)
    assert_close(out.numpy(), np.exp(x))


def test_quirks() -> None:
    x = np.array([[100.0, -100.0, 2.5, -2.5, 0.5, 1.0, -1.0, 0.0]], np.float32)
    exp = run_op(OpType.UnaryOp, [x], param(U.EXP), OpParameter.UnaryOp, fmt=NCHW)[0]
    assert np.isfinite(exp[0, 0]) and exp[0, 0] == pytest.approx(np.exp(87.0), rel=1e-5)
    rnd = run_op(OpType.UnaryOp, [x], param(U.ROUND), OpParameter.UnaryOp, fmt=NCHW)[0]
    np.testing.assert_array_equal(rnd, [[100, -100, 3, -3, 1, 1, -1, 0]])
    inv = run_op(OpType.UnaryOp, [x], param(U.ERFINV), OpParameter.UnaryOp, fmt=NCHW)[0]
    assert inv[0, 5] == inv[0, 6] == np.finfo(np.float32).max and inv[0, 7] == 0


def test_const_input_folds() -> None:
    x = np.array([-2, 3], np.int32)
    out = run_op(OpType.UnaryOp, [x], param(U.SQUARE), OpParameter.UnaryOp, consts={0: x})
    np.testing.assert_array_equal(out[0], [4, 9])


def test_in_place_chain() -> None:
    """Two unary ops in a row: the second may run in place on the first's output."""
    x = data(U.TANH, (2, 5, 4, 3))
    net = NetT()
    net.tensorName = ["in0", "mid", "out0"]
    net.oplists = [
        input_op("in0", 0, x.shape),
        _op(OpType.UnaryOp, "a", [0], [1], param(U.TANH), OpParameter.UnaryOp),
        _op(OpType.UnaryOp, "b", [1], [2], param(U.SQUARE), OpParameter.UnaryOp),
    ]
    net.outputName = ["out0"]
    net.tensorNumber = 3
    interp = mnnpy.Interpreter.from_buffer(pack_net(net))
    session = interp.create_session()
    interp.get_session_input(session, "in0").copy_from(x)
    interp.run_session(session)
    assert_close(interp.get_session_output(session, "out0").numpy(), np.tanh(x) ** 2)


@pytest.mark.parametrize("code", [99, -1])
def test_unknown_op_type_is_not_support(code: int) -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.UnaryOp, [data(0, (1, 2))], param(code), OpParameter.UnaryOp)
    assert e.value.code == ErrorCode.NOT_SUPPORT


def test_float_only_op_on_int_is_not_support() -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.UnaryOp, [np.ones((1, 2), np.int32)], param(U.EXP), OpParameter.UnaryOp)
    assert e.value.code == ErrorCode.NOT_SUPPORT


@pytest.mark.parametrize("code", [U.ERF, U.GELU, U.GELU_STANDARD, U.SIGMOID, U.HARDSWISH, U.LOG1P])
def test_matches_mnn(code: int, tmp_path: object) -> None:
    x = data(code, (2, 5, 3, 7))
    model = make_single_op_net(OpType.UnaryOp, [x], param(code), OpParameter.UnaryOp)
    assert_close(
        run_op(OpType.UnaryOp, [x], param(code), OpParameter.UnaryOp)[0],
        run_mnn(model, x, tmp_path),
    )
