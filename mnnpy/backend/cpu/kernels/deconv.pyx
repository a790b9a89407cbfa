# cython: language_level=3
"""Transposed convolution on NC4HW4; the NumPy reference is ``mnnpy/ops/deconvolution.py``.

Activations are ``[batch][ceil(C/4)][H][W][4]``. Every kernel takes
``shape = (batch, ic, ih, iw, oc, oh, ow)`` and
``window = (ky, kx, sy, sx, dy, dx, pad_top, pad_left)``. Output pixel ``(oy, ox)`` gathers
the input pixels ``iy = (oy + pad_top - ky * dy) / sy`` (when that divides exactly and lies in
the input) for every tap, so no scratch is needed and each output value is summed by one
thread in a fixed order: results do not depend on the thread count. Outputs are clamped to
``[lo, hi]`` (fused relu / relu6); output padding lanes are written as zeros, input padding
lanes are never read.

``deconv2d_gemm`` (group 1) instead multiplies the input by the weights on the GEMM
micro-kernels (``gemm_kernels.h``, the ISA ``gemm.set_isa`` chose) into per-tap columns, then
sums each output pixel's taps (``deconv_kernels.h``); see its docstring.
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport current_isa, split_work


cdef extern from "math.h" nogil:
    float INFINITY


cdef extern from "deconv_kernels.h" nogil:
    ctypedef struct mnnpy_deconv_geo:
        ptrdiff_t iw, ow, oc, oc4, ky, kx, sy, sx, dy, dx, top, left
        int disjoint
    ptrdiff_t mnnpy_ceil_div(ptrdiff_t a, ptrdiff_t b)
    void mnnpy_gemm_c4(int isa, const float* a, ptrdiff_t a_stride, ptrdiff_t P, ptrdiff_t K,
                       const float* w, const float* bias, float* d, ptrdiff_t d_stride,
                       ptrdiff_t oc, float lo, float hi)
    void mnnpy_col2im_row(const mnnpy_deconv_geo* g, const float* cols, ptrdiff_t cs,
                          ptrdiff_t iy0, ptrdiff_t iy1, ptrdiff_t o4, ptrdiff_t oy,
                          const float* bias, float* out, float lo, float hi)


cdef struct Geom:
    Py_ssize_t ic, ih, iw, oc, oh, ow, ky, kx, sy, sx, dy, dx, top, left, ic4, oc4


cdef inline Py_ssize_t _src(Py_ssize_t o, Py_ssize_t k, Py_ssize_t s,
                            Py_ssize_t n) noexcept nogil:
    # the input index feeding output position ``o`` (already shifted by the pad) through a tap
    # at offset ``k``, or -1
    cdef Py_ssize_t t = o - k
    if t < 0 or t % s != 0:
        return -1
    t = t // s
    return t if t < n else -1


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
                Py_ssize_t bias_len, Py_ssize_t* rows) except *:
    cdef Geom g
    cdef Py_ssize_t batch
    batch, g.ic, g.ih, g.iw, g.oc, g.oh, g.ow = shape
    g.ky, g.kx, g.sy, g.sx, g.dy, g.dx, g.top, g.left = window
    if min(batch, g.ic, g.ih, g.iw, g.oc, g.oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(g.ky, g.kx, g.sy, g.sx, g.dy, g.dx) < 1:
        raise ValueError(
            f"kernel, stride and dilation must be positive, got window {window!r}")
    g.ic4 = (g.ic + 3) // 4
    g.oc4 = (g.oc + 3) // 4
    if (src_len < batch * g.ic4 * g.ih * g.iw * 4
            or dst_len < batch * g.oc4 * g.oh * g.ow * 4 or bias_len < g.oc4 * 4):
        raise ValueError(
            f"buffers too small: src {src_len}, dst {dst_len}, bias {bias_len} for shape "
            f"{shape!r}")
    rows[0] = batch * g.oc4 * g.oh
    return g


cdef void _deconv_group(const Geom* g, const float* src_n, float* out, const float* w_o,
                        Py_ssize_t b0, Py_ssize_t nb, Py_ssize_t oy, Py_ssize_t ox0,
                        Py_ssize_t nq, const float* bias, float lo, float hi,
                        Py_ssize_t lanes_out) noexcept nogil:
    # Output pixels ox0 + q * sx (q < nq <= 4) of one row share their stride phase, so the same
    # kernel taps reach all of them: 4 pixels x 4 output channels accumulate together.
    cdef float acc[16]
    cdef float zeros[4]
    cdef const float* base[4]
    cdef Py_ssize_t step[4]
    cdef Py_ssize_t ky, kx, iy, ix, q, o, b, c4, lanes, i, plane = g.ih * g.iw * 4
    cdef const float* wp
    cdef float v
    for q in range(4):
        zeros[q] = 0
        for o in range(4):
            acc[q * 4 + o] = bias[o]
    for ky in range(g.ky):
        iy = _src(oy, ky * g.dy, g.sy, g.ih)
        if iy < 0:
            continue
        for kx in range(g.kx):
            if (ox0 + g.left - kx * g.dx) % g.sx != 0:  # same phase as all q (sign aside)
                continue
            for q in range(4):
                ix = -1 if q >= nq else _src(ox0 + q * g.sx + g.left, kx * g.dx, g.sx, g.iw)
                base[q] = &zeros[0] if ix < 0 else src_n + ((b0 * g.ih + iy) * g.iw + ix) * 4
                step[q] = 0 if ix < 0 else plane
            for b in range(nb):
                c4 = b0 + b
                lanes = g.ic - c4 * 4
                if lanes > 4:
                    lanes = 4
                wp = w_o + ((b * g.ky + ky) * g.kx + kx) * 16
                for i in range(lanes):
                    for q in range(4):
                        v = base[q][b * step[q] + i]
                        for o in range(4):
                            acc[q * 4 + o] = acc[q * 4 + o] + v * wp[4 * i + o]
    for q in range(nq):
        _store4(out + q * g.sx * 4, acc[q * 4], acc[q * 4 + 1], acc[q * 4 + 2],
                acc[q * 4 + 3], lo, hi, lanes_out)


cdef void _deconv_row(const Geom* g, const float* src, float* dst, const float* weight,
                      const long long* blocks, const float* bias, float lo, float hi,
                      Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t n = row // (g.oc4 * g.oh), o4 = (row // g.oh) % g.oc4
    cdef Py_ssize_t oy = (row % g.oh) + g.top, phase, ox, nq
    cdef float* out = dst + row * g.ow * 4
    for phase in range(g.sx if g.sx < g.ow else g.ow):
        ox = phase
        while ox < g.ow:
            nq = (g.ow - ox + g.sx - 1) // g.sx
            _deconv_group(g, src + n * g.ic4 * g.ih * g.iw * 4, out + ox * 4,
                          weight + blocks[3 * o4], blocks[3 * o4 + 1], blocks[3 * o4 + 2],
                          oy, ox, nq if nq < 4 else 4, bias + o4 * 4, lo, hi, g.oc - o4 * 4)
            ox = ox + 4 * g.sx


def deconv2d(const float[::1] src, float[::1] dst, const float[::1] weight,
             const long long[::1] blocks, const float[::1] bias, tuple shape, tuple window,
             float lo, float hi, int num_thread=1):
    """Transposed convolution, any group.

    ``blocks`` holds, per output block ``o4``, ``(weight offset, first input block, input block
    count)``; the weight of ``o4`` is ``[count][ky][kx][4 in][4 out]`` from that offset, zero
    for channel pairs that share no group. ``bias`` has ``4 * ceil(oc/4)`` values.
    """
    cdef Py_ssize_t rows, r, o4
    cdef Geom g = _geom(shape, window, src.shape[0], dst.shape[0], bias.shape[0], &rows)
    if blocks.shape[0] < 3 * g.oc4:
        raise ValueError(f"blocks has {blocks.shape[0]} values, needs {3 * g.oc4}")
    for o4 in range(g.oc4):
        if (blocks[3 * o4 + 1] < 0 or blocks[3 * o4 + 2] < 0
                or blocks[3 * o4 + 1] + blocks[3 * o4 + 2] > g.ic4 or blocks[3 * o4] < 0
                or blocks[3 * o4] + blocks[3 * o4 + 2] * g.ky * g.kx * 16 > weight.shape[0]):
            raise ValueError(f"block {o4} ({list(blocks[3 * o4:3 * o4 + 3])}) does not fit "
                             f"{g.ic4} input blocks and {weight.shape[0]} weights")
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef const float* w = &weight[0]
    cdef const long long* bl = &blocks[0]
    cdef const float* b = &bias[0]
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _deconv_row(&g, s, d, w, bl, b, lo, hi, r)


cdef void _depthwise_row(const Geom* g, const float* src, float* dst, const float* weight,
                         const float* bias, float lo, float hi,
                         Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t plane = row // g.oh, c4 = plane % g.oc4
    cdef Py_ssize_t oy = (row % g.oh) + g.top
    cdef const float* src_c = src + plane * g.ih * g.iw * 4
    cdef const float* w_c = weight + c4 * g.ky * g.kx * 4
    cdef Py_ssize_t ox, ky, kx, iy, ix
    cdef const float* px
    cdef const float* wp
    cdef float a0, a1, a2, a3
    for ox in range(g.ow):
        a0 = bias[c4 * 4]
        a1 = bias[c4 * 4 + 1]
        a2 = bias[c4 * 4 + 2]
        a3 = bias[c4 * 4 + 3]
        for ky in range(g.ky):
            iy = _src(oy, ky * g.dy, g.sy, g.ih)
            if iy < 0:
                continue
            for kx in range(g.kx):
                ix = _src(ox + g.left, kx * g.dx, g.sx, g.iw)
                if ix < 0:
                    continue
                px = src_c + (iy * g.iw + ix) * 4
                wp = w_c + (ky * g.kx + kx) * 4
                a0 = a0 + px[0] * wp[0]
                a1 = a1 + px[1] * wp[1]
                a2 = a2 + px[2] * wp[2]
                a3 = a3 + px[3] * wp[3]
        # padding lanes may hold anything (NaN * 0); _store4 overwrites them with zeros
        _store4(dst + (row * g.ow + ox) * 4, a0, a1, a2, a3, lo, hi, g.oc - c4 * 4)


def deconv2d_depthwise(const float[::1] src, float[::1] dst, const float[::1] weight,
                       const float[::1] bias, tuple shape, tuple window, float lo, float hi,
                       int num_thread=1):
    """Depthwise transposed convolution (ic == oc == group).

    ``weight`` is ``[c/4][ky][kx][4]`` (zero-padded), ``bias`` has ``4 * ceil(c/4)`` values.
    """
    cdef Py_ssize_t rows, r
    cdef Geom g = _geom(shape, window, src.shape[0], dst.shape[0], bias.shape[0], &rows)
    if g.ic != g.oc:
        raise ValueError(f"depthwise needs ic == oc, got shape {shape!r}")
    if weight.shape[0] < g.oc4 * g.ky * g.kx * 4:
        raise ValueError(
            f"weight ({weight.shape[0]}) too small for shape {shape!r}, window {window!r}")
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef const float* w = &weight[0]
    cdef const float* b = &bias[0]
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _depthwise_row(&g, s, d, w, b, lo, hi, r)


# -- GEMM + col2im (group 1) --------------------------------------------------------------------
cdef struct GPlan:
    Py_ssize_t batch, ic, ih, iw, oh, ic4, cols, band, nband
    mnnpy_deconv_geo g


cdef Py_ssize_t _floor_div(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    return -mnnpy_ceil_div(-a, b)


cdef GPlan _gplan(tuple shape, tuple window, Py_ssize_t band) except *:
    cdef GPlan p
    cdef Py_ssize_t oc, ow, ky, kx, sy, sx, dy, dx
    p.batch, p.ic, p.ih, p.iw, oc, p.oh, ow = shape
    ky, kx, sy, sx, dy, dx = window[:6]
    if min(p.batch, p.ic, p.ih, p.iw, oc, p.oh, ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(ky, kx, sy, sx, dy, dx, band) < 1:
        raise ValueError(f"kernel, stride, dilation and band must be positive, got window "
                         f"{window!r}, band {band}")
    p.ic4 = (p.ic + 3) // 4
    p.g.iw, p.g.ow, p.g.oc, p.g.oc4 = p.iw, ow, oc, (oc + 3) // 4
    p.g.ky, p.g.kx, p.g.sy, p.g.sx, p.g.dy, p.g.dx, p.g.top, p.g.left = window
    p.g.disjoint = sy > (ky - 1) * dy and sx > (kx - 1) * dx
    p.cols = ky * kx * p.g.oc4 * 4
    p.band = min(band, p.oh)
    p.nband = (p.oh + p.band - 1) // p.band
    return p


cdef (Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) _band(
        const GPlan* p, Py_ssize_t b) noexcept nogil:
    """Output rows [oy0, oy1) of band ``b`` and the input rows [iy0, iy1) they read."""
    cdef Py_ssize_t oy0 = b * p.band, oy1 = min(oy0 + p.band, p.oh)
    cdef Py_ssize_t iy0 = mnnpy_ceil_div(oy0 + p.g.top - (p.g.ky - 1) * p.g.dy, p.g.sy)
    cdef Py_ssize_t iy1 = _floor_div(oy1 - 1 + p.g.top, p.g.sy) + 1
    iy0 = min(max(iy0, 0), p.ih)
    iy1 = max(min(iy1, p.ih), iy0)
    return oy0, oy1, iy0, iy1


cdef Py_ssize_t _gemm_scratch(const GPlan* p) noexcept nogil:
    cdef Py_ssize_t b, rows = 0
    cdef (Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) r
    for b in range(p.nband):
        r = _band(p, b)
        rows = max(rows, r[3] - r[2])
    return rows * p.iw * p.cols


def gemm_plan(tuple shape, tuple window, Py_ssize_t budget):
    """``(band, scratch)``: output rows per band, so that the columns of the input rows a band
    reads fit ``budget`` floats where possible (at least one kernel's height of rows, so rows
    read by several bands are not recomputed too often), and the floats of scratch
    ``deconv2d_gemm`` then needs."""
    cdef GPlan p = _gplan(shape, window, 1)
    cdef Py_ssize_t band = p.oh, least = min(p.oh, (p.g.ky - 1) * p.g.dy + 1), span
    while band > least:
        span = band - 1 + (p.g.ky - 1) * p.g.dy  # output rows a band's input rows cover
        if min(span // p.g.sy + 1, p.ih) * p.iw * p.cols <= budget:
            break
        band -= 1
    p = _gplan(shape, window, band)
    return band, _gemm_scratch(&p)


def deconv2d_gemm(const float[::1] src, float[::1] dst, const float[::1] weight,
                  const float[::1] bias, float[::1] scratch, tuple shape, tuple window,
                  Py_ssize_t band, Py_ssize_t tile, float lo, float hi, int num_thread=1):
    """Group-1 transposed convolution as a GEMM into columns, then col2im + bias + clamp.

    ``weight`` is ``[ceil(cols/16)][ic][16]`` panels of ``W(o', c)`` for
    ``o' = (ky * kx_size + kx) * 4 * ceil(oc/4) + o`` (``cols`` such rows, zero for padding
    channels), ``bias`` has ``4 * ceil(oc/4)`` values. Per image, output rows go in bands of
    ``band`` (``gemm_plan``); the GEMM of a band's input rows, ``tile`` pixels per work item, and
    its col2im are each spread over ``num_thread`` threads.
    """
    cdef GPlan p = _gplan(shape, window, band)
    cdef Py_ssize_t need = _gemm_scratch(&p), n16 = (p.cols + 15) // 16
    if tile < 1 or num_thread < 1:
        raise ValueError(f"tile {tile} and num_thread {num_thread} must be positive")
    if (src.shape[0] < p.batch * p.ic4 * p.ih * p.iw * 4
            or dst.shape[0] < p.batch * p.g.oc4 * p.oh * p.g.ow * 4
            or weight.shape[0] < n16 * 16 * p.ic or bias.shape[0] < p.g.oc4 * 4
            or scratch.shape[0] < need):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, weight "
            f"{weight.shape[0]}, bias {bias.shape[0]}, scratch {scratch.shape[0]} (needs "
            f"{need}) for shape {shape!r}, window {window!r}, band {band}")
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef const float* w = &weight[0]
    cdef const float* bi = &bias[0]
    cdef float* cols = &scratch[0] if need else NULL
    cdef Py_ssize_t n, b, oy0, oy1, iy0, iy1, pixels, t, ntile, nchunk, cp, it
    cdef int isa = current_isa()
    for n in range(p.batch):
        for b in range(p.nband):
            oy0, oy1, iy0, iy1 = _band(&p, b)
            pixels = (iy1 - iy0) * p.iw
            if pixels:
                t, ntile, nchunk, cp = split_work(pixels, p.cols, tile, 2 * num_thread)
                with nogil:
                    for it in prange(ntile * nchunk, num_threads=num_thread, schedule="dynamic"):
                        _gemm_item(&p, s + (n * p.ic4 * p.ih + iy0) * p.iw * 4, w, cols, pixels,
                                   t, nchunk, cp, it, isa)
            with nogil:
                for it in prange(p.g.oc4 * (oy1 - oy0), num_threads=num_thread,
                                 schedule="static"):
                    _col2im_item(&p, cols, 4 * pixels, iy0, iy1, oy0, oy1, bi,
                                 d + n * p.g.oc4 * p.oh * p.g.ow * 4, lo, hi, it)


cdef void _gemm_item(const GPlan* p, const float* a, const float* w, float* cols,
                     Py_ssize_t pixels, Py_ssize_t tile, Py_ssize_t nchunk, Py_ssize_t cp,
                     Py_ssize_t it, int isa) noexcept nogil:
    # the input plane is the GEMM's A in place: k = input channel, stride one channel block
    cdef Py_ssize_t p0 = (it // nchunk) * tile, o0 = (it % nchunk) * cp * 16
    mnnpy_gemm_c4(isa, a + 4 * p0, p.ih * p.iw * 4, min(tile, pixels - p0), p.ic,
                  w + o0 * p.ic, NULL, cols + (o0 // 4) * 4 * pixels + 4 * p0, 4 * pixels,
                  min(cp * 16, p.cols - o0), -INFINITY, INFINITY)


cdef void _col2im_item(const GPlan* p, const float* cols, Py_ssize_t cs, Py_ssize_t iy0,
                       Py_ssize_t iy1, Py_ssize_t oy0, Py_ssize_t oy1, const float* bias,
                       float* dst, float lo, float hi, Py_ssize_t it) noexcept nogil:
    cdef Py_ssize_t rows = oy1 - oy0, o4 = it // rows, oy = oy0 + it % rows
    mnnpy_col2im_row(&p.g, cols, cs, iy0, iy1, o4, oy, bias,
                     dst + (o4 * p.oh + oy) * p.g.ow * 4, lo, hi)
