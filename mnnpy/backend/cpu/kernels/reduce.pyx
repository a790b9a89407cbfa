# cython: language_level=3
"""Reduction over the middle axis of a plain ``[outer][axis][inner]`` buffer (float32 / int32).

NumPy reference: ``mnnpy/ops/reduction.py``. Work is split into tasks of ``_BLOCK`` adjacent
``inner`` positions of one ``outer`` index; a task walks the axis in order, so results do not
depend on the thread count (a contiguous run, ``inner == 1``, is one task; sums keep four
partial sums). float32 accumulates in float64; int32 wraps like MNN's int32 loops
(unsigned arithmetic) and MEAN divides the wrapped sum, truncating. An empty axis gives 0, or 1
for PROD and ALL; float32 MAXIMUM / MINIMUM give -inf / +inf (ONNX's ReduceMax / ReduceMin of an
empty set; int32 keeps 0, which bool tensors cast to int32 expect).
"""

from cython.parallel cimport prange
from libc.math cimport INFINITY, fabs

# MNN's ReductionType values.
cdef enum:
    SUM = 0
    ASUM = 1
    SUMSQ = 2
    MEAN = 3
    MAXIMUM = 4
    MINIMUM = 5
    PROD = 6
    ANY = 7
    ALL = 8

FLOAT_OPS = frozenset({SUM, ASUM, SUMSQ, MEAN, MAXIMUM, MINIMUM, PROD})
INT_OPS = frozenset({SUM, MEAN, MAXIMUM, MINIMUM, PROD, ANY, ALL})
cdef enum:
    _BLOCK = 64  # inner positions per task


cdef void _float_task(const float* src, float* dst, Py_ssize_t axis, Py_ssize_t inner,
                      Py_ssize_t count, int op) noexcept nogil:
    # src points at [o][0][i0], dst at [o][i0]; reduces ``count`` (<= _BLOCK) columns
    cdef double acc[_BLOCK]
    cdef double v
    cdef Py_ssize_t a, i
    cdef const float* row
    for i in range(count):
        acc[i] = 1.0 if op == PROD else (src[i] if op == MAXIMUM or op == MINIMUM else 0.0)
    for a in range(axis):
        row = src + a * inner
        if op == SUM or op == MEAN:
            for i in range(count):
                acc[i] += row[i]
        elif op == ASUM:
            for i in range(count):
                acc[i] += fabs(row[i])
        elif op == SUMSQ:
            for i in range(count):
                v = row[i]
                acc[i] += v * v
        elif op == MAXIMUM:
            for i in range(count):
                if row[i] > acc[i]:
                    acc[i] = row[i]
        elif op == MINIMUM:
            for i in range(count):
                if row[i] < acc[i]:
                    acc[i] = row[i]
        else:
            for i in range(count):
                acc[i] *= row[i]
    for i in range(count):
        dst[i] = <float>(acc[i] / axis if op == MEAN else acc[i])


cdef inline double _sum_term(double v, int op) noexcept nogil:
    # what one element adds to a SUM / MEAN, ASUM or SUMSQ
    if op == ASUM:
        return fabs(v)
    return v * v if op == SUMSQ else v


cdef float _float_row(const float* src, Py_ssize_t axis, int op) noexcept nogil:
    # one contiguous run (inner == 1, axis >= 1). SUM / ASUM / SUMSQ / MEAN: four float64
    # partial sums (a, a + 1, a + 2, a + 3 strided) added in a fixed order, so no serial add
    # chain; MAXIMUM / MINIMUM / PROD as _float_task, in order
    cdef double acc[4]
    cdef double v
    cdef Py_ssize_t a, j
    if op == MAXIMUM or op == MINIMUM or op == PROD:
        v = 1.0 if op == PROD else src[0]
        if op == MAXIMUM:
            for a in range(axis):
                if src[a] > v:
                    v = src[a]
        elif op == MINIMUM:
            for a in range(axis):
                if src[a] < v:
                    v = src[a]
        else:
            for a in range(axis):
                v *= src[a]
        return <float>v
    for j in range(4):
        acc[j] = 0.0
    a = 0
    while a + 4 <= axis:
        for j in range(4):
            acc[j] += _sum_term(src[a + j], op)
        a += 4
    while a < axis:
        acc[0] += _sum_term(src[a], op)
        a += 1
    v = (acc[0] + acc[1]) + (acc[2] + acc[3])
    return <float>(v / axis if op == MEAN else v)


cdef void _int_task(const int* src, int* dst, Py_ssize_t axis, Py_ssize_t inner,
                    Py_ssize_t count, int op) noexcept nogil:
    cdef unsigned int acc[_BLOCK]
    cdef int best[_BLOCK]
    cdef Py_ssize_t a, i
    cdef const int* row
    for i in range(count):
        acc[i] = 1 if op == PROD or op == ALL else 0
        best[i] = src[i]
    for a in range(axis):
        row = src + a * inner
        if op == SUM or op == MEAN:
            for i in range(count):
                acc[i] += <unsigned int>row[i]
        elif op == PROD:
            for i in range(count):
                acc[i] *= <unsigned int>row[i]
        elif op == MAXIMUM:
            for i in range(count):
                if row[i] > best[i]:
                    best[i] = row[i]
        elif op == MINIMUM:
            for i in range(count):
                if row[i] < best[i]:
                    best[i] = row[i]
        elif op == ANY:  # MNN: an element counts when > 0
            for i in range(count):
                if row[i] > 0:
                    acc[i] = 1
        else:
            for i in range(count):
                if row[i] == 0:
                    acc[i] = 0
    for i in range(count):
        if op == MAXIMUM or op == MINIMUM:
            dst[i] = best[i]
        elif op == MEAN:
            dst[i] = _trunc_div(<int>acc[i], <int>axis)
        else:
            dst[i] = <int>acc[i]


cdef inline int _trunc_div(int x, int y) noexcept nogil:
    # C division truncates toward zero (cdivision); INT_MIN / -1 cannot happen (y > 0)
    return x // y


ctypedef fused scalar_t:
    float
    int


def reduce(const scalar_t[::1] src, scalar_t[::1] dst, Py_ssize_t outer, Py_ssize_t axis,
           Py_ssize_t inner, int op, int num_thread=1):
    """``dst[o][i] = op(src[o][:][i])`` for a ReductionType ``op``."""
    if outer < 0 or axis < 0 or inner < 0:
        raise ValueError("negative size")
    if src.shape[0] < outer * axis * inner or dst.shape[0] < outer * inner:
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]} for "
            f"[{outer}][{axis}][{inner}]"
        )
    ops = INT_OPS
    if scalar_t is float:
        ops = FLOAT_OPS
    if op not in ops:
        raise ValueError(f"reduction {op} does not support this dtype")
    cdef Py_ssize_t blocks = (inner + _BLOCK - 1) // _BLOCK, t, o, i0, count
    cdef Py_ssize_t tasks = outer * blocks
    if outer * inner == 0:
        return
    cdef scalar_t empty = 1 if op == PROD or op == ALL else 0
    if axis == 0:
        if scalar_t is float:
            if op == MAXIMUM:
                empty = -INFINITY
            elif op == MINIMUM:
                empty = INFINITY
        for t in range(outer * inner):
            dst[t] = empty
        return
    if scalar_t is float:
        if inner == 1:
            with nogil:
                for t in prange(outer, num_threads=num_thread, schedule="static"):
                    dst[t] = _float_row(&src[t * axis], axis, op)
            return
    with nogil:
        for t in prange(tasks, num_threads=num_thread, schedule="static"):
            o = t // blocks
            i0 = (t % blocks) * _BLOCK
            count = min(_BLOCK, inner - i0)
            if scalar_t is float:
                _float_task(&src[o * axis * inner + i0], &dst[o * inner + i0], axis, inner,
                            count, op)
            else:
                _int_task(&src[o * axis * inner + i0], &dst[o * inner + i0], axis, inner,
                          count, op)
