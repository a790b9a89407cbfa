"""MatMul, BatchMatMul and InnerProduct on the CPU backend vs their NumPy references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.BatchMatMulParam import BatchMatMulParamT
from mnnpy._schema.MNN.InnerProduct import InnerProductT
from mnnpy._schema.MNN.MatMul import MatMulT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import inner_product, matmul
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_op

NCHW = DimensionFormat.NCHW
rng = np.random.default_rng(7)


def _op(op_type, param):
    return OpDef(0, op_type, "op", (), (), param, 0, NCHW)


def _mm(ta=False, tb=False):
    p = MatMulT()
    p.transposeA, p.transposeB = ta, tb
    return p


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize(
    "sa,sb", [((3, 5), (5, 4)), ((2, 3, 5), (5, 17)), ((2, 1, 3, 5), (4, 5, 6)), ((1, 7), (7, 1))]
)
@pytest.mark.parametrize("threads", [1, 2])
def test_matmul(sa, sb, ta, tb, threads):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    if ta:
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    if tb:
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2))
    param = _mm(ta, tb)
    got = run_op(OpType.MatMul, [a, b], param, OpParameter.MatMul, fmt=NCHW, num_thread=threads)
    expected = matmul.reference(_op(OpType.MatMul, param), [a, b])
    assert_close(got[0], expected[0])
    exact = np.swapaxes(a, -1, -2) if ta else a
    exact = exact @ (np.swapaxes(b, -1, -2) if tb else b)
    assert_close(expected[0], exact)  # the reference against plain NumPy


SIZES = (1, 3, 4, 5, 17, 64)
# every (M, N) pair; K and the transposes cycle so that each value and combination appears
MNK = [
    (m, n, SIZES[(i + j) % 6]) for (i, m), (j, n) in itertools.product(enumerate(SIZES), repeat=2)
]


@pytest.fixture(params=["best", "generic"])
def isa(request):
    """The fastest GEMM micro-kernel and the portable C one."""
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")


def _operands(sa, sb, ta, tb, seed):
    r = np.random.default_rng(seed)
    a = r.standard_normal(sa).astype(np.float32)
    b = r.standard_normal(sb).astype(np.float32)
    a_st = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a
    b_st = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b
    return a, b, a_st, b_st


def _run_both_threads(a, b, param, consts=None, extra=()):
    inputs = [a, b, *extra]
    one = run_op(OpType.MatMul, inputs, param, OpParameter.MatMul, fmt=NCHW, consts=consts)
    two = run_op(
        OpType.MatMul, inputs, param, OpParameter.MatMul, fmt=NCHW, consts=consts, num_thread=2
    )
    np.testing.assert_array_equal(one[0], two[0])  # the thread split changes no bit
    return one[0]


@pytest.mark.parametrize("m,n,k", MNK)
def test_matmul_sizes(m, n, k, isa):
    i = SIZES.index(m) + SIZES.index(n)
    ta, tb = bool(i & 1), bool(i & 2)
    a, b, a_st, b_st = _operands((m, k), (k, n), ta, tb, m * 1000 + n * 10 + k)
    got = _run_both_threads(a_st, b_st, _mm(ta, tb))
    assert got.shape == (m, n)
    assert_close(got, (a.astype(np.float64) @ b).astype(np.float32))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize(
    "sa,sb",
    [
        ((3, 1, 5, 17), (4, 17, 3)),  # both broadcast
        ((2, 4, 64), (64, 5)),  # B shared: one GEMM over all rows
        ((5, 17), (3, 17, 4)),  # A shared
        ((2, 3, 17, 4), (2, 3, 4, 64)),  # no broadcast
        ((1, 1, 5, 3), (2, 1, 3, 17)),
    ],
)
def test_matmul_batch_broadcast(sa, sb, ta, tb, isa):
    a, b, a_st, b_st = _operands(sa, sb, ta, tb, len(sa) * 10 + len(sb))
    got = _run_both_threads(a_st, b_st, _mm(ta, tb))
    assert_close(got, (a.astype(np.float64) @ b).astype(np.float32))


@pytest.mark.parametrize("sa,sb", [((5,), (5, 3)), ((2, 4, 5), (5,)), ((17,), (17,))])
def test_matmul_vector_operands(sa, sb):
    a, b, _, _ = _operands(sa, sb, False, False, 3)
    got = _run_both_threads(a, b, _mm())
    expected = matmul.reference(_op(OpType.MatMul, _mm()), [a, b])[0]
    assert got.shape == expected.shape
    assert_close(got, expected)


@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("bias_shape", [(17,), (1,), ()])
def test_matmul_const_weight_and_bias(tb, bias_shape, isa):
    a, b, _, b_st = _operands((2, 64, 5), (5, 17), False, tb, 11)
    bias = rng.standard_normal(bias_shape).astype(np.float32)
    got = _run_both_threads(a, b_st, _mm(False, tb), consts={1: b_st}, extra=(bias,))
    assert_close(got, (a.astype(np.float64) @ b + bias).astype(np.float32))


def test_matmul_with_bias_and_const_weight():
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((6, 3)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    got = run_op(
        OpType.MatMul, [a, b, bias], _mm(), OpParameter.MatMul, fmt=NCHW, consts={1: b, 2: bias}
    )
    assert_close(got[0], a @ b + bias)


def test_batch_matmul_adj():
    p = BatchMatMulParamT()
    p.adjX, p.adjY = False, True
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 5, 4)).astype(np.float32)
    got = run_op(OpType.BatchMatMul, [a, b], p, OpParameter.BatchMatMulParam, fmt=NCHW)
    assert_close(got[0], a @ np.swapaxes(b, -1, -2))


def test_matmul_shape_mismatch_is_a_size_error():
    a, b = np.zeros((3, 4), np.float32), np.zeros((5, 2), np.float32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.MatMul, [a, b], _mm(), OpParameter.MatMul, fmt=NCHW)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def _ip(n, k, transpose=False, bias=True):
    p = InnerProductT()
    p.outputCount, p.biasTerm, p.transpose = n, int(bias), transpose
    w = rng.standard_normal((k, n) if transpose else (n, k)).astype(np.float32)
    p.weight, p.weightSize = w.ravel(), w.size
    p.bias = rng.standard_normal(n).astype(np.float32) if bias else None
    return p, (w.T if transpose else w)


@pytest.mark.parametrize(
    "n,k,batch", [(1, 3, 1), (5, 17, 2), (10, 4, 3), (64, 64, 17), (17, 5, 64)]
)
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_inner_product(n, k, batch, transpose, bias):
    param, w = _ip(n, k, transpose, bias)
    x = rng.standard_normal((batch, k)).astype(np.float32)
    got = run_op(OpType.InnerProduct, [x], param, OpParameter.InnerProduct, fmt=NCHW)
    two = run_op(OpType.InnerProduct, [x], param, OpParameter.InnerProduct, fmt=NCHW, num_thread=2)
    np.testing.assert_array_equal(got[0], two[0])
    expected = inner_product.reference(_op(OpType.InnerProduct, param), [x])[0]
    assert_close(got[0], expected)
    assert_close(expected, x @ w.T + (param.bias if bias else 0))


def test_inner_product_short_weight_is_invalid_model():
    param, _ = _ip(4, 3)
    param.weight = param.weight[:-1]
    with pytest.raises(MNNError) as e:
        run_op(
            OpType.InnerProduct,
            [np.zeros((1, 3), np.float32)],
            param,
            OpParameter.InnerProduct,
            fmt=NCHW,
        )
    assert e.value.code == ErrorCode.INVALID_VALUE and "weight" in str(e.value)


def test_session_resize_reuses_the_execution():
    """New batch and row counts (B shared, then not) through one session: scratch and batch
    indices follow ``on_resize``."""
    b = rng.standard_normal((3, 5, 17)).astype(np.float32)
    first = rng.standard_normal((1, 4, 5)).astype(np.float32)
    model = make_single_op_net(OpType.MatMul, [first, b], _mm(), OpParameter.MatMul, fmt=NCHW)
    interp = mnnpy.Interpreter.from_buffer(model)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=2))
    shapes = [(1, 4, 5), (3, 64, 5), (1, 1, 5)]
    for x in (rng.standard_normal(s).astype(np.float32) for s in shapes):
        for name, v in (("in0", x), ("in1", b)):
            t = interp.get_session_input(session, name)
            if t.shape != v.shape:
                interp.resize_tensor(t, v.shape)
        interp.resize_session(session)
        interp.get_session_input(session, "in0").copy_from(x)
        interp.get_session_input(session, "in1").copy_from(b)
        interp.run_session(session)
        assert_close(interp.get_session_output(session, "out0").numpy(), x @ b)


def test_inner_product_resized_to_other_features_is_a_size_error():
    param, _ = _ip(4, 3)
    first = np.zeros((2, 3), np.float32)
    model = make_single_op_net(
        OpType.InnerProduct, [first], param, OpParameter.InnerProduct, fmt=NCHW
    )
    interp = mnnpy.Interpreter.from_buffer(model)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    interp.resize_tensor(interp.get_session_input(session, "in0"), (2, 5))
    with pytest.raises(MNNError) as e:
        interp.resize_session(session)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
