# cython: language_level=3
"""Elementwise UnaryOp kernels on raw (any layout) float32 / int32 storage.

NumPy reference: ``mnnpy/ops/unary_op.py`` (which documents MNN's quirks kept here). Chunks of
the buffer run in parallel. The functions models spend time in (exp, sigmoid, SiLU, tanh, GELU,
erf, hard-swish, log...) are vectorized C loops in ``unary_kernels.h``, for the ISA
``gemm.set_isa`` chose; the others go through a table of scalar functions (a function pointer
chosen once per call). Each output element depends only on the input element at the same
position, so ``src`` and ``dst`` may be the same buffer and results do not depend on the thread
count.
"""

from cython.parallel cimport prange
from libc.math cimport (
    acosf, acoshf, asinf, asinhf, atanf, atanhf, ceilf, cosf, coshf, erfc, exp, fabsf, floorf,
    log, log1p, logf, roundf, sinf, sinhf, sqrt, sqrtf, tanf,
)

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall, current_isa


cdef extern from "unary_kernels.h" nogil:
    float mnnpy_erf1(float x)
    float mnnpy_exp_mnn(float x)
    float mnnpy_log1(float x)
    float mnnpy_tanh1(float x)
    float mnnpy_gelu_tanh1(float x)
    float mnnpy_gelu_erf1(float x)
    float mnnpy_hardswish1(float x)
    int mnnpy_unary_simd(int isa, int op, const float* src, float* dst, Py_ssize_t n)

ctypedef float (*float_fn)(float) noexcept nogil
ctypedef int (*int_fn)(int) noexcept nogil

# MNN's UnaryOpOperation values.
cdef enum:
    ABS = 0
    NEG = 1
    FLOOR = 2
    CEIL = 3
    SQUARE = 4
    SQRT = 5
    RSQRT = 6
    EXP = 7
    LOG = 8
    SIN = 9
    COS = 10
    TAN = 11
    ASIN = 12
    ACOS = 13
    ATAN = 14
    RECIPROCAL = 15
    LOG1P = 16
    BNLL = 17
    ACOSH = 18
    SINH = 19
    ASINH = 20
    ATANH = 21
    SIGN = 22
    ROUND = 23
    COSH = 24
    ERF = 25
    ERFC = 26
    ERFINV = 27
    EXPM1 = 28
    SIGMOID = 29
    TANH = 30
    HARDSWISH = 31
    GELU = 32
    GELU_STANDARD = 33
    SILU = 34

FLOAT_OPS = frozenset(range(ABS, SILU + 1))
INT_OPS = frozenset({ABS, NEG, SQUARE, SIGN})
# f(0) == 0: NC4HW4 padding lanes (zeros) stay zero without a reset.
ZERO_PRESERVING = frozenset({
    ABS, NEG, FLOOR, CEIL, SQUARE, SQRT, SIN, TAN, ASIN, ATAN, LOG1P, SINH, ASINH, ATANH, SIGN,
    ROUND, ERF, ERFINV, EXPM1, TANH, HARDSWISH, GELU, GELU_STANDARD, SILU,
})
cdef Py_ssize_t _CHUNK = 4096
cdef float _FLT_MAX = 3.4028234663852886e+38
cdef double _ERFINV_SMALL[9]
cdef double _ERFINV_LARGE[9]
_ERFINV_SMALL[:] = [
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941,
]
_ERFINV_LARGE[:] = [
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682,
]


cdef inline float _abs(float x) noexcept nogil:
    return fabsf(x)


cdef inline float _neg(float x) noexcept nogil:
    return -x


cdef inline float _floor(float x) noexcept nogil:
    return floorf(x)


cdef inline float _ceil(float x) noexcept nogil:
    return ceilf(x)


cdef inline float _square(float x) noexcept nogil:
    return x * x


cdef inline float _sqrt(float x) noexcept nogil:
    return sqrtf(x)


cdef inline float _rsqrt(float x) noexcept nogil:
    return 1.0 / sqrtf(x)


cdef inline float _exp(float x) noexcept nogil:
    return mnnpy_exp_mnn(x)  # MNNExp clamps x to [-87, 87]: exp(100) is exp(87), not inf


cdef inline float _log(float x) noexcept nogil:
    return mnnpy_log1(x)


cdef inline float _sin(float x) noexcept nogil:
    return sinf(x)


cdef inline float _cos(float x) noexcept nogil:
    return cosf(x)


cdef inline float _tan(float x) noexcept nogil:
    return tanf(x)


cdef inline float _asin(float x) noexcept nogil:
    return asinf(x)


cdef inline float _acos(float x) noexcept nogil:
    return acosf(x)


cdef inline float _atan(float x) noexcept nogil:
    return atanf(x)


cdef inline float _reciprocal(float x) noexcept nogil:
    return 1.0 / x


cdef inline float _log1p(float x) noexcept nogil:
    return logf(1.0 + x)  # MNN: log(1 + x), not log1p


cdef inline float _bnll(float x) noexcept nogil:
    if x > 0:
        return <float>(x + log(1.0 + exp(-<double>x)))
    return <float>log(1.0 + exp(<double>x))


cdef inline float _acosh(float x) noexcept nogil:
    return acoshf(x)


cdef inline float _sinh(float x) noexcept nogil:
    return sinhf(x)


cdef inline float _asinh(float x) noexcept nogil:
    return asinhf(x)


cdef inline float _atanh(float x) noexcept nogil:
    return atanhf(x)


cdef inline float _sign(float x) noexcept nogil:
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


cdef inline float _round(float x) noexcept nogil:
    return roundf(x)


cdef inline float _cosh(float x) noexcept nogil:
    return coshf(x)


cdef inline float _erf(float x) noexcept nogil:
    return mnnpy_erf1(x)  # erf_kernels.h


cdef inline float _erfc(float x) noexcept nogil:
    return <float>erfc(x)  # MNN calls the double erfc


cdef inline float _erfinv(float x) noexcept nogil:
    cdef double w = -log1p(-<double>(x * x)), p
    cdef const double* c = _ERFINV_SMALL
    cdef int i
    if fabsf(x) == 1:
        return _FLT_MAX  # MNN returns FLT_MAX for x = -1 too
    if w < 5.0:
        w = w - 2.5
    else:
        w = sqrt(w) - 3.0
        c = _ERFINV_LARGE
    p = c[0]
    for i in range(1, 9):
        p = c[i] + p * w
    return <float>(p * x)


cdef inline float _expm1(float x) noexcept nogil:
    return mnnpy_exp_mnn(x) - 1


cdef inline float _sigmoid(float x) noexcept nogil:
    return 1 / (1 + mnnpy_exp_mnn(-x))


cdef inline float _tanh(float x) noexcept nogil:
    return mnnpy_tanh1(x)


cdef inline float _hardswish(float x) noexcept nogil:
    return mnnpy_hardswish1(x)


cdef inline float _gelu(float x) noexcept nogil:
    return mnnpy_gelu_tanh1(x)  # MNNGelu: its rational tanh, clamped (unary_kernels.h)


cdef inline float _gelu_standard(float x) noexcept nogil:
    return mnnpy_gelu_erf1(x)


cdef inline float _silu(float x) noexcept nogil:
    return x / (1 + mnnpy_exp_mnn(-x))


cdef inline int _iabs(int x) noexcept nogil:
    # MNN computes fabsf((float)x); |INT_MIN| does not fit back and gives INT_MIN (x86)
    cdef float v = fabsf(<float>x)
    if v >= 2147483648.0:
        return -2147483647 - 1
    return <int>v


cdef inline int _ineg(int x) noexcept nogil:
    return <int>(<unsigned int>0 - <unsigned int>x)


cdef inline int _isquare(int x) noexcept nogil:
    return <int>(<unsigned int>x * <unsigned int>x)


cdef inline int _isign(int x) noexcept nogil:
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


# Function tables indexed by UnaryOpOperation; static, so unset entries are NULL (unsupported).
cdef float_fn _FLOAT_FNS[SILU + 1]
cdef int_fn _INT_FNS[SILU + 1]
_FLOAT_FNS[ABS] = _abs
_FLOAT_FNS[NEG] = _neg
_FLOAT_FNS[FLOOR] = _floor
_FLOAT_FNS[CEIL] = _ceil
_FLOAT_FNS[SQUARE] = _square
_FLOAT_FNS[SQRT] = _sqrt
_FLOAT_FNS[RSQRT] = _rsqrt
_FLOAT_FNS[EXP] = _exp
_FLOAT_FNS[LOG] = _log
_FLOAT_FNS[SIN] = _sin
_FLOAT_FNS[COS] = _cos
_FLOAT_FNS[TAN] = _tan
_FLOAT_FNS[ASIN] = _asin
_FLOAT_FNS[ACOS] = _acos
_FLOAT_FNS[ATAN] = _atan
_FLOAT_FNS[RECIPROCAL] = _reciprocal
_FLOAT_FNS[LOG1P] = _log1p
_FLOAT_FNS[BNLL] = _bnll
_FLOAT_FNS[ACOSH] = _acosh
_FLOAT_FNS[SINH] = _sinh
_FLOAT_FNS[ASINH] = _asinh
_FLOAT_FNS[ATANH] = _atanh
_FLOAT_FNS[SIGN] = _sign
_FLOAT_FNS[ROUND] = _round
_FLOAT_FNS[COSH] = _cosh
_FLOAT_FNS[ERF] = _erf
_FLOAT_FNS[ERFC] = _erfc
_FLOAT_FNS[ERFINV] = _erfinv
_FLOAT_FNS[EXPM1] = _expm1
_FLOAT_FNS[SIGMOID] = _sigmoid
_FLOAT_FNS[TANH] = _tanh
_FLOAT_FNS[HARDSWISH] = _hardswish
_FLOAT_FNS[GELU] = _gelu
_FLOAT_FNS[GELU_STANDARD] = _gelu_standard
_FLOAT_FNS[SILU] = _silu
_INT_FNS[ABS] = _iabs
_INT_FNS[NEG] = _ineg
_INT_FNS[SQUARE] = _isquare
_INT_FNS[SIGN] = _isign


cdef void _float_loop(int op, const float* src, float* dst, Py_ssize_t n,
                      float_fn f) noexcept nogil:
    # unary_kernels.h's vectorized loops first; cheap arithmetic gets its own loop here, so the
    # compiler inlines and vectorizes it; the rest go through the function table.
    cdef Py_ssize_t i
    if mnnpy_unary_simd(current_isa(), op, src, dst, n):
        return
    if op == SQRT:
        for i in range(n):
            dst[i] = _sqrt(src[i])
    elif op == RSQRT:
        for i in range(n):
            dst[i] = _rsqrt(src[i])
    else:
        for i in range(n):
            dst[i] = f(src[i])


ctypedef fused scalar_t:
    float
    int


cdef void _float_run(int op, const float* src, float* dst, Py_ssize_t n, float_fn f,
                     int num_thread) noexcept nogil:
    cdef Py_ssize_t chunks = (n + _CHUNK - 1) // _CHUNK, c, start
    if num_thread <= 1 or chunks <= 1:  # no parallel region to enter
        _float_loop(op, src, dst, n, f)
        return
    for c in prange(chunks, num_threads=num_thread, schedule="static"):
        start = c * _CHUNK
        _float_loop(op, src + start, dst + start, min(_CHUNK, n - start), f)


cdef float_fn _float_fn(int op) except? NULL:
    cdef float_fn ff = _FLOAT_FNS[op] if 0 <= op <= SILU else NULL
    if ff == NULL:
        raise ValueError(f"unary op {op} does not support this dtype")
    return ff


def unary(const scalar_t[::1] src, scalar_t[::1] dst, Py_ssize_t n, int op, int num_thread=1):
    """``dst[i] = f(src[i])`` for the first ``n`` elements; ``f`` is UnaryOpOperation ``op``."""
    if n < 0 or src.shape[0] < n or dst.shape[0] < n:
        raise ValueError(f"buffers too small for {n} elements")
    cdef float_fn ff = NULL
    cdef int_fn fi = NULL
    if scalar_t is float:
        ff = _float_fn(op)
    elif 0 <= op <= SILU:
        fi = _INT_FNS[op]
    if scalar_t is int and fi == NULL:
        raise ValueError(f"unary op {op} does not support this dtype")
    cdef Py_ssize_t chunks = (n + _CHUNK - 1) // _CHUNK, c, i, start, end
    if n == 0:
        return
    if scalar_t is float:
        with nogil:
            _float_run(op, &src[0], &dst[0], n, ff, num_thread)
    elif chunks == 1:  # too little work to wake another thread
        with nogil:
            for i in range(n):
                dst[i] = fi(src[i])
    else:
        with nogil:
            for c in prange(chunks, num_threads=num_thread, schedule="static"):
                start = c * _CHUNK
                end = min(start + _CHUNK, n)
                for i in range(start, end):
                    dst[i] = fi(src[i])


cdef class UnaryCall(KernelCall):
    """A float32 UnaryOp on fixed buffers (``bind_unary``)."""
    cdef Py_ssize_t n
    cdef int op
    cdef float_fn f

    cdef void run(self) noexcept:
        with nogil:
            _float_run(self.op, self.s, self.d, self.n, self.f, self.num_thread)


def bind_unary(const float[::1] src, float[::1] dst, Py_ssize_t n, int op, int num_thread=1):
    """``unary`` on these float32 buffers, checked now: a ``UnaryCall`` that runs it when
    called with no arguments (a session's prepared step, ``Execution.bind``)."""
    if n < 0 or src.shape[0] < n or dst.shape[0] < n:
        raise ValueError(f"buffers too small for {n} elements")
    cdef UnaryCall call = UnaryCall()
    call.f = _float_fn(op)
    call.op, call.n, call.num_thread = op, n, num_thread
    if n:
        call.s, call.d = &src[0], &dst[0]
    call.buffers = (src, dst)
    return call
