"""UnaryOp: one elementwise function of the input (MNN's CPUUnary, ``UnaryUtils.hpp``).

float32 supports every ``UnaryOpOperation``; int32 only ABS, NEG, SQUARE and SIGN (MNN's
``selectForInt``); int8 tables (``tableInt8``) run only in int8 models, as a lookup
(``executions/unary_int8.py``), and are NOT_SUPPORT here. MNN's quirks are kept: EXP and
EXPM1 clamp their argument to [-87, 87] (``MNNExp``), so they stay finite; LOG1P is
``log(1 + x)``; ROUND rounds halves away from zero; ERFINV is TensorFlow's polynomial and gives
FLT_MAX (also for -1) at |x| = 1; integer ABS goes through float (``fabsf((float)x)``), NEG and
SQUARE wrap. GELU is the tanh approximation with MNN's rational tanh (clamped, so GELU is
exactly 0 below about -3.9), GELU_STANDARD the erf form. NumPy has no erf, so the
reference gets it from ``math.erf`` (float64, elementwise).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as U
from mnnpy.errors import NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)
_Fn = Callable[[np.ndarray], np.ndarray]
_FLT_MAX = float(np.finfo(np.float32).max)
# TensorFlow's erfinv polynomial (as MNN's UnaryErfinv): coefficients for w < 5 and w >= 5.
ERFINV_SMALL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941,
)  # fmt: skip
ERFINV_LARGE = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682,
)  # fmt: skip


def _f64(fn: _Fn) -> _Fn:
    """``fn`` evaluated in float64."""
    return lambda x: fn(x.astype(np.float64))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def _erfc(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erfc, otypes=[np.float64])(x.astype(np.float64))


def _erfinv(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        w = -np.log1p(-x * x)
        small = w < 5.0
        t = np.where(small, w - 2.5, np.sqrt(w) - 3.0)
        p = np.where(small, ERFINV_SMALL[0], ERFINV_LARGE[0])
        for a, b in zip(ERFINV_SMALL[1:], ERFINV_LARGE[1:], strict=True):
            p = np.where(small, a, b) + p * t
    return np.where(np.abs(x) == 1, _FLT_MAX, p * x)


def _exp(x: np.ndarray) -> np.ndarray:
    return np.exp(np.clip(x.astype(np.float64), -87.0, 87.0))


def _round(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _bnll(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return np.where(x > 0, x + np.log1p(np.exp(-x)), np.log1p(np.exp(np.minimum(x, 0))))


def _hardswish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + np.float32(3), 0, 6) / np.float32(6)


def _gelu(x: np.ndarray) -> np.ndarray:
    f = np.float32
    y = np.clip((x * x * x * f(0.044715) + x) * f(0.79788458), -5, 5).astype(np.float32)
    y2 = y * y
    t = (((y2 + f(378)) * y2 + f(17325)) * y2 + f(135135)) * y
    t = t / (((y2 * f(28) + f(3150)) * y2 + f(62370)) * y2 + f(135135))
    return (np.clip(t, -1, 1) + f(1)) * x * f(0.5)


def _int_abs(x: np.ndarray) -> np.ndarray:
    # fabsf((float)x) converted back: |INT_MIN| = 2**31 does not fit and becomes INT_MIN (x86)
    v = np.abs(x.astype(np.float32).astype(np.float64))
    return np.where(v >= 2.0**31, -(2**31), v).astype(np.int64).astype(np.int32)


FLOAT_FUNCS: dict[int, _Fn] = {
    U.ABS: np.abs,
    U.NEG: np.negative,
    U.FLOOR: np.floor,
    U.CEIL: np.ceil,
    U.SQUARE: np.square,
    U.SQRT: np.sqrt,
    U.RSQRT: lambda x: np.float32(1) / np.sqrt(x),
    U.EXP: _exp,
    U.LOG: np.log,
    U.SIN: _f64(np.sin),
    U.COS: _f64(np.cos),
    U.TAN: _f64(np.tan),
    U.ASIN: _f64(np.arcsin),
    U.ACOS: _f64(np.arccos),
    U.ATAN: _f64(np.arctan),
    U.RECIPROCAL: lambda x: np.float32(1) / x,
    U.LOG1P: lambda x: np.log(np.float32(1) + x),
    U.BNLL: _bnll,
    U.ACOSH: _f64(np.arccosh),
    U.SINH: _f64(np.sinh),
    U.ASINH: _f64(np.arcsinh),
    U.ATANH: _f64(np.arctanh),
    U.SIGN: np.sign,
    U.ROUND: _round,
    U.COSH: _f64(np.cosh),
    U.ERF: _erf,
    U.ERFC: _erfc,
    U.ERFINV: _erfinv,
    U.EXPM1: lambda x: _exp(x) - 1,
    U.SIGMOID: lambda x: 1 / (1 + _exp(-x.astype(np.float64))),
    U.TANH: _f64(np.tanh),
    U.HARDSWISH: _hardswish,
    U.GELU: _gelu,
    U.GELU_STANDARD: lambda x: (_erf(x * 0.7071067932881648) + 1) * x * 0.5,
    U.SILU: lambda x: x / (1 + _exp(-x.astype(np.float64))),
}
INT_FUNCS: dict[int, _Fn] = {
    U.ABS: _int_abs,
    U.NEG: np.negative,
    U.SQUARE: lambda x: x * x,
    U.SIGN: np.sign,
}
FUNCS = {F32: FLOAT_FUNCS, I32: INT_FUNCS}


def op_code(op: OpDef) -> int:
    """The op's UnaryOpOperation.

    Raises:
        NotSupportError: for a missing parameter, an unknown operation or an int8 table.
    """
    code = getattr(op.param, "opType", None)
    if code not in FLOAT_FUNCS:
        raise NotSupportError(f"UnaryOp opType {code!r} is not supported")
    if getattr(op.param, "tableInt8", None) is not None:
        raise NotSupportError("UnaryOp with an int8 lookup table (quantized) is not supported")
    return int(code)


def function(code: int, dtype: np.dtype) -> _Fn:
    """The NumPy function of ``code`` for ``dtype``, or NotSupportError."""
    fn = FUNCS.get(np.dtype(dtype), {}).get(code)
    if fn is None:
        raise NotSupportError(f"UnaryOp opType {code} is not supported for {np.dtype(dtype).name}")
    return fn


@register_reference(OpType.UnaryOp)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``f(x)`` elementwise, in the input's dtype."""
    x = np.asarray(inputs[0])
    fn = function(op_code(op), x.dtype)
    with np.errstate(all="ignore"):
        return [np.asarray(fn(x)).astype(x.dtype)]
