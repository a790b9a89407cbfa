"""BinaryOp on int8 / uint8 (wrapping, ONNX shifts) and on inputs of different dtypes."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.ops.binary_op import INT_FUNCS
from mnnpy.tensor_format import DimensionFormat
from tests.ops.test_binary_op import check, param

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def narrow(dtype: type, shape: tuple[int, ...], seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


def wrapped(v: np.ndarray, dtype: type) -> np.ndarray:
    """Python-int results reduced modulo 2**8 into ``dtype``'s range (independent of NumPy)."""
    bits = np.vectorize(lambda n: int(n) & 0xFF)(v)
    if np.iinfo(dtype).min < 0:
        bits = np.where(bits >= 128, bits - 256, bits)
    return bits.astype(dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("code", sorted(INT_FUNCS))
def test_narrow_ops_match_reference(code: int, fmt: DimensionFormat, dtype: type) -> None:
    x, y = narrow(dtype, (2, 5, 3, 3), 1), narrow(dtype, (2, 5, 3, 3), 2)
    out = check(x, y, param(code, relu=code == B.SUB), fmt=fmt)
    compare = code in (B.GREATER, B.GREATER_EQUAL, B.LESS, B.LESS_EQUAL, B.EQUAL, B.NOTEQUAL)
    assert out.dtype == (np.int32 if compare else dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_narrow_arithmetic_wraps(c: int, dtype: type) -> None:
    x, y = narrow(dtype, (2, c, 3, 5), c), narrow(dtype, (2, c, 3, 5), c + 1)
    xi, yi = x.astype(object), y.astype(object)
    np.testing.assert_array_equal(check(x, y, param(B.ADD)), wrapped(xi + yi, dtype))
    np.testing.assert_array_equal(check(x, y, param(B.SUB)), wrapped(xi - yi, dtype))
    np.testing.assert_array_equal(check(x, y, param(B.MUL)), wrapped(xi * yi, dtype))
    np.testing.assert_array_equal(check(x, y, param(B.MAXIMUM)), np.maximum(x, y))
    np.testing.assert_array_equal(check(x, y, param(B.GREATER)), (x > y).astype(np.int32))


def test_int8_division_truncates_and_wraps() -> None:
    x = np.array([7, -7, 7, -128, -128, 5], np.int8)
    y = np.array([2, 2, -2, -1, 0, 0], np.int8)
    np.testing.assert_array_equal(check(x, y, param(B.REALDIV), fmt=NCHW), [3, -3, -3, -128, 0, 0])
    np.testing.assert_array_equal(check(x, y, param(B.MOD), fmt=NCHW), [1, 1, -1, 0, 0, 0])


def test_int8_shifts_follow_onnx() -> None:
    x = np.array([64, 1, -64, -8, 4, -1, -8, 5, -3], np.int8)
    y = np.array([1, 7, 1, 8, 9, 127, -1, -30, 2], np.int8)
    left = check(x, y, param(B.LEFTSHIFT), fmt=NCHW)
    np.testing.assert_array_equal(left, [-128, -128, -128, 0, 0, 0, 0, 0, -12])
    right = check(x, y, param(B.RIGHTSHIFT), fmt=NCHW)
    np.testing.assert_array_equal(right, [32, 0, -32, -1, 0, -1, -1, 0, -1])


def test_uint8_shifts() -> None:
    x = np.array([16, 255, 1, 200], np.uint8)
    y = np.array([1, 4, 8, 200], np.uint8)
    np.testing.assert_array_equal(check(x, y, param(B.LEFTSHIFT), fmt=NCHW), [32, 240, 0, 0])
    np.testing.assert_array_equal(check(x, y, param(B.RIGHTSHIFT), fmt=NCHW), [8, 15, 0, 0])


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_narrow_broadcasting(fmt: DimensionFormat) -> None:
    x, y = narrow(np.int8, (2, 5, 3, 7), 3), narrow(np.int8, (5, 1, 1), 4)
    want = wrapped(x.astype(object) + y.astype(object), np.int8)
    np.testing.assert_array_equal(check(x, y, param(B.ADD), fmt=fmt), want)
    check(x, y, param(B.MINIMUM), fmt=fmt, consts={1: y})


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_pow_of_mixed_dtypes_has_the_base_dtype(fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(5)
    base = rng.uniform(0.5, 3, (2, 5, 3, 3)).astype(np.float32)
    exp = rng.integers(-3, 5, (2, 5, 3, 3)).astype(np.int32)
    out = check(base, exp, param(B.POW), fmt=fmt)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, base.astype(np.float64) ** exp, rtol=1e-5)
    ibase = rng.integers(-4, 5, (2, 5, 3, 3)).astype(np.int32)
    fexp = rng.integers(0, 6, (2, 5, 3, 3)).astype(np.float32) + np.float32(0.5) * (ibase > 0)
    out = check(ibase, fexp, param(B.POW), fmt=fmt)
    assert out.dtype == np.int32
    want = np.trunc(np.power(ibase.astype(np.float64), fexp.astype(np.float64)))
    np.testing.assert_array_equal(out, want.astype(np.int32))


def test_int8_with_int32_computes_in_int32() -> None:
    x = np.array([[-128, 0, 5, 127]], np.int8)
    low = np.array([-(2**31)], np.int32)
    out = check(x, low, param(B.MAXIMUM), fmt=NCHW, consts={1: low})
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, x)
    big = np.array([300], np.int32)
    np.testing.assert_array_equal(check(x, big, param(B.ADD), fmt=NCHW), [[-84, 44, 49, -85]])


def test_float_with_int_outside_pow_is_a_compute_size_error() -> None:
    x, y = np.ones((2, 3), np.float32), np.ones((2, 3), np.int8)
    with pytest.raises(MNNError) as e:
        check(x, y, param(B.MUL), fmt=NCHW)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
