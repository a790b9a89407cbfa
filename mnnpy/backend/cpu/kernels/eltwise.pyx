# cython: language_level=3
"""Elementwise kernels: BinaryOp with broadcasting, ReLU / ReLU6, NC4HW4 padding reset, bfloat16
rounding (Cast).

NumPy references: ``mnnpy/ops/binary_op.py`` and ``mnnpy/ops/relu.py``. ``binary`` walks an
index space given as a shape and one element stride per operand (0 where it broadcasts), so the
same kernel serves same-shape inputs on raw NC4HW4 storage (one dimension, strides 1 or 0) and
real broadcasting on logical (NCHW-ordered) buffers. Each function checks once, outside the
``nogil`` loop, that the buffers are large enough for what it will touch. Float add / sub / mul /
div / min / max on contiguous rows run in ``eltwise_kernels.h`` (per ISA, bit-identical).
"""

cimport cython
from cython.parallel cimport prange
from libc.math cimport atan2f, floor, floorf, fmodf, pow, powf
from libc.stdint cimport uint32_t
from libc.stddef cimport ptrdiff_t
from libc.string cimport memcpy

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall, current_isa


cdef extern from "eltwise_kernels.h" nogil:
    void mnnpy_ew_row(int isa, int op, const float* a, const float* b, int b_step, float* o,
                      ptrdiff_t n, int relu)
    float mnnpy_exp_mnn(float x)

ctypedef signed char i8
ctypedef unsigned char u8

ctypedef fused in_t:
    float
    int
    i8
    u8

ctypedef fused out_t:
    float
    int
    i8
    u8

ctypedef fused scalar_t:
    float
    int
    signed char
    unsigned char

# MNN's BinaryOpOperation values.
cdef enum:
    ADD = 0
    SUB = 1
    MUL = 2
    POW = 6
    REALDIV = 7
    MINIMUM = 8
    MAXIMUM = 9
    GREATER = 10
    GREATER_EQUAL = 11
    LESS = 12
    FLOORDIV = 13
    SQUARED_DIFFERENCE = 14
    EQUAL = 15
    LESS_EQUAL = 16
    FLOORMOD = 17
    MOD = 19
    ATAN2 = 20
    LOGICALOR = 21
    NOTEQUAL = 22
    BITWISE_AND = 23
    BITWISE_OR = 24
    BITWISE_XOR = 25
    LOGICALXOR = 26
    LEFTSHIFT = 27
    RIGHTSHIFT = 28
    MUL_SILU = 29

cdef enum:
    MAX_DIMS_C = 8  # the most dims of an index space (``MAX_DIMS``)

MAX_DIMS = MAX_DIMS_C
FLOAT_OPS = frozenset({
    ADD, SUB, MUL, POW, REALDIV, MINIMUM, MAXIMUM, GREATER,
    GREATER_EQUAL, LESS, FLOORDIV, SQUARED_DIFFERENCE, EQUAL, LESS_EQUAL, FLOORMOD, MOD, ATAN2,
    NOTEQUAL, MUL_SILU,
})
INT_OPS = frozenset({
    ADD, SUB, MUL, POW, REALDIV, MINIMUM, MAXIMUM, GREATER,
    GREATER_EQUAL, LESS, FLOORDIV, SQUARED_DIFFERENCE, EQUAL, LESS_EQUAL, FLOORMOD, MOD,
    LOGICALOR, NOTEQUAL, BITWISE_AND, BITWISE_OR, BITWISE_XOR, LOGICALXOR, LEFTSHIFT, RIGHTSHIFT,
})
# ops of bind_channel_binary (mnnpy_ew_row's)
CHANNEL_OPS = frozenset({ADD, SUB, MUL, REALDIV, MINIMUM, MAXIMUM, MUL_SILU})
COMPARE_OPS = frozenset({GREATER, GREATER_EQUAL, LESS, LESS_EQUAL, EQUAL, NOTEQUAL})
# Rows shorter than this are not split between threads.
cdef Py_ssize_t _MIN_CHUNK = 4096


cdef inline bint _is_compare(int op) noexcept nogil:
    return (op == GREATER or op == GREATER_EQUAL or op == LESS or op == LESS_EQUAL
            or op == EQUAL or op == NOTEQUAL)


cdef inline int _d2i(double v) noexcept nogil:
    # x86's cvttsd2si, which MNN's casts compile to: NaN and out-of-range values give INT_MIN.
    if v >= -2147483648.0 and v < 2147483648.0:
        return <int>v
    return -2147483647 - 1


cdef inline int _cmp(int op, in_t x, in_t y) noexcept nogil:
    if op == GREATER:
        return x > y
    if op == GREATER_EQUAL:
        return x >= y
    if op == LESS:
        return x < y
    if op == LESS_EQUAL:
        return x <= y
    if op == EQUAL:
        return x == y
    return x != y


cdef inline bint _is_hot(int op) noexcept nogil:
    return (op == ADD or op == SUB or op == MUL or op == REALDIV or op == MAXIMUM or op == MINIMUM
            or op == MUL_SILU)


cdef inline float _float_op(int op, float x, float y) noexcept nogil:
    if op == POW:
        return powf(x, y)
    if op == FLOORDIV:
        return <float>floor(<double>x / <double>y)
    if op == SQUARED_DIFFERENCE:
        return (x - y) * (x - y)
    if op == FLOORMOD:
        return x - floorf(x / y) * y
    if op == MOD:
        return fmodf(x, y)
    if op == ATAN2:
        return atan2f(x, y)
    if op == MUL_SILU:  # strided rows; contiguous ones: eltwise_kernels.h (clamped exp)
        return x * (y / (1 + mnnpy_exp_mnn(-y)))
    return 0


cdef inline int _int_op(int op, int x, int y) noexcept nogil:
    # Integer division by 0 (and INT_MIN / -1) would trap; MNN has no guard, we give 0 (and the
    # wrapped quotient), as NumPy does. Arithmetic wraps (Python builds with -fwrapv).
    cdef int r
    if op == ADD:
        return x + y
    if op == SUB:
        return x - y
    if op == MUL:
        return x * y
    if op == REALDIV:
        if y == 0:
            return 0
        if y == -1:
            return -x
        return _trunc_div(x, y)
    if op == MAXIMUM:
        return x if x > y else y
    if op == MINIMUM:
        return x if x < y else y
    if op == POW:
        return _d2i(pow(<double>x, <double>y))
    if op == FLOORDIV:
        return _d2i(floor(<double>x / <double>y))
    if op == SQUARED_DIFFERENCE:
        return (x - y) * (x - y)
    if op == FLOORMOD:
        # MNN computes x - floor(x / y) * y with an integer x / y: the truncated remainder.
        if y == 0 or y == -1:
            return 0
        return x - _trunc_div(x, y) * y
    if op == MOD:
        if y == 0 or y == -1:
            return 0
        r = x - _trunc_div(x, y) * y
        if (r < 0 and y > 0) or (r > 0 and y < 0):
            r = r + y
        return r
    if op == LOGICALOR:
        return x != 0 or y != 0
    if op == BITWISE_AND:
        return x & y
    if op == BITWISE_OR:
        return x | y
    if op == BITWISE_XOR:
        return x ^ y
    if op == LOGICALXOR:
        return x != y
    if op == LEFTSHIFT:  # x86 masks the shift count to 5 bits
        return <int>(<unsigned int>x << (y & 31))
    if op == RIGHTSHIFT:
        return x >> (y & 31)
    return 0


cdef inline int _narrow_op(int op, int x, int y, int bits) noexcept nogil:
    # int8 / uint8 (no MNN kernel; ONNX's semantics): computed on int, wrapped by the caller's
    # store; shift counts outside [0, bits) shift every bit out (left 0, right the sign).
    if op == LEFTSHIFT or op == RIGHTSHIFT:
        if y < 0 or y >= bits:
            return 0 if op == LEFTSHIFT or x >= 0 else -1
        return <int>(<unsigned int>x << y) if op == LEFTSHIFT else (x >> y)
    return _int_op(op, x, y)


@cython.cdivision(True)
cdef inline int _trunc_div(int x, int y) noexcept nogil:
    # C division truncates toward zero; callers exclude y == 0 and y == -1.
    return x // y


cdef void _row(int op, const in_t* a, Py_ssize_t sa, const in_t* b, Py_ssize_t sb, out_t* o,
               Py_ssize_t n, bint relu) noexcept nogil:
    cdef Py_ssize_t i
    if _is_compare(op):
        for i in range(n):
            o[i] = <out_t>_cmp(op, a[i * sa], b[i * sb])
        return
    if in_t is float and out_t is float:
        if _is_hot(op) and sa == 1 and (sb == 1 or sb == 0):
            # contiguous a, b a row or a scalar: the C loops (relu included)
            mnnpy_ew_row(current_isa(), op, a, b, <int>sb, o, n, relu)
            return
        if op == ADD:
            for i in range(n):
                o[i] = a[i * sa] + b[i * sb]
        elif op == SUB:
            for i in range(n):
                o[i] = a[i * sa] - b[i * sb]
        elif op == MUL:
            for i in range(n):
                o[i] = a[i * sa] * b[i * sb]
        elif op == REALDIV:
            for i in range(n):
                o[i] = a[i * sa] / b[i * sb]
        elif op == MAXIMUM:
            for i in range(n):
                o[i] = a[i * sa] if a[i * sa] > b[i * sb] else b[i * sb]
        elif op == MINIMUM:
            for i in range(n):
                o[i] = a[i * sa] if a[i * sa] < b[i * sb] else b[i * sb]
        else:
            for i in range(n):
                o[i] = _float_op(op, a[i * sa], b[i * sb])
    elif in_t is int and out_t is int:
        for i in range(n):
            o[i] = _int_op(op, a[i * sa], b[i * sb])
    elif in_t is i8 and out_t is i8:
        for i in range(n):
            o[i] = <i8>_narrow_op(op, a[i * sa], b[i * sb], 8)
    elif in_t is u8 and out_t is u8:
        for i in range(n):
            o[i] = <u8>_narrow_op(op, a[i * sa], b[i * sb], 8)
    if relu:  # an unconditional store vectorizes (a conditional one mispredicts)
        for i in range(n):
            o[i] = o[i] if o[i] > 0 else 0


cdef void _task(int op, const in_t* a, const in_t* b, out_t* o, const Py_ssize_t* shape,
                const Py_ssize_t* astr, const Py_ssize_t* bstr, Py_ssize_t ndim,
                Py_ssize_t row, Py_ssize_t c0, Py_ssize_t c1, bint relu) noexcept nogil:
    cdef Py_ssize_t d, idx, rem = row, ao = 0, bo = 0
    cdef Py_ssize_t last = ndim - 1
    for d in range(last - 1, -1, -1):
        idx = rem % shape[d]
        rem = rem // shape[d]
        ao += idx * astr[d]
        bo += idx * bstr[d]
    _row(op, a + ao + c0 * astr[last], astr[last], b + bo + c0 * bstr[last], bstr[last],
         o + row * shape[last] + c0, c1 - c0, relu)


cdef Py_ssize_t _reach(const Py_ssize_t[::1] shape, const Py_ssize_t[::1] strides) except -1:
    cdef Py_ssize_t d, top = 0
    for d in range(shape.shape[0]):
        if strides[d] < 0:
            raise ValueError("negative stride")
        top += (shape[d] - 1) * strides[d]
    return top + 1


def binary(const in_t[::1] a, const in_t[::1] b, out_t[::1] out, int op,
           const Py_ssize_t[::1] shape, const Py_ssize_t[::1] a_strides,
           const Py_ssize_t[::1] b_strides, bint relu=False, int num_thread=1):
    """``out[i] = op(a[i . a_strides], b[i . b_strides])`` over the row-major index space ``shape``.

    ``op`` is a BinaryOpOperation value; comparisons write 0 / 1 into an int32 ``out``, other ops
    write the inputs' dtype (int8 / uint8 results wrap; see ``_narrow_op`` for shifts). With
    ``relu`` negative results become 0 (BinaryOp's ``activationType`` 1).
    """
    cdef Py_ssize_t ndim = shape.shape[0], total = 1, d, rows, inner, cpr
    if ndim < 1 or ndim > MAX_DIMS or a_strides.shape[0] != ndim or b_strides.shape[0] != ndim:
        raise ValueError(f"bad index space: {ndim} dims")
    for d in range(ndim):
        if shape[d] < 0:
            raise ValueError("negative extent")
        total *= shape[d]
    if total == 0:
        return
    if _reach(shape, a_strides) > a.shape[0] or _reach(shape, b_strides) > b.shape[0]:
        raise ValueError("input buffers too small for the index space")
    if out.shape[0] < total:
        raise ValueError(f"output buffer has {out.shape[0]} elements, needs {total}")
    if _is_compare(op):
        ok = out_t is int
    elif in_t is float:
        ok = out_t is float and op in FLOAT_OPS
    else:  # integers: the output has the inputs' dtype
        ok = op in INT_OPS and ((in_t is int and out_t is int)
                                or (in_t is i8 and out_t is i8)
                                or (in_t is u8 and out_t is u8))
    if not ok:
        raise ValueError(f"binary op {op} does not support these dtypes")
    inner = shape[ndim - 1]
    rows = total // inner
    cpr = _chunks(rows, inner, total, &num_thread)
    _tasks(op, &a[0], &b[0], &out[0], &shape[0], &a_strides[0], &b_strides[0], ndim, rows, inner,
           cpr, relu, num_thread)


cdef Py_ssize_t _chunks(Py_ssize_t rows, Py_ssize_t inner, Py_ssize_t total,
                        int* num_thread) noexcept:
    # chunks per row; a run too small to wake another thread gets num_thread 1
    if total < _MIN_CHUNK:  # too little work to wake another thread
        num_thread[0] = 1
    # Rows are split into chunks when there are too few rows to share between threads, or
    # into one chunk per thread when they are long (the planes of NC4HW4 images, see
    # CPUBinary): tasks go chunk by chunk, so each thread takes the same part of every row, the
    # part the convolutions' pixel tiles gave it (data stays in the cache that holds it).
    cdef Py_ssize_t cpr = 1, n = num_thread[0]
    if n > 1 and inner >= 2 * _MIN_CHUNK:
        cpr = min((inner + _MIN_CHUNK - 1) // _MIN_CHUNK, 4 * n) if rows < n else n
    return cpr


cdef void _tasks(int op, const in_t* a, const in_t* b, out_t* o, const Py_ssize_t* shape,
                 const Py_ssize_t* astr, const Py_ssize_t* bstr, Py_ssize_t ndim,
                 Py_ssize_t rows, Py_ssize_t inner, Py_ssize_t cpr, bint relu,
                 int num_thread) noexcept:
    cdef Py_ssize_t clen = (inner + cpr - 1) // cpr, tasks = rows * cpr, t, c0, c1
    with nogil:
        if num_thread == 1:  # cpr == 1: a task is a row
            for t in range(tasks):
                _task(op, a, b, o, shape, astr, bstr, ndim, t, 0, inner, relu)
        else:
            for t in prange(tasks, num_threads=num_thread, schedule="static"):
                c0 = (t // rows) * clen
                c1 = min(c0 + clen, inner)
                if c0 < c1:
                    _task(op, a, b, o, shape, astr, bstr, ndim, t % rows, c0, c1, relu)


cdef class BinaryCall(KernelCall):
    """A float32 BinaryOp on fixed buffers (``bind_binary``): ``s`` is ``a``, ``w`` is ``b``."""
    cdef int op
    cdef bint relu
    cdef Py_ssize_t ndim, rows, inner, cpr
    cdef Py_ssize_t shape[MAX_DIMS_C]
    cdef Py_ssize_t astr[MAX_DIMS_C]
    cdef Py_ssize_t bstr[MAX_DIMS_C]

    cdef void run(self) noexcept:
        if self.rows:
            _tasks(self.op, self.s, self.w, self.d, self.shape, self.astr, self.bstr, self.ndim,
                   self.rows, self.inner, self.cpr, self.relu, self.num_thread)


def bind_binary(const float[::1] a, const float[::1] b, float[::1] out, int op,
                const Py_ssize_t[::1] shape, const Py_ssize_t[::1] a_strides,
                const Py_ssize_t[::1] b_strides, bint relu=False, int num_thread=1):
    """``binary`` on these float32 buffers (a float32 result, so no comparison), checked now: a
    ``BinaryCall`` that runs it when called with no arguments (``Execution.bind``)."""
    cdef Py_ssize_t ndim = shape.shape[0], total = 1, d
    if ndim < 1 or ndim > MAX_DIMS or a_strides.shape[0] != ndim or b_strides.shape[0] != ndim:
        raise ValueError(f"bad index space: {ndim} dims")
    if _is_compare(op) or op not in FLOAT_OPS:
        raise ValueError(f"binary op {op} does not support these dtypes")
    for d in range(ndim):
        if shape[d] < 0:
            raise ValueError("negative extent")
        total *= shape[d]
    cdef BinaryCall call = BinaryCall()
    call.op, call.relu, call.ndim = op, relu, ndim
    call.buffers = (a, b, out)
    if total == 0:
        call.rows = 0
        return call
    if _reach(shape, a_strides) > a.shape[0] or _reach(shape, b_strides) > b.shape[0]:
        raise ValueError("input buffers too small for the index space")
    if out.shape[0] < total:
        raise ValueError(f"output buffer has {out.shape[0]} elements, needs {total}")
    for d in range(ndim):
        call.shape[d], call.astr[d], call.bstr[d] = shape[d], a_strides[d], b_strides[d]
    call.inner = shape[ndim - 1]
    call.rows = total // call.inner
    call.cpr = _chunks(call.rows, call.inner, total, &num_thread)
    call.num_thread = num_thread
    call.s, call.w, call.d = &a[0], &b[0], &out[0]
    return call


cdef class ChannelBinaryCall(KernelCall):
    """A float32 BinaryOp of NC4HW4 planes with a per-channel vector (``bind_channel_binary``)."""
    cdef int op
    cdef bint relu
    cdef Py_ssize_t rows, area, b_rows, cpr

    cdef void run(self) noexcept:
        cdef Py_ssize_t rows = self.rows, area = self.area, b_rows = self.b_rows
        cdef Py_ssize_t clen = (area + self.cpr - 1) // self.cpr, tasks = rows * self.cpr
        cdef Py_ssize_t t, r, p0, p1
        cdef int isa = current_isa(), op = self.op
        cdef bint relu = self.relu
        cdef const float* a = self.s
        cdef const float* b = self.w
        cdef float* o = self.d
        with nogil:
            if self.num_thread == 1:  # cpr == 1; no parallel region to enter
                for r in range(rows):
                    _channel_row(isa, op, a, b, o, area, b_rows, relu, r, 0, area)
            else:
                for t in prange(tasks, num_threads=self.num_thread, schedule="static"):
                    p0 = (t // rows) * clen
                    p1 = min(p0 + clen, area)
                    if p0 < p1:
                        _channel_row(isa, op, a, b, o, area, b_rows, relu, t % rows, p0, p1)


cdef inline void _channel_row(int isa, int op, const float* a, const float* b, float* o,
                              Py_ssize_t area, Py_ssize_t b_rows, bint relu, Py_ssize_t r,
                              Py_ssize_t p0, Py_ssize_t p1) noexcept nogil:
    # plane r, pixels [p0, p1): its 4-lane block of b repeated
    mnnpy_ew_row(isa, op, a + (r * area + p0) * 4, b + (r % b_rows) * 4, 4,
                 o + (r * area + p0) * 4, (p1 - p0) * 4, relu)


def bind_channel_binary(const float[::1] a, const float[::1] b, float[::1] out, int op,
                        Py_ssize_t rows, Py_ssize_t area, Py_ssize_t b_rows, bint relu=False,
                        int num_thread=1):
    """``out[r, p, l] = op(a[r, p, l], b[r % b_rows, l])`` on ``rows`` NC4HW4 planes of ``area``
    pixels x 4 lanes, ``b`` one 4-lane block per plane (``[batch or 1][C/4][1][1][4]``): the
    channel broadcast of a squeeze-excitation multiply, checked now; a ``ChannelBinaryCall``.

    ``op`` is a float op of ``mnnpy_ew_row`` (add, sub, mul, div, min, max, mul_silu)."""
    if op not in CHANNEL_OPS:
        raise ValueError(f"binary op {op} has no channel-broadcast kernel")
    if rows < 0 or area < 0 or b_rows < 1 or rows % b_rows:
        raise ValueError(f"bad sizes: rows {rows}, area {area}, b_rows {b_rows}")
    if a.shape[0] < rows * area * 4 or out.shape[0] < rows * area * 4 or b.shape[0] < b_rows * 4:
        raise ValueError(f"buffers too small for {rows} planes of {area} pixels")
    cdef ChannelBinaryCall call = ChannelBinaryCall()
    call.op, call.relu, call.rows, call.area, call.b_rows = op, relu, rows, area, b_rows
    call.buffers = (a, b, out)
    call.cpr = _chunks(rows, area * 4, rows * area * 4, &num_thread) if rows * area else 1
    call.num_thread = num_thread
    if rows * area == 0:
        call.rows = 0
        return call
    call.s, call.w, call.d = &a[0], &b[0], &out[0]
    return call


def relu(const float[::1] src, float[::1] dst, Py_ssize_t n, float slope=0, int num_thread=1):
    """``dst[i] = src[i] > 0 ? src[i] : src[i] * slope`` for the first ``n`` elements."""
    if n < 0 or src.shape[0] < n or dst.shape[0] < n:
        raise ValueError(f"buffers too small for {n} elements")
    cdef Py_ssize_t chunks = (n + _MIN_CHUNK - 1) // _MIN_CHUNK, c, i, end
    cdef float v, w
    with nogil:
        for c in prange(chunks, num_threads=num_thread, schedule="static"):
            end = min((c + 1) * _MIN_CHUNK, n)
            for i in range(c * _MIN_CHUNK, end):
                # multiply unconditionally: a conditional FP op cannot be if-converted (the
                # compiler may not speculate it), which leaves a mispredicting branch
                v = src[i]
                w = v * slope
                dst[i] = v if v > 0 else w


def clamp(const float[::1] src, float[::1] dst, Py_ssize_t n, float lo, float hi,
          int num_thread=1):
    """``dst[i] = min(max(src[i], lo), hi)`` for the first ``n`` elements (ReLU6)."""
    if n < 0 or src.shape[0] < n or dst.shape[0] < n:
        raise ValueError(f"buffers too small for {n} elements")
    cdef Py_ssize_t chunks = (n + _MIN_CHUNK - 1) // _MIN_CHUNK, c, i, end
    cdef float v
    with nogil:
        for c in prange(chunks, num_threads=num_thread, schedule="static"):
            end = min((c + 1) * _MIN_CHUNK, n)
            for i in range(c * _MIN_CHUNK, end):
                v = src[i] if src[i] > lo else lo
                dst[i] = v if v < hi else hi


def zero_padding(scalar_t[::1] buf, Py_ssize_t batch, Py_ssize_t channel, Py_ssize_t area):
    """Set the padding lanes of NC4HW4 storage (channels ``channel..`` of the last block) to 0."""
    cdef Py_ssize_t blocks = (channel + 3) // 4, n, i, lane, base
    if batch < 0 or channel < 0 or area < 0 or buf.shape[0] < batch * blocks * area * 4:
        raise ValueError(f"buffer too small for batch {batch}, channel {channel}, area {area}")
    if channel % 4 == 0:
        return
    with nogil:
        for n in range(batch):
            base = (n * blocks + blocks - 1) * area * 4
            for i in range(area):
                for lane in range(channel % 4, 4):
                    buf[base + i * 4 + lane] = 0


def round_bfloat16(float[::1] buf, Py_ssize_t n):
    """Round the first ``n`` floats in place to bfloat16 (nearest, ties to even; NaN stays NaN)."""
    if n < 0 or buf.shape[0] < n:
        raise ValueError(f"buffer too small for {n} elements")
    cdef Py_ssize_t i
    cdef uint32_t u, high = <uint32_t>0xFFFF0000U
    with nogil:
        for i in range(n):
            memcpy(&u, &buf[i], 4)
            if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF) != 0:
                u = u | 0x400000  # a quiet NaN keeps a mantissa bit in the upper half
            else:
                u = u + 0x7FFF + ((u >> 16) & 1)
            u = u & high
            memcpy(&buf[i], &u, 4)
