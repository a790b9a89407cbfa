# cython: language_level=3
"""Interp (2-D resize) on channel-blocked planes; the NumPy reference is ``mnnpy/ops/interp.py``.

Data is ``[planes][H][W][pack]``: NC4HW4 with ``pack = 4`` (planes = batch * ceil(C/4)) or NCHW
with ``pack = 1`` (planes = batch * C). ``shape = (batch, channels, ih, iw, oh, ow, pack)``.
The source coordinate of output ``x`` is ``x * scale + offset`` in float32, as in MNN's
``CPUResize.hpp``; modes: 1 nearest (floor), 2 bilinear, 3 cubic (Keys, coefficient ``a``),
4 nearest (``floor(x + 0.499)``); indices are clamped into the input. Bilinear uses MNN's
float32 operation order, so it matches MNN bit for bit. Output padding lanes are zeros.

Nearest and bilinear run on source tables computed once per call into scratch, bilinear
blending each source row it needs once into per-thread line buffers (``resize_kernels.h``, in
the ISA ``gemm.set_isa`` chose; every ISA gives the same bits);
cubic computes its taps per pixel. Sizes and buffer lengths are checked before the ``nogil``
loops. Threads split the planes (and, when there are fewer planes than two per thread, runs of
output rows); results do not depend on the thread count.
"""

from cython.parallel cimport prange, threadid
from libc.math cimport floorf
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport current_isa

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


cdef extern from "resize_kernels.h" nogil:
    ctypedef struct mnnpy_resize_plan:
        ptrdiff_t c, ih, iw, oh, ow, pack, blocks, chunk, nchunk
        int isa
        const int* x0
        const int* x1
        const int* y0
        const int* y1
        const float* fx
        const float* fy
    void mnnpy_resize_nearest(const mnnpy_resize_plan* g, const float* src, float* dst,
                              ptrdiff_t it)
    void mnnpy_resize_bilinear(const mnnpy_resize_plan* g, const float* src, float* dst,
                               float* lines, ptrdiff_t it)


cdef Geom _geom(tuple shape, int mode, tuple scale, tuple offset, float cubic_a,
                Py_ssize_t* batch) except *:
    cdef Geom g
    batch[0], g.c, g.ih, g.iw, g.oh, g.ow, g.pack = shape
    if min(batch[0], g.c, g.ih, g.iw, g.oh, g.ow) < 1 or g.pack not in (1, 4):
        raise ValueError(f"sizes must be positive and pack 1 or 4, got shape {shape!r}")
    if mode < M_NEAREST or mode > M_NEAREST_ROUND:
        raise ValueError(f"unknown resize mode {mode}")
    g.mode = mode
    g.sy, g.sx = scale
    g.oy, g.ox = offset
    g.a = cubic_a
    g.blocks = (g.c + g.pack - 1) // g.pack
    return g


def scratch_size(tuple shape, int mode, int num_thread=1):
    """``(ints, floats)`` of scratch ``interp`` needs: the tables of nearest and bilinear, and
    two line buffers per thread for bilinear (cubic needs none)."""
    cdef Py_ssize_t batch
    cdef Geom g = _geom(shape, mode, (1.0, 1.0), (0.0, 0.0), 0, &batch)
    if num_thread < 1:
        raise ValueError(f"num_thread must be positive, got {num_thread}")
    if mode == M_CUBIC:
        return 0, 0
    if mode == M_BILINEAR:
        return 2 * (g.ow + g.oh), g.ow + g.oh + num_thread * 2 * g.ow * g.pack
    return g.ow + g.oh, 0


cdef void _tables(const Geom* g, int* x0, int* x1, int* y0, int* y1, float* fx,
                  float* fy) noexcept nogil:
    """Per output column / row: source offsets (columns times pack) and weights."""
    cdef Py_ssize_t axis, i, n, size, mul, v0
    cdef float v, scale, offset
    cdef int* t0
    cdef int* t1
    cdef float* f
    for axis in range(2):
        if axis == 0:
            n, size, mul, scale, offset, t0, t1, f = g.ow, g.iw, g.pack, g.sx, g.ox, x0, x1, fx
        else:
            n, size, mul, scale, offset, t0, t1, f = g.oh, g.ih, 1, g.sy, g.oy, y0, y1, fy
        for i in range(n):
            v = <float>i * scale + offset
            if g.mode == M_BILINEAR:
                v0 = <Py_ssize_t>floorf(v)
                f[i] = v - <float>v0
                t0[i] = <int>(_clip(v0, size) * mul)
                t1[i] = <int>(_clip(v0 + 1, size) * mul)
            else:
                t0[i] = <int>(_clip(_nearest(g, v), size) * mul)


def interp(const float[::1] src, float[::1] dst, int[::1] itab, float[::1] ftab, tuple shape,
           int mode, tuple scale, tuple offset, float cubic_a=-0.75, int num_thread=1):
    """Resize every plane; ``scale`` and ``offset`` are ``(y, x)`` pairs; ``itab`` / ``ftab``
    are scratch of ``scratch_size(shape, mode, num_thread)`` values."""
    cdef Py_ssize_t batch, r, it, ni, nf
    cdef Geom g = _geom(shape, mode, scale, offset, cubic_a, &batch)
    ni, nf = scratch_size(shape, mode, num_thread)
    if (src.shape[0] < batch * g.blocks * g.ih * g.iw * g.pack
            or dst.shape[0] < batch * g.blocks * g.oh * g.ow * g.pack
            or itab.shape[0] < ni or ftab.shape[0] < nf):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, itab {itab.shape[0]}, "
            f"ftab {ftab.shape[0]} (needs {ni}, {nf}) for shape {shape!r}")
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef Py_ssize_t planes = batch * g.blocks, want = 2 * num_thread
    cdef mnnpy_resize_plan p
    if g.mode == M_CUBIC:
        with nogil:
            for r in prange(planes * g.oh, num_threads=num_thread, schedule="static"):
                _cubic_row(&g, s, d, r)
        return
    p.c, p.ih, p.iw, p.oh, p.ow, p.pack, p.blocks = g.c, g.ih, g.iw, g.oh, g.ow, g.pack, g.blocks
    p.isa = current_isa()
    # rows of a plane in runs (line buffers are reused along a run); more runs than planes
    # only when there are fewer planes than two per thread
    p.nchunk = 1 if planes >= want else min(g.oh, (want + planes - 1) // planes)
    p.chunk = (g.oh + p.nchunk - 1) // p.nchunk
    p.nchunk = (g.oh + p.chunk - 1) // p.chunk
    cdef int* ip = &itab[0]
    cdef float* fp = &ftab[0] if nf else NULL
    cdef float* lines = fp + g.ow + g.oh if nf else NULL
    cdef Py_ssize_t n_line = 2 * g.ow * g.pack
    p.x0, p.x1, p.y0, p.y1, p.fx, p.fy = ip, NULL, ip + g.ow, NULL, NULL, NULL
    if g.mode == M_BILINEAR:  # x0, x1, y0, y1 and fx, fy
        p.x1, p.y0 = ip + g.ow, ip + 2 * g.ow
        p.y1 = p.y0 + g.oh
        p.fx, p.fy = fp, fp + g.ow
    with nogil:
        _tables(&g, <int*>p.x0, <int*>p.x1, <int*>p.y0, <int*>p.y1, <float*>p.fx,
                <float*>p.fy)
        if g.mode == M_BILINEAR:
            for it in prange(planes * p.nchunk, num_threads=num_thread, schedule="static"):
                mnnpy_resize_bilinear(&p, s, d, lines + threadid() * n_line, it)
        else:
            for it in prange(planes * p.nchunk, num_threads=num_thread, schedule="static"):
                mnnpy_resize_nearest(&p, s, d, it)
