"""BinaryOp: elementwise arithmetic and comparisons with NumPy broadcasting (MNN's CPUBinary).

Semantics follow MNN's CPU functions (``BinaryUtils.hpp``), including its integer quirks: integer
FLOORMOD is the truncated remainder (MNN computes ``x - floor(x / y) * y`` with an integer
``x / y``), LOGICALXOR is ``x != y``, shift counts are masked to 5 bits (x86). MNN's CPU backend
cannot create DIV, MAX_TEMP or MIN_TEMP (its converters emit REALDIV, MAXIMUM, MINIMUM), so they
are NOT_SUPPORT here too. Integer division by zero gives 0 (MNN traps, even on the zero padding
lanes of NC4HW4 int tensors). Comparisons produce int32 0 / 1.

int8 / uint8 (MNN has no CPU kernel for them; ONNX's semantics): computed as int32, the result
wrapped to the tensor's dtype; shift counts outside [0, 8) shift every bit out (left gives 0,
right the sign). Inputs of different dtypes: integers of different widths (MNN's shape function
accepts them), or any mix for POW (ONNX's Pow takes an exponent of another type). Both are
computed in float32 if one is float, else in int32, and the result has input 0's dtype (MNN's
rule) with x86 conversions (float -> int truncates, NaN / out of range -> INT_MIN).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)
I8, U8 = np.dtype(np.int8), np.dtype(np.uint8)
_Fn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _i2(fn: Callable[..., np.ndarray]) -> _Fn:
    """An int32 comparison / logic result from a boolean function."""
    return lambda x, y: fn(x, y).astype(np.int32)


def _d2i(v: np.ndarray) -> np.ndarray:
    """float64 -> int32 as x86 truncates: NaN and out-of-range values become INT_MIN."""
    v = np.asarray(v, dtype=np.float64)
    ok = (v >= -(2.0**31)) & (v < 2.0**31)
    return np.where(ok, np.where(ok, v, 0).astype(np.int64), -(2**31)).astype(np.int32)


def _safe(y: np.ndarray) -> np.ndarray:
    """``y`` with 0 and -1 replaced by 1 (integer division traps on them)."""
    return np.where((y == 0) | (y == -1), 1, y)


def _trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    q = np.trunc(x.astype(np.float64) / np.where(y == 0, 1, y))
    return np.where(y == 0, 0, q).astype(np.int64).astype(np.int32)  # INT_MIN / -1 wraps


def _trunc_rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where((y == 0) | (y == -1), 0, np.fmod(x, _safe(y))).astype(np.int32)


def _floor_rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where((y == 0) | (y == -1), 0, np.mod(x, _safe(y))).astype(np.int32)


_COMMON: dict[int, _Fn] = {
    B.ADD: np.add,
    B.SUB: np.subtract,
    B.MUL: np.multiply,
    B.MAXIMUM: np.maximum,
    B.MINIMUM: np.minimum,
    B.SquaredDifference: lambda x, y: (x - y) * (x - y),
    B.GREATER: _i2(np.greater),
    B.GREATER_EQUAL: _i2(np.greater_equal),
    B.LESS: _i2(np.less),
    B.LESS_EQUAL: _i2(np.less_equal),
    B.EQUAL: _i2(np.equal),
    B.NOTEQUAL: _i2(np.not_equal),
}
FLOAT_FUNCS: dict[int, _Fn] = {
    **_COMMON,
    B.REALDIV: np.divide,
    B.POW: np.power,
    B.FLOORDIV: lambda x, y: np.floor(x.astype(np.float64) / y.astype(np.float64)),
    B.FLOORMOD: lambda x, y: x - np.floor(x / y) * y,
    B.MOD: np.fmod,
    B.ATAN2: np.arctan2,
    B.MUL_SILU: lambda x, y: x * (y / (np.float32(1) + np.exp(np.clip(-y, -87, 87)))),  # MNNExp
}
INT_FUNCS: dict[int, _Fn] = {
    **_COMMON,
    B.REALDIV: _trunc_div,
    B.POW: lambda x, y: _d2i(np.power(x.astype(np.float64), y.astype(np.float64))),
    B.FLOORDIV: lambda x, y: _d2i(np.floor(x.astype(np.float64) / y.astype(np.float64))),
    B.FLOORMOD: _trunc_rem,
    B.MOD: _floor_rem,
    B.LOGICALOR: _i2(lambda x, y: (x != 0) | (y != 0)),
    B.LOGICALXOR: _i2(np.not_equal),
    B.BITWISE_AND: np.bitwise_and,
    B.BITWISE_OR: np.bitwise_or,
    B.BITWISE_XOR: np.bitwise_xor,
    B.LEFTSHIFT: lambda x, y: np.left_shift(x, y & 31),
    B.RIGHTSHIFT: lambda x, y: np.right_shift(x, y & 31),
}
COMPARE = frozenset({B.GREATER, B.GREATER_EQUAL, B.LESS, B.LESS_EQUAL, B.EQUAL, B.NOTEQUAL})


def _widened(fn: _Fn) -> _Fn:
    """``fn`` on int32 copies of int8 / uint8 operands (the caller wraps the result)."""
    return lambda x, y: fn(x.astype(np.int32), y.astype(np.int32))


def _narrow_shift(left: bool) -> _Fn:
    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = x.astype(np.int64), y.astype(np.int64)
        out = (y < 0) | (y >= 8)
        count = np.where(out, 0, y)
        v = np.left_shift(x, count) if left else np.right_shift(x, count)
        return np.where(out, 0 if left else np.where(x < 0, -1, 0), v)

    return fn


NARROW_FUNCS: dict[int, _Fn] = {
    **{code: _widened(fn) for code, fn in INT_FUNCS.items()},
    B.LEFTSHIFT: _narrow_shift(True),
    B.RIGHTSHIFT: _narrow_shift(False),
}
FUNCS = {F32: FLOAT_FUNCS, I32: INT_FUNCS, I8: NARROW_FUNCS, U8: NARROW_FUNCS}


def compute_dtype(code: int, a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype both inputs are computed in: their own if equal, else float32 / int32.

    Raises:
        ComputeSizeError: for float mixed with int outside POW, or dtypes with no functions.
    """
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    mixes_float = (a.kind == "f") != (b.kind == "f")
    if a not in FUNCS or b not in FUNCS or (mixes_float and code != B.POW):
        raise ComputeSizeError(f"BinaryOp inputs differ in dtype: {a.name} vs {b.name}")
    return F32 if F32 in (a, b) else I32


def op_code(op: OpDef) -> int:
    """The op's BinaryOpOperation.

    Raises:
        NotSupportError: for a missing parameter or an operation no dtype supports.
    """
    code = getattr(op.param, "opType", None)
    if code not in FLOAT_FUNCS and code not in INT_FUNCS:
        raise NotSupportError(f"BinaryOp opType {code!r} is not supported")
    return int(code)


def function(code: int, dtype: np.dtype) -> _Fn:
    """The NumPy function of ``code`` for ``dtype``, or NotSupportError."""
    fn = FUNCS.get(np.dtype(dtype), {}).get(code)
    if fn is None:
        raise NotSupportError(f"BinaryOp opType {code} is not supported for {np.dtype(dtype).name}")
    return fn


def output_dtype(code: int, dtype: np.dtype) -> np.dtype:
    """int32 for comparisons, else the inputs' dtype."""
    return I32 if code in COMPARE else np.dtype(dtype)


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """NumPy broadcasting of two shapes, or ComputeSizeError."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise ComputeSizeError(f"cannot broadcast {tuple(a)!r} with {tuple(b)!r}") from None


@register_shape(OpType.BinaryOp)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Broadcast shape; format of the higher-rank input (input 0 on a tie), as MNN."""
    if len(inputs) != 2 or len(outputs) != 1:
        raise ComputeSizeError(f"BinaryOp needs 2 inputs and 1 output, has {len(inputs)}")
    a, b = inputs
    code = op_code(op)
    compute_dtype(code, a.dtype, b.dtype)  # MNN's T field is unreliable; the inputs decide
    out = outputs[0]
    out.shape = broadcast_shape(a.shape, b.shape)
    out.dtype = output_dtype(code, a.dtype)
    out.dimension_format = (b if b.ndim > a.ndim else a).dimension_format


@register_reference(OpType.BinaryOp)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``op(x, y)`` broadcast, then ReLU when ``activationType == 1`` (other values: none)."""
    x, y = (np.asarray(v) for v in inputs)
    code = op_code(op)
    dtype = compute_dtype(code, x.dtype, y.dtype)
    fn = function(code, dtype)
    with np.errstate(all="ignore"):
        result = np.asarray(fn(x.astype(dtype, copy=False), y.astype(dtype, copy=False)))
        want = output_dtype(code, x.dtype)
        if result.dtype.kind == "f" and want.kind != "f":
            result = _d2i(result)
        result = result.astype(want, copy=False)
    if getattr(op.param, "activationType", 0) == 1:
        result = np.maximum(result, 0).astype(result.dtype)
    return [result]
