# cython: language_level=3
"""Direct convolution on NC4HW4; the NumPy reference is ``mnnpy/ops/convolution.py``.

Activations are ``[batch][ceil(C/4)][H][W][4]``. Every kernel takes
``shape = (batch, ic, ih, iw, oc, oh, ow)`` and
``window = (ky, kx, sy, sx, dy, dx, pad_top, pad_left)``. Kernel taps that fall into the
padding are skipped; outputs are clamped to ``[lo, hi]`` (fused relu / relu6); output
padding lanes (channels >= oc) are written as zeros.

Sizes and buffer lengths are checked before the ``nogil`` loop, so a wrong call raises
instead of reading out of bounds. Threads split the output rows; each value is computed
by one thread in a fixed order, so results do not depend on the thread count.
"""

from cython.parallel cimport prange


cdef struct Geom:
    Py_ssize_t ic, ih, iw, oc, oh, ow, ky, kx, sy, sx, dy, dx, top, left, ic4, oc4


cdef inline Py_ssize_t _c4(Py_ssize_t c) noexcept nogil:
    return (c + 3) // 4


cdef inline Py_ssize_t _first(Py_ssize_t i0, Py_ssize_t d) noexcept nogil:
    # smallest k >= 0 with i0 + k * d >= 0 (positive numerator: C division is exact)
    if i0 >= 0:
        return 0
    return (d - 1 - i0) // d


cdef inline Py_ssize_t _stop(Py_ssize_t i0, Py_ssize_t d, Py_ssize_t k,
                             Py_ssize_t n) noexcept nogil:
    # one past the largest k < kmax with i0 + k * d < n
    cdef Py_ssize_t e
    if i0 >= n:
        return 0
    e = (n - i0 + d - 1) // d
    return e if e < k else k


cdef inline float _clamp(float v, float lo, float hi) noexcept nogil:
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


cdef inline void _store4(float* out, float a0, float a1, float a2, float a3,
                         float lo, float hi, Py_ssize_t lanes) noexcept nogil:
    out[0] = _clamp(a0, lo, hi)
    out[1] = _clamp(a1, lo, hi) if lanes > 1 else 0
    out[2] = _clamp(a2, lo, hi) if lanes > 2 else 0
    out[3] = _clamp(a3, lo, hi) if lanes > 3 else 0


cdef Geom _geom(tuple shape, tuple window, Py_ssize_t src_len, Py_ssize_t dst_len,
                Py_ssize_t* rows) except *:
    cdef Geom g
    cdef Py_ssize_t batch
    batch, g.ic, g.ih, g.iw, g.oc, g.oh, g.ow = shape
    g.ky, g.kx, g.sy, g.sx, g.dy, g.dx, g.top, g.left = window
    if min(batch, g.ic, g.ih, g.iw, g.oc, g.oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(g.ky, g.kx, g.sy, g.sx, g.dy, g.dx) < 1:
        raise ValueError(
            f"kernel, stride and dilation must be positive, got window {window!r}")
    g.ic4 = _c4(g.ic)
    g.oc4 = _c4(g.oc)
    if (src_len < batch * g.ic4 * g.ih * g.iw * 4
            or dst_len < batch * g.oc4 * g.oh * g.ow * 4):
        raise ValueError(
            f"buffers too small: src {src_len}, dst {dst_len} for shape {shape!r}")
    rows[0] = batch * g.oc4 * g.oh
    return g


cdef void _conv_row(const Geom* g, const float* src, float* dst, const float* weight,
                    const float* bias, float lo, float hi,
                    Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t n = row // (g.oc4 * g.oh), o4 = (row // g.oh) % g.oc4
    cdef Py_ssize_t iy0 = (row % g.oh) * g.sy - g.top
    cdef Py_ssize_t ky0 = _first(iy0, g.dy), ky1 = _stop(iy0, g.dy, g.ky, g.ih)
    cdef Py_ssize_t ox, ix0, kx0, kx1, c4, lanes, ky, kx, i
    cdef const float* src_n = src + n * g.ic4 * g.ih * g.iw * 4
    cdef const float* w_o = weight + o4 * g.ic4 * g.ky * g.kx * 16
    cdef const float* px
    cdef const float* wp
    cdef float a0, a1, a2, a3, v
    for ox in range(g.ow):
        ix0 = ox * g.sx - g.left
        kx0 = _first(ix0, g.dx)
        kx1 = _stop(ix0, g.dx, g.kx, g.iw)
        a0 = bias[o4 * 4]
        a1 = bias[o4 * 4 + 1]
        a2 = bias[o4 * 4 + 2]
        a3 = bias[o4 * 4 + 3]
        for c4 in range(g.ic4):
            # only real input channels: padding lanes of the input are never read
            lanes = g.ic - c4 * 4
            if lanes > 4:
                lanes = 4
            for ky in range(ky0, ky1):
                for kx in range(kx0, kx1):
                    px = src_n + ((c4 * g.ih + iy0 + ky * g.dy) * g.iw
                                  + ix0 + kx * g.dx) * 4
                    wp = w_o + ((c4 * g.ky + ky) * g.kx + kx) * 16
                    for i in range(lanes):
                        v = px[i]
                        a0 = a0 + v * wp[4 * i]
                        a1 = a1 + v * wp[4 * i + 1]
                        a2 = a2 + v * wp[4 * i + 2]
                        a3 = a3 + v * wp[4 * i + 3]
        _store4(dst + (row * g.ow + ox) * 4, a0, a1, a2, a3, lo, hi, g.oc - o4 * 4)


def conv2d(const float[::1] src, float[::1] dst, const float[::1] weight,
           const float[::1] bias, tuple shape, tuple window, float lo, float hi,
           int num_thread=1):
    """Dense convolution (group 1).

    ``weight`` is ``[oc/4][ic/4][ky][kx][4 ic][4 oc]`` (zero-padded), ``bias`` has
    ``4 * ceil(oc/4)`` values.
    """
    cdef Py_ssize_t rows, r
    cdef Geom g = _geom(shape, window, src.shape[0], dst.shape[0], &rows)
    if (weight.shape[0] < g.oc4 * g.ic4 * g.ky * g.kx * 16
            or bias.shape[0] < g.oc4 * 4):
        raise ValueError(
            f"weight ({weight.shape[0]}) or bias ({bias.shape[0]}) too small for "
            f"shape {shape!r}, window {window!r}")
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef const float* w = &weight[0]
    cdef const float* b = &bias[0]
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _conv_row(&g, s, d, w, b, lo, hi, r)


cdef void _depthwise_row(const Geom* g, const float* src, float* dst,
                         const float* weight, const float* bias, float lo, float hi,
                         Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t plane = row // g.oh, c4 = plane % g.oc4
    cdef Py_ssize_t iy0 = (row % g.oh) * g.sy - g.top
    cdef Py_ssize_t ky0 = _first(iy0, g.dy), ky1 = _stop(iy0, g.dy, g.ky, g.ih)
    cdef Py_ssize_t ox, ix0, kx0, kx1, ky, kx
    cdef const float* src_c = src + plane * g.ih * g.iw * 4
    cdef const float* w_c = weight + c4 * g.ky * g.kx * 4
    cdef const float* px
    cdef const float* wp
    cdef float a0, a1, a2, a3
    for ox in range(g.ow):
        ix0 = ox * g.sx - g.left
        kx0 = _first(ix0, g.dx)
        kx1 = _stop(ix0, g.dx, g.kx, g.iw)
        a0 = bias[c4 * 4]
        a1 = bias[c4 * 4 + 1]
        a2 = bias[c4 * 4 + 2]
        a3 = bias[c4 * 4 + 3]
        for ky in range(ky0, ky1):
            for kx in range(kx0, kx1):
                px = src_c + ((iy0 + ky * g.dy) * g.iw + ix0 + kx * g.dx) * 4
                wp = w_c + (ky * g.kx + kx) * 4
                a0 = a0 + px[0] * wp[0]
                a1 = a1 + px[1] * wp[1]
                a2 = a2 + px[2] * wp[2]
                a3 = a3 + px[3] * wp[3]
        # padding lanes may hold anything (NaN * 0); _store4 overwrites them with zeros
        _store4(dst + (row * g.ow + ox) * 4, a0, a1, a2, a3, lo, hi, g.oc - c4 * 4)


def conv2d_depthwise(const float[::1] src, float[::1] dst, const float[::1] weight,
                     const float[::1] bias, tuple shape, tuple window, float lo,
                     float hi, int num_thread=1):
    """Depthwise convolution (ic == oc == group).

    ``weight`` is ``[c/4][ky][kx][4]`` (zero-padded), ``bias`` has ``4 * ceil(c/4)``
    values.
    """
    cdef Py_ssize_t rows, r
    cdef Geom g = _geom(shape, window, src.shape[0], dst.shape[0], &rows)
    if g.ic != g.oc:
        raise ValueError(f"depthwise needs ic == oc, got shape {shape!r}")
    if weight.shape[0] < g.oc4 * g.ky * g.kx * 4 or bias.shape[0] < g.oc4 * 4:
        raise ValueError(
            f"weight ({weight.shape[0]}) or bias ({bias.shape[0]}) too small for "
            f"shape {shape!r}, window {window!r}")
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef const float* w = &weight[0]
    cdef const float* b = &bias[0]
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _depthwise_row(&g, s, d, w, b, lo, hi, r)
