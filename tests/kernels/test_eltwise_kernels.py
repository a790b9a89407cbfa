"""eltwise / softmax kernels directly: chunked threading, broadcast plans, argument checks."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.executions.binary import broadcast_plan
from mnnpy.backend.cpu.kernels import eltwise as K
from mnnpy.backend.cpu.kernels import softmax as S


def _i(*values: int) -> np.ndarray:
    return np.array(values, np.intp)


@pytest.mark.parametrize("threads", [1, 3])
def test_long_rows_are_split_between_threads(threads: int) -> None:
    rng = np.random.default_rng(0)
    n = 3 * 4096 + 5  # one row, longer than two chunks
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.empty(n, np.float32)
    K.binary(a, b, out, 0, _i(n), _i(1), _i(1), True, threads)
    np.testing.assert_array_equal(out, np.maximum(a + b, 0))
    K.relu(a, out, n, 0.5, threads)
    np.testing.assert_array_equal(out, np.where(a > 0, a, a * np.float32(0.5)))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("rows", [1, 2, 5])
def test_planes_split_the_same_way_for_every_row(threads: int, rows: int) -> None:
    """Long rows (planes of channel blocks) go to the threads chunk by chunk, rows few or many;
    every element is computed once, with a repeated (stride-0) operand too."""
    rng = np.random.default_rng(rows)
    inner = 2 * 4096 + 12
    a = rng.standard_normal(rows * inner).astype(np.float32)
    b = rng.standard_normal(rows * inner).astype(np.float32)
    out = np.full(rows * inner, np.nan, np.float32)
    K.binary(a, b, out, 2, _i(rows, inner), _i(inner, 1), _i(inner, 1), False, threads)  # MUL
    np.testing.assert_array_equal(out, a * b)
    K.binary(a, b[:1], out, 0, _i(rows, inner), _i(inner, 1), _i(0, 0), False, threads)
    np.testing.assert_array_equal(out, a + b[0])


@pytest.mark.parametrize(
    ("a", "b"), [((2, 3, 4, 5), (3, 1, 5)), ((4, 1), (1, 6)), ((2, 1, 3, 1, 2), (2, 7, 1, 4, 1))]
)
def test_broadcast_plan(a: tuple, b: tuple) -> None:
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(a).astype(np.float32), rng.standard_normal(b).astype(np.float32)
    shape = np.broadcast_shapes(a, b)
    out = np.empty(int(np.prod(shape)), np.float32)
    K.binary(x.ravel(), y.ravel(), out, 1, *broadcast_plan(a, b, shape), False, 2)
    np.testing.assert_array_equal(out.reshape(shape), x - y)


def test_checks() -> None:
    a = np.zeros(4, np.float32)
    with pytest.raises(ValueError):
        K.binary(a, a, a, 0, _i(5), _i(1), _i(1))  # buffers too small
    with pytest.raises(ValueError):
        K.binary(a, a, a, 10, _i(4), _i(1), _i(1))  # a comparison needs an int32 output
    with pytest.raises(ValueError):
        K.zero_padding(a, 1, 5, 1)
    with pytest.raises(ValueError):
        S.softmax(a, a, 1, 5, 1)


def test_zero_padding_and_inplace_softmax() -> None:
    buf = np.ones(2 * 2 * 3 * 4, np.float32)
    K.zero_padding(buf, 2, 5, 3)
    lanes = buf.reshape(2, 2, 3, 4)
    assert lanes[:, 1, :, 1:].sum() == 0 and lanes[:, 0].all() and lanes[:, 1, :, 0].all()
    x = np.random.default_rng(2).standard_normal(24).astype(np.float32)
    want = np.exp(x.reshape(2, 3, 4)) / np.exp(x.reshape(2, 3, 4)).sum(axis=1, keepdims=True)
    S.softmax(x, x, 2, 3, 4, 2)
    np.testing.assert_allclose(x.reshape(2, 3, 4), want, rtol=1e-5)


_HOT = {
    0: np.add,
    1: np.subtract,
    2: np.multiply,
    7: np.divide,
    8: lambda x, y: np.where(x < y, x, y),  # ``x < y ? x : y``: y when either is NaN
    9: lambda x, y: np.where(x > y, x, y),
}


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize("op", sorted(_HOT))
@pytest.mark.parametrize("scalar_b", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_contiguous_float_rows_every_isa(op: int, scalar_b: bool, relu: bool) -> None:
    """The C loops (chunks of 64 and a tail; b a row or a scalar; NaN and -0 included) give
    exactly NumPy's element-wise result in every ISA, in place too."""
    rng = np.random.default_rng(op)
    n = 2 * 64 + 37
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(1 if scalar_b else n).astype(np.float32) + np.float32(0.25)
    a[[3, 70, n - 1]] = [np.nan, -0.0, 0.0]
    if not scalar_b:
        b[[5, 71, n - 2]] = [np.nan, 0.0, -0.0]
    with np.errstate(all="ignore"):
        want = _HOT[op](a, b if not scalar_b else b[0]).astype(np.float32)
    if relu:
        want = np.where(want > 0, want, np.float32(0))
    out = np.empty(n, np.float32)
    K.binary(a, b, out, op, _i(n), _i(1), _i(0 if scalar_b else 1), relu, 2)
    np.testing.assert_array_equal(out.view(np.int32), want.view(np.int32))
    K.binary(a, b, a, op, _i(n), _i(1), _i(0 if scalar_b else 1), relu, 1)  # out is a
    np.testing.assert_array_equal(a.view(np.int32), want.view(np.int32))


def test_specialize_picks_the_fused_variant() -> None:
    """Executions resolve a fused kernel once; the variant computes what the dispatcher does."""
    from mnnpy.backend.cpu.kernels import specialize
    from mnnpy.backend.cpu.kernels import unary as U

    f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
    fn = specialize(K.binary, f32, i32)
    assert fn is K.binary.__signatures__["float|int"]
    assert specialize(K.binary, np.dtype(np.float64), f32) is K.binary  # no such variant
    assert specialize(K.relu, f32) is K.relu  # not fused
    a = np.arange(8, dtype=np.float32)
    out = np.empty(8, np.int32)
    fn(a, a[::-1].copy(), out, 10, _i(8), _i(1), _i(1), False, 1)  # 10: GREATER
    np.testing.assert_array_equal(out, (a > a[::-1]).astype(np.int32))
    neg = np.empty(8, np.int32)
    specialize(U.unary, i32)(np.arange(8, dtype=np.int32), neg, 8, 1, 1)  # 1: NEG
    np.testing.assert_array_equal(neg, -np.arange(8))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", [0, 1, 2, 6, 7, 8, 9, 13, 14, 17])
@pytest.mark.parametrize(
    ("a", "b"), [((7,), (7,)), ((2, 3, 4, 5), (3, 1, 5)), ((4, 1), (1, 6)), ((3, 9000), (1,))]
)
def test_bound_binary_gives_what_binary_gives(threads: int, op: int, a: tuple, b: tuple) -> None:
    """``bind_binary`` runs the same kernel as ``binary`` on the buffers it was given, each call
    on their current contents (long rows split between threads too)."""
    rng = np.random.default_rng(op)
    x = rng.standard_normal(a).astype(np.float32).ravel()
    y = (rng.standard_normal(b).astype(np.float32) + 2).ravel()  # POW / DIV on sane values
    shape = np.broadcast_shapes(a, b)
    plan = broadcast_plan(a, b, shape)
    want = np.empty(int(np.prod(shape)), np.float32)
    got = np.full_like(want, np.nan)
    call = K.bind_binary(x, y, got, op, *plan, op == 1, threads)
    for _ in range(2):
        x += 1
        call()
        K.binary(x, y, want, op, *plan, op == 1, threads)
        np.testing.assert_array_equal(got, want)


def test_bound_binary_checks() -> None:
    a = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="too small"):
        K.bind_binary(a, a, a, 0, _i(5), _i(1), _i(1))
    with pytest.raises(ValueError, match="output buffer"):
        K.bind_binary(a, a, a[:2], 0, _i(4), _i(1), _i(1))
    with pytest.raises(ValueError, match="dtypes"):  # a comparison writes int32
        K.bind_binary(a, a, a, 10, _i(4), _i(1), _i(1))
    with pytest.raises(ValueError, match="dims"):
        K.bind_binary(a, a, a, 0, _i(4), _i(1, 1), _i(1))
    with pytest.raises(ValueError, match="negative"):
        K.bind_binary(a, a, a, 0, _i(4), _i(-1), _i(1))
    out = np.ones(4, np.float32)
    K.bind_binary(a, a, out, 0, _i(0), _i(1), _i(1))()  # an empty index space writes nothing
    assert out.tolist() == [1, 1, 1, 1]


def _nc4(x: np.ndarray) -> np.ndarray:
    """NCHW -> flat NC4HW4 (zero padding lanes)."""
    n, c, h, w = x.shape
    p = np.zeros((n, -(-c // 4) * 4, h, w), np.float32)
    p[:, :c] = x
    return np.ascontiguousarray(p.reshape(n, -1, 4, h * w).transpose(0, 1, 3, 2)).ravel()


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize("op", sorted(_HOT))
@pytest.mark.parametrize(("n", "bn", "c", "hw"), [(2, 1, 6, (3, 5)), (1, 1, 8, (48, 48)),
                                                  (2, 2, 5, (33, 65))])  # fmt: skip
def test_channel_binary_every_isa(op: int, n: int, bn: int, c: int, hw: tuple) -> None:
    """``bind_channel_binary`` (an NC4HW4 tensor with a per-channel vector, the SE multiply) is
    NumPy's broadcast exactly, in every ISA, on 1 and 2 threads (planes split into chunks)."""
    rng = np.random.default_rng(op)
    x = rng.standard_normal((n, c, *hw)).astype(np.float32)
    v = rng.standard_normal((bn, c, 1, 1)).astype(np.float32) + np.float32(0.25)
    x[0, 0, 0, :2] = [np.nan, -0.0]
    with np.errstate(all="ignore"):
        want = _nc4(_HOT[op](x, v).astype(np.float32))
    a, b = _nc4(x), _nc4(v)
    for threads in (1, 2):
        got = np.full_like(a, np.nan)
        K.bind_channel_binary(a, b, got, op, n * -(-c // 4), hw[0] * hw[1], bn * -(-c // 4),
                              False, threads)()  # fmt: skip
        real = _nc4(np.ones_like(x)) != 0  # padding lanes (0 op 0) are the execution's
        np.testing.assert_array_equal(got[real].view(np.int32), want[real].view(np.int32))


def test_channel_binary_checks() -> None:
    a = np.zeros(32, np.float32)
    with pytest.raises(ValueError, match="too small"):
        K.bind_channel_binary(a, a[:4], a, 2, 2, 5, 1)
    with pytest.raises(ValueError, match="bad sizes"):
        K.bind_channel_binary(a, a, a, 2, 3, 2, 2)
    with pytest.raises(ValueError, match="no channel-broadcast"):
        K.bind_channel_binary(a, a, a, 6, 2, 4, 1)  # POW
