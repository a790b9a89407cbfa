"""BinaryOp: CPU execution (lane-by-lane and broadcasting paths, float32 and int32) vs reference."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.binary_op import FLOAT_FUNCS, INT_FUNCS, reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(code: int, relu: bool = False) -> BinaryOpT:
    p = BinaryOpT()
    p.opType, p.activationType = code, int(relu)
    return p


def expected(p: BinaryOpT, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    op = OpDef(0, OpType.BinaryOp, "op", (0, 1), (2,), p, OpParameter.BinaryOp, NHWC)
    return reference(op, [x, y])[0]


def check(x: np.ndarray, y: np.ndarray, p: BinaryOpT, **kw: object) -> np.ndarray:
    """1 and 2 threads identical and equal to the reference (integers exactly)."""
    one, two = (
        run_op(OpType.BinaryOp, [x, y], p, OpParameter.BinaryOp, num_thread=t, **kw)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    assert_close(one, expected(p, x, y))
    return one


def data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_add_relu_same_shape(c: int, fmt: DimensionFormat) -> None:
    out = check(data((2, c, 5, 7)), data((2, c, 5, 7), 1), param(B.ADD, True), fmt=fmt)
    assert out.min() == 0


@pytest.mark.parametrize("code", sorted(FLOAT_FUNCS))
def test_float_ops(code: int) -> None:
    x, y = data((2, 5, 3, 7)), data((2, 5, 3, 7), 1)
    if code in (B.POW, B.REALDIV, B.FLOORDIV, B.FLOORMOD, B.MOD):
        x, y = np.abs(x) + 0.5, np.abs(y) + 0.5
    out = check(x, y, param(code))
    assert out.dtype == (
        np.int32
        if code in (B.GREATER, B.LESS, B.EQUAL, B.NOTEQUAL, B.GREATER_EQUAL, B.LESS_EQUAL)
        else np.float32
    )


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("code", sorted(INT_FUNCS))
def test_int_ops(code: int, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-50, 50, (2, 5, 3, 3)).astype(np.int32)
    y = rng.integers(-7, 7, (2, 5, 3, 3)).astype(np.int32)
    y[y == 0] = 3
    check(x, y, param(code, relu=code == B.SUB), fmt=fmt)


def test_int_division_by_zero_gives_zero() -> None:
    x, y = np.array([7, -7, 0], np.int32), np.array([0, 0, 0], np.int32)
    for code in (B.REALDIV, B.FLOORMOD, B.MOD):
        np.testing.assert_array_equal(check(x, y, param(code), fmt=NCHW), 0)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((2, 5, 3, 7), (5, 1, 1)),
        ((2, 5, 3, 7), (1, 5, 1, 7)),
        ((2, 5, 3, 7), (7,)),
        ((2, 5, 3, 7), ()),
        ((2, 17, 3, 1), (2, 1, 1, 9)),
        ((3, 7), (2, 4, 3, 7)),
        ((1,), (2, 3)),
        ((2, 5, 3, 7), (1, 5, 1, 1)),  # per-channel vectors: the squeeze-excitation multiply
        ((2, 6, 3, 7), (2, 6, 1, 1)),
        ((1, 8, 1, 1), (2, 8, 4, 4)),
    ],
)
def test_broadcasting(a: tuple, b: tuple, fmt: DimensionFormat) -> None:
    x, y = data(a), data(b, 1)
    check(x, y, param(B.MUL), fmt=fmt)
    check(y, x, param(B.SUB, True), fmt=fmt)
    check(x, y, param(B.ADD), fmt=fmt, consts={1: y})


@pytest.mark.parametrize("code", [B.ADD, B.SUB, B.MUL, B.REALDIV, B.MINIMUM, B.MAXIMUM])
@pytest.mark.parametrize("swap", [False, True])
def test_channel_vector_on_packed_storage(
    code: int, swap: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An NC4HW4 tensor with a ``[N, C, 1, 1]`` vector runs on raw storage (no logical copies):
    every op with the vector second, commutative ones with it first too; 1 and 2 threads."""
    from mnnpy.backend.cpu.kernels import eltwise

    calls = []
    bind = eltwise.bind_channel_binary
    monkeypatch.setattr(eltwise, "bind_channel_binary", lambda *a: calls.append(1) or bind(*a))
    x, v = data((2, 7, 40, 60)), np.abs(data((2, 7, 1, 1), 1)) + 0.5
    check(*((v, x) if swap else (x, v)), param(code, code == B.SUB))
    commutative = code in (B.ADD, B.MUL, B.MINIMUM, B.MAXIMUM)
    assert len(calls) == (2 if commutative or not swap else 0)


def test_same_shaped_vectors_run_as_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ``[1, C, 1, 1]`` tensors (a decode step's token) are no per-channel broadcast: they run
    as one flat row, not as C/4 planes of one pixel (regression: 0.3 ms per LLM decode step)."""
    from mnnpy.backend.cpu.kernels import eltwise

    calls = []
    bind = eltwise.bind_channel_binary
    monkeypatch.setattr(eltwise, "bind_channel_binary", lambda *a: calls.append(1) or bind(*a))
    x, y = data((1, 37, 1, 1)), data((1, 37, 1, 1), 1)
    out = check(x, y, param(B.MUL), fmt=DimensionFormat.NC4HW4)
    assert_close(out, x * y)
    assert not calls


def test_comparison_with_const_scalar() -> None:
    x = data((2, 5, 3, 3))
    out = check(x, np.float32(0.25), param(B.GREATER), consts={1: np.array(0.25, np.float32)})
    assert out.dtype == np.int32 and set(np.unique(out)) <= {0, 1}


def test_realdiv_keeps_nc4hw4_padding_zero() -> None:
    x, y = data((2, 5, 3, 3)), np.abs(data((2, 5, 3, 3), 1)) + 1
    interp = mnnpy.Interpreter.from_buffer(
        make_single_op_net(OpType.BinaryOp, [x, y], param(B.REALDIV), OpParameter.BinaryOp)
    )
    session = interp.create_session()
    interp.get_session_input(session, "in0").copy_from(x)
    interp.get_session_input(session, "in1").copy_from(y)
    interp.run_session(session)
    out = interp.get_session_output(session, "out0")
    assert out.is_packed and np.isfinite(out.host).all()  # 0 / 0 lanes were reset
    assert_close(out.numpy(), x / y)


def test_int_consts_fold() -> None:
    a, b = np.array(4, np.int32), np.array([2, 3], np.int32)
    out = run_op(OpType.BinaryOp, [a, b], param(B.SUB), OpParameter.BinaryOp, consts={0: a, 1: b})
    np.testing.assert_array_equal(out[0], [2, 1])


@pytest.mark.parametrize("code", [18, 99, B.DIV, B.MAX_TEMP, B.MIN_TEMP])
def test_unknown_op_type_is_not_support(code: int) -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.BinaryOp, [data((1, 2)), data((1, 2))], param(code), OpParameter.BinaryOp)
    assert e.value.code == ErrorCode.NOT_SUPPORT


def test_bitwise_on_float_is_not_support() -> None:
    with pytest.raises(MNNError) as e:
        run_op(
            OpType.BinaryOp,
            [data((1, 2)), data((1, 2))],
            param(B.BITWISE_AND),
            OpParameter.BinaryOp,
        )
    assert e.value.code == ErrorCode.NOT_SUPPORT


@pytest.mark.parametrize(("a", "b"), [((2, 3), (2, 4)), ((2, 3), (3, 2))])
def test_bad_shapes_and_dtypes_are_compute_size_errors(a: tuple, b: tuple) -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.BinaryOp, [data(a), data(b)], param(B.ADD), OpParameter.BinaryOp)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    with pytest.raises(MNNError) as e:
        run_op(
            OpType.BinaryOp, [data(a), np.zeros(a, np.int32)], param(B.ADD), OpParameter.BinaryOp
        )
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
