# cython: language_level=3
"""Strided region copies (MNN's raster regions); ``regions.apply_reference`` is the NumPy twin.

A region is one int64 row ``[src_off, dst_off, n0, n1, n2, ss0, ss1, ss2, ds0, ds1, ds2]``::

    for i, j, k in ndindex(n0, n1, n2):
        dst[dst_off + i*ds0 + j*ds1 + k*ds2] = src[src_off + i*ss0 + j*ss1 + k*ss2]

in elements of the buffers (storage order, so NC4HW4 lanes are addressed directly). Rows whose
innermost strides are both 1 are ``memcpy``'d. Every region is checked against both buffers
before the ``nogil`` loop (non-negative sizes, offsets and strides; the last element in bounds).
Threads split a region's rows, or the inner run when there are fewer rows than threads; each
element is written by exactly one thread with the same value, so results do not depend on the
thread count.
"""

from cython.parallel cimport prange
from libc.string cimport memcpy, memset

ctypedef fused item_t:
    float
    int
    signed char
    unsigned char

cdef enum:
    COLS = 11
    MIN_PARALLEL_BYTES = 65536  # below this a parallel region costs more than it saves
    MAX_LANES = 4


cdef Py_ssize_t _reach(const long long* r, bint dst) noexcept nogil:
    """One past the last element a region touches (0 for an empty region)."""
    cdef Py_ssize_t off = r[1] if dst else r[0], k
    cdef const long long* st = r + (8 if dst else 5)
    for k in range(3):
        if r[2 + k] == 0:
            return 0
        off += (r[2 + k] - 1) * st[k]
    return off + 1


def _validate(const long long[:, ::1] regions, Py_ssize_t src_len, Py_ssize_t dst_len):
    cdef Py_ssize_t i, k
    if regions.shape[0] and regions.shape[1] != COLS:
        raise ValueError(f"regions need {COLS} columns, got {regions.shape[1]}")
    for i in range(regions.shape[0]):
        for k in range(COLS):
            if regions[i, k] < 0:
                raise ValueError(f"region {i} has a negative entry: {list(regions[i])}")
        if src_len >= 0 and _reach(&regions[i, 0], False) > src_len:
            raise ValueError(f"region {i} reads past the source ({src_len}): {list(regions[i])}")
        if _reach(&regions[i, 0], True) > dst_len:
            raise ValueError(f"region {i} writes past the destination ({dst_len}): "
                             f"{list(regions[i])}")


cdef inline bint _lanes(const long long* r) noexcept nogil:
    """Walk the middle dim inside the inner one: it is a few lanes, adjacent on one side, so
    each inner step moves one short contiguous group (NC4HW4 blocks) instead of 4-strided
    scalars."""
    return r[3] <= MAX_LANES and (r[6] == 1 or r[9] == 1) and not (r[7] == 1 and r[10] == 1)


cdef inline void _run(const item_t* src, item_t* dst, const long long* r, Py_ssize_t row,
                      Py_ssize_t lo, Py_ssize_t hi, bint zero) noexcept nogil:
    """Elements ``[lo, hi)`` of the inner dim of row ``row`` (= i * n1 + j) of region ``r``."""
    cdef Py_ssize_t i = row // r[3], j = row % r[3], k
    cdef const item_t* s = src + r[0] + i * r[5] + j * r[6]
    cdef item_t* d = dst + r[1] + i * r[8] + j * r[9]
    cdef Py_ssize_t ss = r[7], ds = r[10]
    if zero:
        if ds == 1:
            memset(d + lo, 0, (hi - lo) * sizeof(item_t))
        else:
            for k in range(lo, hi):
                d[k * ds] = 0
    elif ss == 1 and ds == 1:
        memcpy(d + lo, s + lo, (hi - lo) * sizeof(item_t))
    else:
        for k in range(lo, hi):
            d[k * ds] = s[k * ss]


cdef inline void _run_lanes(const item_t* src, item_t* dst, const long long* r, Py_ssize_t i,
                            Py_ssize_t lo, Py_ssize_t hi, bint zero) noexcept nogil:
    """Inner elements ``[lo, hi)`` of all ``n1`` rows of block ``i``, lanes innermost."""
    cdef Py_ssize_t n1 = r[3], j, k
    cdef const item_t* s = src + r[0] + i * r[5]
    cdef item_t* d = dst + r[1] + i * r[8]
    cdef Py_ssize_t s1 = r[6], d1 = r[9], s2 = r[7], d2 = r[10]
    if zero:
        for k in range(lo, hi):
            for j in range(n1):
                d[k * d2 + j * d1] = 0
    elif n1 == 4:
        for k in range(lo, hi):
            d[k * d2] = s[k * s2]
            d[k * d2 + d1] = s[k * s2 + s1]
            d[k * d2 + 2 * d1] = s[k * s2 + 2 * s1]
            d[k * d2 + 3 * d1] = s[k * s2 + 3 * s1]
    else:
        for k in range(lo, hi):
            for j in range(n1):
                d[k * d2 + j * d1] = s[k * s2 + j * s1]


cdef void _regions(const item_t* src, item_t* dst, const long long* regions, Py_ssize_t count,
                   bint zero, int num_thread) noexcept nogil:
    cdef Py_ssize_t q, rows, inner, row, part, parts, lo, hi
    cdef bint lanes
    cdef const long long* r
    for q in range(count):
        r = regions + q * COLS
        lanes = _lanes(r)
        rows = r[2] if lanes else r[2] * r[3]  # lanes: a row is a block of n1 rows
        inner = r[4]
        if r[2] * r[3] * inner * <Py_ssize_t>sizeof(item_t) < MIN_PARALLEL_BYTES:
            parts = 0
        elif num_thread > 1:
            parts = num_thread if rows < num_thread else 1  # too few rows: split them too
        else:
            parts = 0
        if parts == 0:
            for row in range(rows):
                if lanes:
                    _run_lanes(src, dst, r, row, 0, inner, zero)
                else:
                    _run(src, dst, r, row, 0, inner, zero)
        else:
            for part in prange(rows * parts, num_threads=num_thread, schedule="static"):
                row = part // parts
                lo = inner * (part % parts) // parts
                hi = inner * (part % parts + 1) // parts
                if lanes:
                    _run_lanes(src, dst, r, row, lo, hi, zero)
                else:
                    _run(src, dst, r, row, lo, hi, zero)


def copy_regions(const item_t[::1] src, item_t[::1] dst, const long long[:, ::1] regions,
                 int num_thread=1):
    """Copy every region of ``regions`` (rows of 11 int64, see the module) from src to dst."""
    _validate(regions, src.shape[0], dst.shape[0])
    if regions.shape[0] == 0:
        return
    with nogil:
        _regions(&src[0], &dst[0], &regions[0, 0], regions.shape[0], False, num_thread)


def zero_regions(item_t[::1] dst, const long long[:, ::1] regions, int num_thread=1):
    """Set the destination elements of every region to zero (source columns are ignored)."""
    _validate(regions, -1, dst.shape[0])
    if regions.shape[0] == 0:
        return
    with nogil:
        _regions(&dst[0], &dst[0], &regions[0, 0], regions.shape[0], True, num_thread)
