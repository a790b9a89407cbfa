"""unary_kernels.h (exp, sigmoid, SiLU, tanh, erf, GELU in both forms, hard-swish, log) against
float64 NumPy over 1M values, on every ISA this CPU runs (``generic`` is the forced portable
fallback: no AVX-512, no AVX2).

The values: 600k uniform in [-10, 10], 380k of magnitudes 1e-38..3e38 (both signs), 20k on a
grid over [-100, 100], and the specials (+-inf, NaN, +-0, denormals, +-FLT_MAX, +-87.5).
Errors are in float32 ulps of the float64 reference (``np.spacing`` of the reference rounded
to float32). Measured worst case over generic, AVX2 and AVX-512 (the bounds in ``CASES`` allow a
little more): EXP 1.01 ulp, SIGMOID 1.97, SILU 2.07, TANH 1.24, ERF 2.82, LOG 0.77, HARD-SWISH
1.91 (|x| < 1e37; beyond, x * 6 overflows in float32, as in MNN's kernel). GELU_STANDARD: 4.3 ulp
for x > -1; 41 ulp on (-5.65, -1], where the function's own condition number is about x^2 / 2
(the float32 input's rounding alone moves it by 15 ulp); below -5.657 (u = x / sqrt 2 < -4)
it is taken as 0, 4.4e-8 absolute at most. GELU is MNN's approximation (its rational tanh,
clamped): 1.9e-4 absolute from the exact tanh form (the approximation's own distance), and within
2 ulp + 1.8e-7 |x| of that approximation evaluated in float32 (``mnnpy/ops/unary_op.py``;
bit-identical on generic; its t + 1 cancels near x = -3.7, so FMA contraction moves the last
bits). EXPM1 is MNN's ``exp(x) - 1`` in float32: within 1.75 ulp of max(1, e^x). NaN stays
NaN; infinities are checked against the reference (exp(+-inf) is exp(+-87), MNN's clamp).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import pytest

from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as U
from mnnpy.backend.cpu.kernels import unary as UK
from mnnpy.ops.unary_op import FLOAT_FUNCS

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _exp87(v: np.ndarray) -> np.ndarray:
    return np.exp(np.clip(v, -87.0, 87.0))  # MNNExp's clamp


def _gelu_tanh_exact(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))


# code: (float64 reference, max ulp, the values the ulp bound holds for)
Ref = Callable[[np.ndarray], np.ndarray]
CASES: dict[int, tuple[Ref, float, Callable[[np.ndarray], np.ndarray]]] = {
    U.EXP: (_exp87, 1.5, np.isfinite),
    U.SIGMOID: (lambda v: 1 / (1 + _exp87(-v)), 2.5, np.isfinite),
    U.SILU: (lambda v: v / (1 + _exp87(-v)), 2.5, np.isfinite),
    U.TANH: (np.tanh, 1.75, np.isfinite),
    U.ERF: (_erf, 3.5, np.isfinite),
    U.LOG: (np.log, 1.0, lambda x: np.isfinite(x) & (x > 0)),
    U.HARDSWISH: (lambda v: v * np.clip(v + 3, 0, 6) / 6, 2.5, lambda x: np.abs(x) < 1e37),
    U.GELU_STANDARD: (
        lambda v: v * 0.5 * (1 + _erf(v / math.sqrt(2))),
        5.0,
        lambda x: np.isfinite(x) & (x > -1),
    ),
}


@functools.cache
def values() -> np.ndarray:
    rng = np.random.default_rng(2026)
    dense = rng.uniform(-10, 10, 600_000)
    mags = 10.0 ** rng.uniform(-38, 38.5, 380_000) * rng.choice([-1.0, 1.0], 380_000)
    special = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1e-40, 3.4e38, -3.4e38, 87.5]
    grid = np.linspace(-100, 100, 1_000_000 - 980_000 - len(special))
    x = np.concatenate([dense, mags, grid, special]).astype(np.float32)
    assert x.size == 1_000_000
    return x


def run(code: int, x: np.ndarray) -> np.ndarray:
    """The kernel on ``x``, 1 thread; 2 threads and in place must give the same bits."""
    out = np.empty_like(x)
    UK.unary(x, out, x.size, code)
    inplace = x.copy()
    UK.unary(inplace, inplace, x.size, code, 2)
    np.testing.assert_array_equal(out, inplace)
    return out


def ulps(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|out - ref| in float32 ulps of ref (ref in float64, both finite)."""
    unit = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
    return np.abs(out.astype(np.float64) - ref) / unit


def check_specials(out: np.ndarray, ref: np.ndarray) -> None:
    """NaN where the reference is NaN, the same infinities, the same sign on zeros."""
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    inf = np.isinf(ref)
    np.testing.assert_array_equal(out[inf], ref[inf].astype(np.float32))
    zero = ref == 0
    np.testing.assert_array_equal(np.signbit(out[zero]), np.signbit(ref[zero]))


@pytest.mark.parametrize("code", sorted(CASES))
def test_within_ulps_of_float64(code: int, isa: str) -> None:
    fn, bound, where = CASES[code]
    x = np.abs(values()) if code == U.LOG else values()
    out = run(code, x)
    with np.errstate(all="ignore"):
        ref = fn(x.astype(np.float64))
    check_specials(out, ref)
    sel = where(x) & np.isfinite(ref)
    err = ulps(out[sel], ref[sel])
    assert err.max() <= bound, (isa, float(err.max()), float(x[sel][np.argmax(err)]))
    # the usual tolerance, everywhere the reference is finite (hard-swish: |x| < 1e37)
    fin = np.isfinite(ref) & ((np.abs(x) < 1e37) if code == U.HARDSWISH else True)
    np.testing.assert_allclose(out[fin], ref[fin], rtol=1e-3, atol=1e-4)
    if code == U.GELU_STANDARD:  # ill-conditioned below -1, flushed to 0 below -5.66
        mid = (x > -5.65) & (x <= -1)
        assert ulps(out[mid], ref[mid]).max() <= 48
        low = fin & (x <= -5.65)
        assert np.abs(out[low] - ref[low]).max() <= 4.5e-8


def test_log_edges(isa: str) -> None:
    x = np.array([0.0, -0.0, -1.0, -np.inf, np.inf, np.nan, 1e-45, 1.0, 2.0], np.float32)
    out = run(U.LOG, x)
    assert out[0] == out[1] == -np.inf and np.isnan(out[2:4]).all() and out[4] == np.inf
    assert np.isnan(out[5]) and out[7] == 0 and out[8] == np.float32(math.log(2))
    assert abs(out[6] - math.log(2.0**-149)) <= np.spacing(np.float32(104))  # the least denormal


def test_gelu_is_mnns_approximation(isa: str) -> None:
    x = values()
    out = run(U.GELU, x)
    fin = np.isfinite(x)
    with np.errstate(all="ignore"):
        mnn = FLOAT_FUNCS[U.GELU](x)  # MNN's rational tanh in float32
        exact = _gelu_tanh_exact(x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(mnn))
    small = fin & (np.abs(x) < 1e18)  # x^3 stays finite
    unit = np.spacing(np.abs(mnn[small]))
    # near x = -3.7, t + 1 cancels: one ulp of t moves the result by 3e-8 |x| (FMA or not)
    err = np.abs(out[small] - mnn[small]) - 2 * unit
    assert (err <= 2e-7 * np.abs(x[small])).all()
    assert np.abs(out[small] - exact[small]).max() < 2e-4  # MNN's own distance: 1.9e-4


def test_expm1_is_exp_minus_one(isa: str) -> None:
    x = values()
    out = run(U.EXPM1, x)
    ref = _exp87(x.astype(np.float64)) - 1
    check_specials(out, ref)
    fin = np.isfinite(x)
    unit = np.spacing(np.maximum(1, np.abs(ref[fin])).astype(np.float32))
    assert (np.abs(out[fin] - ref[fin]) <= 2 * unit).all()


def test_exp_clamps_like_mnn(isa: str) -> None:
    x = np.array([100.0, np.inf, -100.0, -np.inf], np.float32)
    out = run(U.EXP, x)
    np.testing.assert_allclose(out, np.exp([87.0, 87.0, -87.0, -87.0]), rtol=1e-6)
    sig = run(U.SIGMOID, x)
    assert sig[0] == sig[1] == 1 and 0 < sig[3] < 1e-37


def test_odd_lengths_and_offsets(isa: str) -> None:
    """Vector loop tails: every length 0..70 at an unaligned start."""
    x = np.random.default_rng(3).standard_normal(80).astype(np.float32) * 4
    for code in (U.SILU, U.GELU, U.TANH, U.LOG):
        src = np.abs(x) if code == U.LOG else x
        ref = FLOAT_FUNCS[code](src)
        for n in range(71):
            out = np.full(80, 7.0, np.float32)
            UK.unary(src[1 : 1 + n], out[1 : 1 + n], n, code)
            np.testing.assert_allclose(out[1 : 1 + n], ref[1 : 1 + n], rtol=1e-5, atol=5e-7)
            assert out[0] == 7 and (out[1 + n :] == 7).all()


@pytest.mark.parametrize("scalar_b", [False, True])
def test_binary_mul_silu_rows(isa: str, scalar_b: bool) -> None:
    """BinaryOp MUL_SILU ``x * silu(y)`` (eltwise_kernels.h, same exp): 1M values (tails too),
    within 3 ulp of float64 (measured 2.47), 1 and 2 threads and in place alike."""
    from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
    from mnnpy.backend.cpu.kernels import eltwise as K

    y = values()[: 1_000_000 - 3]
    x = np.random.default_rng(5).standard_normal(y.size).astype(np.float32)
    b = y[:1].copy() if scalar_b else y
    ones = np.ones(1, np.intp)
    shape, sb = np.array([y.size], np.intp), np.array([0 if scalar_b else 1], np.intp)
    out = np.empty_like(x)
    K.binary(x, b, out, B.MUL_SILU, shape, ones, sb, False, 1)
    two = x.copy()
    K.binary(two, b, two, B.MUL_SILU, shape, ones, sb, False, 2)
    np.testing.assert_array_equal(out, two)
    yb = np.broadcast_to(b, x.shape).astype(np.float64)
    with np.errstate(all="ignore"):
        ref = x * (yb / (1 + _exp87(-yb)))
    check_specials(out, ref)
    normal = (np.abs(ref) > 1e-30) & (np.abs(ref) < 3e38)  # float32 results, not denormal
    assert ulps(out[normal], ref[normal]).max() <= 3


def test_bind_unary_runs_on_its_buffers() -> None:
    """``bind_unary`` (a session's prepared step): the same bits as ``unary`` on every call,
    reading the buffers' current contents; sizes and operations checked when binding."""
    x = np.random.default_rng(4).standard_normal(3 * 4096 + 5).astype(np.float32)
    out, want = np.empty_like(x), np.empty_like(x)
    call = UK.bind_unary(x, out, x.size, U.SILU, 2)
    for scale in (1, -3):
        x *= np.float32(scale)
        call()
        UK.unary(x, want, x.size, U.SILU)
        np.testing.assert_array_equal(out, want)
    UK.bind_unary(x[:0], out[:0], 0, U.EXP)()  # empty: nothing to do
    with pytest.raises(ValueError, match="too small"):
        UK.bind_unary(x, out[:-1], x.size, U.EXP)
    with pytest.raises(ValueError, match="does not support"):
        UK.bind_unary(x, out, x.size, 99)
