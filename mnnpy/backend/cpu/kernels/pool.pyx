# cython: language_level=3
"""2-D max / average pooling on NC4HW4; their reference is ``mnnpy/ops/pool.py``.

Every kernel takes ``shape = (batch, c, ih, iw, oh, ow)`` and
``window = (ky, kx, sy, sx, pad_top, pad_left)``. Max pooling clamps window
coordinates into the input (MNN replicates the edges); average pooling sums the taps
inside the input and divides by the count MNN uses (see ``avg_pool``). Output padding
lanes (channels >= c) are written as zeros.

The window reductions are C (``pool_kernels.h``: SSE on x86, a portable loop elsewhere or after
``gemm.set_isa("generic")``, bit-identical); windows wholly inside a row go several at a time,
a global average (one unpadded window over the plane) as 8 interleaved sums.
Sizes and buffer lengths are checked before the ``nogil`` loop. Threads split the output
rows; results do not depend on the thread count.
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport cdiv, current_isa


cdef extern from "pool_kernels.h" nogil:
    void mnnpy_max_window(int isa, const float* plane, ptrdiff_t iw, ptrdiff_t ys, ptrdiff_t ye,
                          ptrdiff_t xs, ptrdiff_t xe, float* out, ptrdiff_t lanes)
    void mnnpy_max_windows(int isa, const float* plane, ptrdiff_t iw, ptrdiff_t ys, ptrdiff_t ye,
                           ptrdiff_t xs, ptrdiff_t w, ptrdiff_t step, ptrdiff_t n, float* out,
                           ptrdiff_t lanes)
    void mnnpy_sum_windows(int isa, const float* plane, ptrdiff_t iw, ptrdiff_t ys, ptrdiff_t ye,
                           ptrdiff_t xs, ptrdiff_t w, ptrdiff_t step, ptrdiff_t n, float scale,
                           float* out, ptrdiff_t lanes)
    void mnnpy_sum_window(int isa, const float* plane, ptrdiff_t iw, ptrdiff_t ys, ptrdiff_t ye,
                          ptrdiff_t xs, ptrdiff_t xe, float scale, float* out, ptrdiff_t lanes)
    void mnnpy_sum_plane(int isa, const float* plane, ptrdiff_t n, float scale, float* out,
                         ptrdiff_t lanes)


cdef struct Geom:
    Py_ssize_t c, ih, iw, oh, ow, ky, kx, sy, sx, top, left, c4


cdef inline Py_ssize_t _clip(Py_ssize_t v, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    if v < lo:
        return lo
    return hi if v > hi else v


cdef inline void _inner(const Geom* g, Py_ssize_t* lo, Py_ssize_t* hi) noexcept nogil:
    # outputs [lo, hi) of a row have their whole window inside the input row (no clipping):
    # the kernels do those several at a time
    cdef Py_ssize_t a = cdiv(g.left, g.sx) if g.left > 0 else 0, b = 0
    if g.iw - g.kx + g.left >= 0:
        b = (g.iw - g.kx + g.left) // g.sx + 1
    lo[0] = _clip(a, 0, g.ow)
    hi[0] = _clip(b, lo[0], g.ow)


cdef inline Py_ssize_t _row_of(const Geom* g, Py_ssize_t i, Py_ssize_t rows,
                               int num_thread) noexcept nogil:
    # with threads, output rows are handed out row index first: each thread (a contiguous
    # range of i) takes the same rows of every plane, as the convolutions around it take the
    # same pixels; alone, plane by plane
    if num_thread == 1:
        return i
    cdef Py_ssize_t planes = rows // g.oh
    return (i % planes) * g.oh + i // planes


cdef Geom _geom(tuple shape, tuple window, Py_ssize_t src_len, Py_ssize_t dst_len,
                Py_ssize_t* rows) except *:
    cdef Geom g
    cdef Py_ssize_t batch
    batch, g.c, g.ih, g.iw, g.oh, g.ow = shape
    g.ky, g.kx, g.sy, g.sx, g.top, g.left = window
    if min(batch, g.c, g.ih, g.iw, g.oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(g.ky, g.kx, g.sy, g.sx) < 1:
        raise ValueError(f"kernel and stride must be positive, got window {window!r}")
    g.c4 = (g.c + 3) // 4
    if (src_len < batch * g.c4 * g.ih * g.iw * 4
            or dst_len < batch * g.c4 * g.oh * g.ow * 4):
        raise ValueError(
            f"buffers too small: src {src_len}, dst {dst_len} for shape {shape!r}")
    rows[0] = batch * g.c4 * g.oh
    return g


cdef void _max_row(const Geom* g, const float* src, float* dst, int isa,
                   Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t plane = row // g.oh, oy = row % g.oh
    cdef Py_ssize_t iy0 = oy * g.sy - g.top
    cdef Py_ssize_t ys = _clip(iy0, 0, g.ih - 1)
    cdef Py_ssize_t ye = _clip(iy0 + g.ky - 1, 0, g.ih - 1) + 1
    cdef Py_ssize_t lanes = g.c - (plane % g.c4) * 4, ox, ix0, xs, xe
    cdef const float* src_p = src + plane * g.ih * g.iw * 4
    cdef float* out = dst + row * g.ow * 4
    cdef Py_ssize_t lo, hi
    _inner(g, &lo, &hi)
    if hi > lo:
        mnnpy_max_windows(isa, src_p, g.iw, ys, ye, lo * g.sx - g.left, g.kx, g.sx, hi - lo,
                          out + lo * 4, lanes)
    for ox in range(g.ow):
        if lo <= ox < hi:
            continue
        ix0 = ox * g.sx - g.left
        xs = _clip(ix0, 0, g.iw - 1)
        xe = _clip(ix0 + g.kx - 1, 0, g.iw - 1) + 1
        mnnpy_max_window(isa, src_p, g.iw, ys, ye, xs, xe, out + ox * 4, lanes)


def max_pool(const float[::1] src, float[::1] dst, tuple shape, tuple window,
             int num_thread=1):
    """Max over each window, window coordinates clamped into the input."""
    cdef Py_ssize_t rows, r
    cdef Geom g = _geom(shape, window, src.shape[0], dst.shape[0], &rows)
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef int isa = current_isa()
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _max_row(&g, s, d, isa, _row_of(&g, r, rows, num_thread))


cdef void _max_index_row(const Geom* g, const float* src, float* dst, int* idx,
                         Py_ssize_t row) noexcept nogil:
    # like _max_row, also recording where each lane's first maximum is (y * iw + x, MNN's
    # plane-local index); padding lanes get 0
    cdef Py_ssize_t plane = row // g.oh, oy = row % g.oh
    cdef Py_ssize_t iy0 = oy * g.sy - g.top
    cdef Py_ssize_t ys = _clip(iy0, 0, g.ih - 1)
    cdef Py_ssize_t ye = _clip(iy0 + g.ky - 1, 0, g.ih - 1)
    cdef Py_ssize_t lanes = g.c - (plane % g.c4) * 4, ox, ix0, xs, xe, y, x, lane, o
    cdef const float* src_p = src + plane * g.ih * g.iw * 4
    cdef const float* p
    cdef float m[4]
    cdef int at[4]
    for ox in range(g.ow):
        ix0 = ox * g.sx - g.left
        xs = _clip(ix0, 0, g.iw - 1)
        xe = _clip(ix0 + g.kx - 1, 0, g.iw - 1)
        p = src_p + (ys * g.iw + xs) * 4
        for lane in range(4):
            m[lane] = p[lane]
            at[lane] = <int>(ys * g.iw + xs)
        for y in range(ys, ye + 1):
            for x in range(xs, xe + 1):
                p = src_p + (y * g.iw + x) * 4
                for lane in range(4):
                    if p[lane] > m[lane]:
                        m[lane] = p[lane]
                        at[lane] = <int>(y * g.iw + x)
        o = (row * g.ow + ox) * 4
        for lane in range(4):
            dst[o + lane] = m[lane] if lane < lanes else 0
            idx[o + lane] = at[lane] if lane < lanes else 0


def max_pool_indices(const float[::1] src, float[::1] dst, int[::1] indices, tuple shape,
                     tuple window, int num_thread=1):
    """``max_pool`` plus, in ``indices`` (NC4HW4 int32), each maximum's ``y * iw + x``."""
    cdef Py_ssize_t rows, r
    cdef Geom g = _geom(shape, window, src.shape[0], dst.shape[0], &rows)
    if indices.shape[0] < rows * g.ow * 4:
        raise ValueError(f"indices buffer too small: {indices.shape[0]} for shape {shape!r}")
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef int* ip = &indices[0]
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _max_index_row(&g, s, d, ip, _row_of(&g, r, rows, num_thread))


cdef void _avg_row(const Geom* g, const float* src, float* dst, bint include_pad, int isa,
                   Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t plane = row // g.oh, oy = row % g.oh
    cdef Py_ssize_t iy0 = oy * g.sy - g.top
    cdef Py_ssize_t ys = iy0 if iy0 > 0 else 0
    cdef Py_ssize_t ye = iy0 + g.ky if iy0 + g.ky < g.ih else g.ih
    cdef Py_ssize_t lanes = g.c - (plane % g.c4) * 4, ox, ix0, xs, xe, count
    cdef const float* src_p = src + plane * g.ih * g.iw * 4
    cdef float* out = dst + row * g.ow * 4
    cdef float inv
    cdef Py_ssize_t lo, hi
    if g.ow == 1 and iy0 == 0 and g.left == 0 and g.ky == g.ih and g.kx == g.iw:
        # global average pooling (no padding): the plane's pixels in 8 independent sums
        mnnpy_sum_plane(isa, src_p, g.ih * g.iw, 1.0 / (g.ih * g.iw), out, lanes)
        return
    _inner(g, &lo, &hi)
    if hi > lo:  # count = rows inside (or to the pads) x kx
        if include_pad:
            count = (_clip(iy0 + g.ky, iy0, g.ih + g.top) - iy0) * g.kx
        else:
            count = (ye - ys) * g.kx if ye > ys else 0
        inv = 1.0 / count if count > 0 else 0
        mnnpy_sum_windows(isa, src_p, g.iw, ys, ye, lo * g.sx - g.left, g.kx, g.sx, hi - lo,
                          inv, out + lo * 4, lanes)
    for ox in range(g.ow):
        if lo <= ox < hi:
            continue
        ix0 = ox * g.sx - g.left
        xs = ix0 if ix0 > 0 else 0
        xe = ix0 + g.kx if ix0 + g.kx < g.iw else g.iw
        if include_pad:
            count = (_clip(iy0 + g.ky, iy0, g.ih + g.top) - iy0) * (
                _clip(ix0 + g.kx, ix0, g.iw + g.left) - ix0)
        else:
            count = (ye - ys) * (xe - xs) if ye > ys and xe > xs else 0
        inv = 1.0 / count if count > 0 else 0
        mnnpy_sum_window(isa, src_p, g.iw, ys, ye, xs, xe, inv, out + ox * 4, lanes)


def avg_pool(const float[::1] src, float[::1] dst, tuple shape, tuple window,
             bint include_pad, int num_thread=1):
    """Average over each window's taps inside the input.

    The divisor is MNN's: with ``include_pad``, the window clipped to the input extended
    by ``pad_top`` / ``pad_left`` on *both* sides (MNN ignores the bottom / right pads
    here); otherwise the number of taps inside the input. A window with no taps gives 0.
    """
    cdef Py_ssize_t rows, r
    cdef Geom g = _geom(shape, window, src.shape[0], dst.shape[0], &rows)
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef int isa = current_isa()
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _avg_row(&g, s, d, include_pad, isa, _row_of(&g, r, rows, num_thread))
