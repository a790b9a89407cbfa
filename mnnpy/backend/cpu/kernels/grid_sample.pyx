# cython: language_level=3
"""GridSample on channel-blocked data; the NumPy reference is ``mnnpy/ops/grid_sample.py``.

Input is ``[batch][blocks][D][H][W][pack]`` (NC4HW4 with ``pack = 4``, NCHW with ``pack = 1``;
``D = 1`` for 2-D), the grid is plain ``(batch, OD, OH, OW, dims)`` float32 with x first, the
output ``[batch][blocks][OD][OH][OW][pack]``. ``shape = (batch, c, id, ih, iw, od, oh, ow,
pack, dims)``. Coordinates and weights follow MNN's ``GridSampler.hpp`` in float32: nearest
rounds halves up, bilinear combines x first, then y, then z; taps outside read zeros when
``zeros`` is set and are clamped otherwise. Output padding lanes are zeros.

Sizes and buffer lengths are checked before the ``nogil`` loop; grid values are clamped to
+-2**30 before their conversion to integers (NaN reads the input's far edge). Threads split
the output rows; results do not depend on the thread count.
"""

from cython.parallel cimport prange
from libc.math cimport ceilf, floorf, fmaxf, fminf

cdef float BIG = 1073741824.0


cdef struct Geom:
    Py_ssize_t c, id, ih, iw, od, oh, ow, pack, blocks, dims
    bint nearest, zeros
    float k[3]
    float b[3]


cdef inline Py_ssize_t _offset(const Geom* g, Py_ssize_t d, Py_ssize_t h,
                               Py_ssize_t w) noexcept nogil:
    # -1 for a zero tap, else the tap's offset inside one block
    if g.zeros:
        if d < 0 or d >= g.id or h < 0 or h >= g.ih or w < 0 or w >= g.iw:
            return -1
    else:
        d = 0 if d < 0 else (g.id - 1 if d > g.id - 1 else d)
        h = 0 if h < 0 else (g.ih - 1 if h > g.ih - 1 else h)
        w = 0 if w < 0 else (g.iw - 1 if w > g.iw - 1 else w)
    return ((d * g.ih + h) * g.iw + w) * g.pack


cdef inline float _tap(const float* s, Py_ssize_t off, Py_ssize_t k) noexcept nogil:
    return 0 if off < 0 else s[off + k]


cdef void _row(const Geom* g, const float* src, const float* grid, float* dst,
               Py_ssize_t row) noexcept nogil:
    # row = (batch * OD + od) * OH + oh; writes every channel block of that output row
    cdef Py_ssize_t b = row // (g.od * g.oh), p = g.pack, x, j, k, blk, lanes
    cdef Py_ssize_t plane_in = g.id * g.ih * g.iw * p, plane_out = g.od * g.oh * g.ow * p
    cdef Py_ssize_t orow = (row % (g.od * g.oh)) * g.ow * p
    cdef Py_ssize_t lo[3]
    cdef Py_ssize_t hi[3]
    cdef Py_ssize_t off[8]
    cdef float v[3]
    cdef float f0[3]
    cdef float f1[3]
    cdef float t0, t1, t2, t3
    cdef const float* s
    cdef float* o
    for x in range(g.ow):
        for j in range(3):
            v[j] = 0
            lo[j] = 0
            hi[j] = 0
            f0[j] = 1
            f1[j] = 0
        for j in range(g.dims):  # j = 0 is x (w), 1 is y (h), 2 is z (d)
            v[j] = fmaxf(fminf(grid[(row * g.ow + x) * g.dims + j], BIG), -BIG)
            v[j] = g.k[j] * v[j] + g.b[j]
            if g.nearest:
                lo[j] = <Py_ssize_t>floorf(v[j] + <float>0.5)
                hi[j] = lo[j]
            else:
                lo[j] = <Py_ssize_t>floorf(v[j])
                hi[j] = <Py_ssize_t>ceilf(v[j])
                f0[j] = <float>hi[j] - v[j]
                f1[j] = 1 - f0[j]
        for j in range(8):  # bit 0 picks x's hi tap, bit 1 y's, bit 2 z's
            off[j] = _offset(g, hi[2] if j & 4 else lo[2], hi[1] if j & 2 else lo[1],
                             hi[0] if j & 1 else lo[0])
        for blk in range(g.blocks):
            s = src + (b * g.blocks + blk) * plane_in
            o = dst + (b * g.blocks + blk) * plane_out + orow + x * p
            lanes = g.c - blk * p
            lanes = p if lanes > p else lanes
            for k in range(lanes):
                if g.nearest:
                    o[k] = _tap(s, off[0], k)
                    continue
                t0 = _tap(s, off[0], k) * f0[0] + _tap(s, off[1], k) * f1[0]
                t1 = _tap(s, off[2], k) * f0[0] + _tap(s, off[3], k) * f1[0]
                t0 = t0 * f0[1] + t1 * f1[1]
                if g.dims == 3:
                    t2 = _tap(s, off[4], k) * f0[0] + _tap(s, off[5], k) * f1[0]
                    t3 = _tap(s, off[6], k) * f0[0] + _tap(s, off[7], k) * f1[0]
                    t2 = t2 * f0[1] + t3 * f1[1]
                    t0 = t0 * f0[2] + t2 * f1[2]
                o[k] = t0
            for k in range(lanes, p):
                o[k] = 0


def grid_sample(const float[::1] src, const float[::1] grid, float[::1] dst, tuple shape,
                bint nearest, bint zeros, bint align_corners, int num_thread=1):
    """Sample every output position of every channel."""
    cdef Geom g
    cdef Py_ssize_t batch, rows, r, j
    cdef float a = 1 if align_corners else 0
    cdef float sizes[3]
    batch, g.c, g.id, g.ih, g.iw, g.od, g.oh, g.ow, g.pack, g.dims = shape
    if min(batch, g.c, g.id, g.ih, g.iw, g.od, g.oh, g.ow) < 1 or g.pack not in (1, 4):
        raise ValueError(f"sizes must be positive and pack 1 or 4, got shape {shape!r}")
    if g.dims not in (2, 3) or (g.dims == 2 and (g.id != 1 or g.od != 1)):
        raise ValueError(f"dims must be 2 (with depth 1) or 3, got shape {shape!r}")
    g.nearest, g.zeros = nearest, zeros
    g.blocks = (g.c + g.pack - 1) // g.pack
    sizes[0], sizes[1], sizes[2] = g.iw, g.ih, g.id
    for j in range(3):
        g.k[j] = <float>0.5 * (sizes[j] - a)
        g.b[j] = <float>0.5 * (sizes[j] - a - (1 - a))
    rows = batch * g.od * g.oh
    if (src.shape[0] < batch * g.blocks * g.id * g.ih * g.iw * g.pack
            or grid.shape[0] < rows * g.ow * g.dims
            or dst.shape[0] < rows * g.blocks * g.ow * g.pack):
        raise ValueError(f"buffers too small: src {src.shape[0]}, grid {grid.shape[0]}, "
                         f"dst {dst.shape[0]} for shape {shape!r}")
    cdef const float* s = &src[0]
    cdef const float* gr = &grid[0]
    cdef float* d = &dst[0]
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _row(&g, s, gr, d, r)
