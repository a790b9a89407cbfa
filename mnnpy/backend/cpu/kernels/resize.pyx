# cython: language_level=3
"""Interp (2-D resize) on channel-blocked planes; the NumPy reference is ``mnnpy/ops/interp.py``.

Data is ``[planes][H][W][pack]``: NC4HW4 with ``pack = 4`` (planes = batch * ceil(C/4)) or NCHW
with ``pack = 1`` (planes = batch * C). ``shape = (batch, channels, ih, iw, oh, ow, pack)``.
The source coordinate of output ``x`` is ``x * scale + offset`` in float32, as in MNN's
``CPUResize.hpp``; modes: 1 nearest (floor), 2 bilinear, 3 cubic (Keys, coefficient ``a``),
4 nearest (``floor(x + 0.499)``); indices are clamped into the input. Bilinear uses MNN's
float32 operation order, so it matches MNN bit for bit. Output padding lanes are zeros.

Sizes and buffer lengths are checked before the ``nogil`` loop. Threads split the output
rows; results do not depend on the thread count.
"""

from cython.parallel cimport prange
from libc.math cimport floorf

cdef enum:
    M_NEAREST = 1
    M_BILINEAR = 2
    M_CUBIC = 3
    M_NEAREST_ROUND = 4

NEAREST = M_NEAREST
BILINEAR = M_BILINEAR
CUBIC = M_CUBIC
NEAREST_ROUND = M_NEAREST_ROUND


cdef struct Geom:
    Py_ssize_t c, ih, iw, oh, ow, pack, blocks, mode
    float sy, sx, oy, ox, a


cdef inline Py_ssize_t _clip(Py_ssize_t v, Py_ssize_t n) noexcept nogil:
    if v < 0:
        return 0
    return n - 1 if v > n - 1 else v


cdef inline Py_ssize_t _nearest(const Geom* g, float v) noexcept nogil:
    if g.mode == M_NEAREST_ROUND:
        return <Py_ssize_t>floorf(v + <float>0.499)
    return <Py_ssize_t>floorf(v)


cdef inline void _cubic(float t, float a, float* w) noexcept nogil:
    # Keys' kernel at distances 1 + t, t, 1 - t, 2 - t
    cdef float d0 = 1 + t, d3 = 2 - t, s = 1 - t
    w[0] = ((a * d0 - 5 * a) * d0 + 8 * a) * d0 - 4 * a
    w[1] = ((a + 2) * t - (a + 3)) * t * t + 1
    w[2] = ((a + 2) * s - (a + 3)) * s * s + 1
    w[3] = ((a * d3 - 5 * a) * d3 + 8 * a) * d3 - 4 * a


cdef inline Py_ssize_t _lanes(const Geom* g, Py_ssize_t plane) noexcept nogil:
    cdef Py_ssize_t lanes = g.c - (plane % g.blocks) * g.pack
    return g.pack if lanes > g.pack else lanes


cdef void _nearest_row(const Geom* g, const float* src, float* dst,
                       Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t plane = row // g.oh, p = g.pack, lanes = _lanes(g, plane), x, k, x0
    cdef Py_ssize_t y0 = _clip(_nearest(g, <float>(row % g.oh) * g.sy + g.oy), g.ih)
    cdef const float* s = src + (plane * g.ih + y0) * g.iw * p
    cdef float* out = dst + row * g.ow * p
    for x in range(g.ow):
        x0 = _clip(_nearest(g, <float>x * g.sx + g.ox), g.iw)
        for k in range(lanes):
            out[x * p + k] = s[x0 * p + k]
        for k in range(lanes, p):
            out[x * p + k] = 0


cdef void _bilinear_row(const Geom* g, const float* src, float* dst,
                        Py_ssize_t row) noexcept nogil:
    # MNN's order: each input row as b * f + a * (1 - f), then rows as r0 * (1 - t) + r1 * t
    cdef Py_ssize_t plane = row // g.oh, p = g.pack, lanes = _lanes(g, plane), x, k, x0, x1
    cdef float vy = <float>(row % g.oh) * g.sy + g.oy, vx, fx, sfx, r0, r1
    cdef Py_ssize_t y0 = <Py_ssize_t>floorf(vy)
    cdef float fy = vy - <float>y0
    cdef float sfy = 1 - fy
    cdef const float* s0 = src + (plane * g.ih + _clip(y0, g.ih)) * g.iw * p
    cdef const float* s1 = src + (plane * g.ih + _clip(y0 + 1, g.ih)) * g.iw * p
    cdef float* out = dst + row * g.ow * p
    for x in range(g.ow):
        vx = <float>x * g.sx + g.ox
        x0 = <Py_ssize_t>floorf(vx)
        fx = vx - <float>x0
        sfx = 1 - fx
        x1 = _clip(x0 + 1, g.iw) * p
        x0 = _clip(x0, g.iw) * p
        for k in range(lanes):
            r0 = s0[x1 + k] * fx + s0[x0 + k] * sfx
            r1 = s1[x1 + k] * fx + s1[x0 + k] * sfx
            out[x * p + k] = r0 * sfy + r1 * fy
        for k in range(lanes, p):
            out[x * p + k] = 0


cdef void _cubic_row(const Geom* g, const float* src, float* dst,
                     Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t plane = row // g.oh, p = g.pack, lanes = _lanes(g, plane), x, k, i, j, x0
    cdef float vy = <float>(row % g.oh) * g.sy + g.oy, vx, r, acc
    cdef Py_ssize_t y0 = <Py_ssize_t>vy  # truncation toward zero, as MNN
    cdef const float* s = src + plane * g.ih * g.iw * p
    cdef float* out = dst + row * g.ow * p
    cdef Py_ssize_t yi[4]
    cdef Py_ssize_t xi[4]
    cdef float wy[4]
    cdef float wx[4]
    for j in range(4):
        yi[j] = _clip(y0 - 1 + j, g.ih) * g.iw * p
    _cubic(vy - floorf(vy), g.a, wy)
    for x in range(g.ow):
        vx = <float>x * g.sx + g.ox
        x0 = <Py_ssize_t>vx
        for i in range(4):
            xi[i] = _clip(x0 - 1 + i, g.iw) * p
        _cubic(vx - floorf(vx), g.a, wx)
        for k in range(lanes):
            acc = 0
            for j in range(4):
                r = 0
                for i in range(4):
                    r = r + s[yi[j] + xi[i] + k] * wx[i]
                acc = acc + r * wy[j]
            out[x * p + k] = acc
        for k in range(lanes, p):
            out[x * p + k] = 0


def interp(const float[::1] src, float[::1] dst, tuple shape, int mode, tuple scale,
           tuple offset, float cubic_a=-0.75, int num_thread=1):
    """Resize every plane; ``scale`` and ``offset`` are ``(y, x)`` pairs."""
    cdef Geom g
    cdef Py_ssize_t batch, rows, r
    batch, g.c, g.ih, g.iw, g.oh, g.ow, g.pack = shape
    if min(batch, g.c, g.ih, g.iw, g.oh, g.ow) < 1 or g.pack not in (1, 4):
        raise ValueError(f"sizes must be positive and pack 1 or 4, got shape {shape!r}")
    if mode < M_NEAREST or mode > M_NEAREST_ROUND:
        raise ValueError(f"unknown resize mode {mode}")
    g.mode = mode
    g.sy, g.sx = scale
    g.oy, g.ox = offset
    g.a = cubic_a
    g.blocks = (g.c + g.pack - 1) // g.pack
    if (src.shape[0] < batch * g.blocks * g.ih * g.iw * g.pack
            or dst.shape[0] < batch * g.blocks * g.oh * g.ow * g.pack):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]} for shape {shape!r}")
    rows = batch * g.blocks * g.oh
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            if g.mode == M_BILINEAR:
                _bilinear_row(&g, s, d, r)
            elif g.mode == M_CUBIC:
                _cubic_row(&g, s, d, r)
            else:
                _nearest_row(&g, s, d, r)
