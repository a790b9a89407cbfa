# cython: language_level=3
"""Element-wise index kernels on plain (logical, row-major) buffers.

``arg_max``, ``gather_elements``, ``scatter_elements``, ``scatter_nd``, ``cum_sum`` and
``reverse_sequence``; NumPy references in ``mnnpy/ops/arg_max.py``, ``gather_elements.py``,
``scatter.py``, ``cum_sum.py`` and ``reverse_sequence.py``. Index values are checked before the
``nogil`` loops: a bad one makes the function return its position (-1 when all are valid) and
nothing is written. Scatters run sequentially (later updates win, as in MNN); the other kernels
write each output element from one thread, so results do not depend on the thread count.
"""

from cython.parallel cimport prange
from libc.float cimport FLT_MAX

from mnnpy.backend.cpu.kernels.index cimport nd_first_bad, nd_rows

ctypedef fused scalar_t:
    float
    int

# scatter reductions
DEF NONE = 0
DEF ADD = 1
DEF MUL = 2
DEF MAX = 3
DEF MIN = 4


def arg_max(const scalar_t[::1] src, int[::1] dst, Py_ssize_t outer, Py_ssize_t n,
            Py_ssize_t inner, bint is_min=False, int num_thread=1):
    """``dst[o][i]`` = first position of the max (min) of ``src[o][:][i]`` (MNN's CPUArgMax).

    Float rows start from -FLT_MAX (FLT_MAX) at position 0, so NaN never wins, as in MNN.
    """
    cdef Py_ssize_t t, o, i, j
    cdef scalar_t best, v
    cdef int pos
    if outer < 0 or n < 1 or inner < 0:
        raise ValueError(f"bad sizes: outer {outer}, n {n}, inner {inner}")
    if src.shape[0] < outer * n * inner or dst.shape[0] < outer * inner:
        raise ValueError("buffers too small")
    with nogil:
        for t in prange(outer * inner, num_threads=num_thread, schedule="static"):
            o = t // inner
            i = t % inner
            pos = 0
            if scalar_t is float:
                best = FLT_MAX if is_min else -FLT_MAX
                j = 0
            else:
                best = src[o * n * inner + i]
                j = 1
            while j < n:
                v = src[(o * n + j) * inner + i]
                if (v < best) if is_min else (v > best):
                    best = v
                    pos = <int>j
                j = j + 1
            dst[t] = pos


cdef Py_ssize_t _first_bad(const int[::1] idx, Py_ssize_t limit) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(idx.shape[0]):
        if idx[i] < -limit or idx[i] >= limit:
            return i
    return -1


cdef inline Py_ssize_t _offset(Py_ssize_t t, const Py_ssize_t[::1] shape,
                               const Py_ssize_t[::1] strides, Py_ssize_t axis, Py_ssize_t k
                               ) noexcept nogil:
    # offset of element t of a tensor shaped ``shape``, in one strided ``strides``, with the
    # coordinate on ``axis`` replaced by k
    cdef Py_ssize_t d, c, off = 0
    for d in range(shape.shape[0] - 1, -1, -1):
        c = t % shape[d]
        t = t // shape[d]
        off += (k if d == axis else c) * strides[d]
    return off


def _check_geometry(Py_ssize_t n, const Py_ssize_t[::1] shape, const Py_ssize_t[::1] strides,
                    Py_ssize_t axis, Py_ssize_t limit, Py_ssize_t size):
    cdef Py_ssize_t d, total = 1, last = 0
    if shape.shape[0] != strides.shape[0] or not 0 <= axis < shape.shape[0]:
        raise ValueError("shape, strides and axis disagree")
    for d in range(shape.shape[0]):
        total *= shape[d]
        last += ((limit if d == axis else shape[d]) - 1) * strides[d]
    if total != n or (n and last >= size):
        raise ValueError(f"{n} indices do not fit a buffer of {size}")


def gather_elements(const scalar_t[::1] src, const int[::1] idx, scalar_t[::1] dst,
                    const Py_ssize_t[::1] shape, const Py_ssize_t[::1] strides, Py_ssize_t axis,
                    Py_ssize_t limit, int num_thread=1):
    """``dst[p] = src[p with p[axis] = idx[p]]`` over the indices' ``shape``.

    ``strides`` are ``src``'s (in elements), ``limit`` its extent on ``axis``.

    Returns:
        -1, or the position of the first index outside ``[-limit, limit)`` (nothing written).
    """
    cdef Py_ssize_t n = idx.shape[0], t, k
    _check_geometry(n, shape, strides, axis, limit, src.shape[0])
    if dst.shape[0] < n:
        raise ValueError("destination too small")
    cdef Py_ssize_t bad = _first_bad(idx, limit)
    if bad >= 0:
        return bad
    with nogil:
        for t in prange(n, num_threads=num_thread, schedule="static"):
            k = idx[t] + limit if idx[t] < 0 else idx[t]
            dst[t] = src[_offset(t, shape, strides, axis, k)]
    return -1


cdef inline scalar_t _reduce(scalar_t old, scalar_t new, int mode) noexcept nogil:
    if mode == ADD:
        return old + new
    if mode == MUL:
        return old * new
    if mode == MAX:
        return new if new > old else old
    if mode == MIN:
        return new if new < old else old
    return new


def scatter_elements(scalar_t[::1] dst, const int[::1] idx, const scalar_t[::1] upd,
                     const Py_ssize_t[::1] shape, const Py_ssize_t[::1] strides,
                     Py_ssize_t axis, Py_ssize_t limit, int mode=NONE):
    """``dst[p with p[axis] = idx[p]] (op)= upd[p]`` over the indices' ``shape``, in order.

    ``dst`` already holds the data; ``strides`` are its strides, ``limit`` its extent on
    ``axis``; ``mode``: 0 assign, 1 add, 2 mul, 3 max, 4 min.

    Returns:
        -1, or the position of the first index outside ``[-limit, limit)`` (nothing written).
    """
    cdef Py_ssize_t n = idx.shape[0], t, k, off
    _check_geometry(n, shape, strides, axis, limit, dst.shape[0])
    if upd.shape[0] < n:
        raise ValueError("updates too small")
    cdef Py_ssize_t bad = _first_bad(idx, limit)
    if bad >= 0:
        return bad
    with nogil:
        for t in range(n):
            k = idx[t] + limit if idx[t] < 0 else idx[t]
            off = _offset(t, shape, strides, axis, k)
            dst[off] = _reduce(dst[off], upd[t], mode)
    return -1


def scatter_nd(scalar_t[::1] dst, const int[::1] idx, const scalar_t[::1] upd,
               const Py_ssize_t[::1] dims, Py_ssize_t slice_size, int mode=NONE):
    """``dst[idx[i][0], ..., idx[i][d - 1]][:] (op)= upd[i][:]`` for each row, in order.

    ``dst`` (already holding the data) is ``[*dims][slice_size]``; ``mode`` as in
    ``scatter_elements``.

    Returns:
        -1, or the flat position in ``idx`` of the first index out of range (nothing written).
    """
    cdef Py_ssize_t d = dims.shape[0], i, j, v, off
    cdef Py_ssize_t n = nd_rows(idx, dims, slice_size, dst.shape[0], upd.shape[0], "scattered")
    i = nd_first_bad(idx, dims)
    if i >= 0:
        return i
    with nogil:
        for i in range(n):
            off = 0
            for j in range(d):
                v = idx[i * d + j]
                off = off * dims[j] + (v + dims[j] if v < 0 else v)
            off = off * slice_size
            for j in range(slice_size):
                dst[off + j] = _reduce(dst[off + j], upd[i * slice_size + j], mode)
    return -1


def cum_sum(const scalar_t[::1] src, scalar_t[::1] dst, Py_ssize_t outer, Py_ssize_t n,
            Py_ssize_t inner, bint exclusive=False, bint reverse=False, int num_thread=1):
    """Running sums along the middle dim of ``[outer][n][inner]`` (MNN's CumSum)."""
    cdef Py_ssize_t t, o, i, j, p
    cdef scalar_t acc, v
    if outer < 0 or n < 0 or inner < 0:
        raise ValueError("negative size")
    if src.shape[0] < outer * n * inner or dst.shape[0] < outer * n * inner:
        raise ValueError("buffers too small")
    with nogil:
        for t in prange(outer * inner, num_threads=num_thread, schedule="static"):
            o = t // inner
            i = t % inner
            acc = 0
            for j in range(n):
                p = (o * n + (n - 1 - j if reverse else j)) * inner + i
                v = src[p]
                if exclusive:
                    dst[p] = acc
                    acc = acc + v
                else:
                    acc = acc + v
                    dst[p] = acc
    return None


def reverse_sequence(const int[::1] src, int[::1] dst, const int[::1] lens,
                     const Py_ssize_t[::1] shape, Py_ssize_t batch_dim, Py_ssize_t seq_dim,
                     int num_thread=1):
    """``dst`` = ``src`` with the first ``lens[b]`` entries along ``seq_dim`` of each batch
    ``b`` (along ``batch_dim``) reversed; 4-byte elements.

    Returns:
        -1, or the position of the first length outside ``[0, shape[seq_dim]]``.
    """
    cdef Py_ssize_t rank = shape.shape[0], n = 1, d, t, r, c, b = 0, s = 0, stride_s = 1
    cdef Py_ssize_t seq, i
    if not (0 <= batch_dim < rank and 0 <= seq_dim < rank) or batch_dim == seq_dim:
        raise ValueError(f"bad dims {batch_dim}, {seq_dim} for rank {rank}")
    for d in range(rank):
        n *= shape[d]
    for d in range(seq_dim + 1, rank):
        stride_s *= shape[d]
    if src.shape[0] < n or dst.shape[0] < n or lens.shape[0] < shape[batch_dim]:
        raise ValueError("buffers too small")
    seq = shape[seq_dim]
    for i in range(shape[batch_dim]):
        if lens[i] < 0 or lens[i] > seq:
            return i
    with nogil:
        for t in prange(n, num_threads=num_thread, schedule="static"):
            r = t
            for d in range(rank - 1, -1, -1):
                c = r % shape[d]
                r = r // shape[d]
                if d == batch_dim:
                    b = c
                elif d == seq_dim:
                    s = c
            if s < lens[b]:
                dst[t] = src[t + (lens[b] - 1 - 2 * s) * stride_s]
            else:
                dst[t] = src[t]
    return -1


def det(const float[::1] src, float[::1] dst, double[::1] work, Py_ssize_t batch, Py_ssize_t m):
    """Determinants of ``batch`` row-major ``m x m`` matrices: Gaussian elimination with partial
    pivoting in double precision (``work`` holds ``m * m`` doubles)."""
    cdef Py_ssize_t b, i, j, k, p
    cdef double result, best, ratio, tmp
    if batch < 0 or m < 0:
        raise ValueError("negative size")
    if src.shape[0] < batch * m * m or dst.shape[0] < batch or work.shape[0] < m * m:
        raise ValueError("buffers too small")
    with nogil:
        for b in range(batch):
            for i in range(m * m):
                work[i] = src[b * m * m + i]
            result = 1.0
            for i in range(m):
                p = i
                best = work[i * m + i] if work[i * m + i] >= 0 else -work[i * m + i]
                for j in range(i + 1, m):
                    tmp = work[j * m + i] if work[j * m + i] >= 0 else -work[j * m + i]
                    if tmp > best:
                        best = tmp
                        p = j
                if best == 0:
                    result = 0.0
                    break
                if p != i:
                    result = -result
                    for k in range(i, m):
                        tmp = work[i * m + k]
                        work[i * m + k] = work[p * m + k]
                        work[p * m + k] = tmp
                result *= work[i * m + i]
                for j in range(i + 1, m):
                    ratio = work[j * m + i] / work[i * m + i]
                    for k in range(i + 1, m):
                        work[j * m + k] -= ratio * work[i * m + k]
            dst[b] = <float>result
