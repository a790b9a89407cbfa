# cython: language_level=3
"""Depthwise and grouped convolution on NC4HW4; the reference is ``mnnpy/ops/convolution.py``.

Dense convolutions are in ``gemm.pyx`` and ``winograd.pyx``; grouped ones reuse their C
im2col and GEMM micro-kernels (``gemm_kernels.h``) per group. Activations are
``[batch][ceil(C/4)][H][W][4]``; the kernel takes ``shape = (batch, ic, ih, iw, oc, oh, ow)``
and ``window = (ky, kx, sy, sx, dy, dx, pad_top, pad_left)``. Kernel taps that fall into the
padding are skipped; outputs are clamped to ``[lo, hi]`` (fused relu / relu6); output
padding lanes (channels >= oc) are written as zeros; a fused activation ``act`` (``gemm.pyx``'s,
-1 for none) runs on each item's rows once written. The C row kernel is
``depthwise_kernels.h``, in the ISA chosen by ``gemm.set_isa`` (windows larger than 3x3 on
AVX-512: ``depthwise_ring.h``, which also runs ``act`` row by row; 3x3 stride 1 on AVX-512:
``depthwise_pad512.h``).

Sizes and buffer lengths are checked before the ``nogil`` loop, so a wrong call raises
instead of reading out of bounds. Threads split the channel blocks (and their rows when
there are few); each value is computed by one thread in a fixed order, so results do not
depend on the thread count.
"""

from cython.parallel cimport prange, threadid
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport (
    KernelCall, cdiv, current_isa, mnnpy_gemm_c4, mnnpy_im2col)

from mnnpy.backend.cpu.kernels.gemm import FUSED_ACTS


cdef extern from "unary_kernels.h" nogil:
    int mnnpy_unary_simd(int isa, int op, const float* src, float* dst, ptrdiff_t n)


cdef extern from "depthwise_kernels.h" nogil:
    ctypedef struct mnnpy_dw_geom:
        ptrdiff_t ih, iw, ow, KY, KX, sy, sx, dy, dx, top, left
    void mnnpy_dw_rows(int isa, const mnnpy_dw_geom* g, const float* src, float* dst,
                       const float* w, const float* bias, ptrdiff_t oy0, ptrdiff_t oy1,
                       ptrdiff_t lanes, float lo, float hi, int act)


cdef extern from "pool_kernels.h" nogil:
    void mnnpy_sum_plane(int isa, const float* plane, ptrdiff_t n, float scale, float* out,
                         ptrdiff_t lanes)


cdef class DepthwiseCall(KernelCall):
    """A depthwise convolution (``bind_depthwise``)."""
    cdef mnnpy_dw_geom g
    cdef Py_ssize_t c, oh, step, chunks, items, planes, band
    cdef int act
    cdef float* rsum  # per band of output rows, its 4 channel sums (a global average); or NULL
    cdef float* pool  # the global average, ``[planes][4]``; or NULL

    cdef void run(self) noexcept:
        cdef mnnpy_dw_geom* g = &self.g
        cdef Py_ssize_t c = self.c, oh = self.oh, step = self.step
        cdef Py_ssize_t chunks = self.chunks, it, planes = self.planes
        cdef bint rowmajor = step < oh  # rows in chunks: hand them out chunk index first
        cdef const float* s = self.s
        cdef float* d = self.d
        cdef const float* w = self.w
        cdef const float* b = self.b
        cdef float lo = self.lo, hi = self.hi
        cdef int isa = current_isa(), num_thread = self.num_thread, act = self.act
        cdef float* rsum = self.rsum
        cdef Py_ssize_t band = self.band
        with nogil:
            if num_thread == 1:  # no parallel region to enter
                for it in range(self.items):
                    _dw_item(isa, g, s, d, w, b, c, oh, step, chunks, lo, hi, act, rsum, band,
                             it)
            else:
                for it in prange(self.items, num_threads=num_thread, schedule="static"):
                    _dw_item(isa, g, s, d, w, b, c, oh, step, chunks, lo, hi, act, rsum, band,
                             (it % planes) * chunks + it // planes if rowmajor else it)
            if self.pool != NULL:
                _pool_bands(rsum, self.pool, planes, cdiv(oh, band), 1.0 / (oh * g.ow))


def conv2d_depthwise(const float[::1] src, float[::1] dst, const float[::1] weight,
                     const float[::1] bias, tuple shape, tuple window, float lo,
                     float hi, int num_thread=1, int act=-1, float[::1] rows=None,
                     float[::1] pool=None):
    """Depthwise convolution (ic == oc == group).

    ``weight`` is ``[c/4][ky][kx][4]`` (zero-padded), ``bias`` has ``4 * ceil(c/4)``
    values. With ``pool`` (``4 * batch * ceil(c/4)`` floats) and ``rows`` (scratch, ``oh``
    times that), also the global average of the output, ``[batch][c/4][1][1][4]`` (a fused
    GlobalAveragePool, ``conv_act_pool.py``): the rows go in bands of ``ceil(256 / ow)`` (work
    items hold whole bands), each band's sums taken right after it is written
    (``mnnpy_sum_plane``, while it is in L1), then the bands added in order, so the result
    does not depend on the thread count. NumPy reference: ``ops/pool.py``.
    """
    _bind_depthwise(src, dst, weight, bias, shape, window, lo, hi, num_thread, act, rows,
                    pool).run()


def bind_depthwise(const float[::1] src, float[::1] dst, const float[::1] weight,
                   const float[::1] bias, tuple shape, tuple window, float lo, float hi,
                   int num_thread=1, int act=-1, float[::1] rows=None, float[::1] pool=None):
    """``conv2d_depthwise`` on these buffers, checked now: a ``DepthwiseCall`` that runs it
    when called with no arguments (a session's prepared step, ``Execution.bind``)."""
    return _bind_depthwise(src, dst, weight, bias, shape, window, lo, hi, num_thread, act,
                           rows, pool)


cdef DepthwiseCall _bind_depthwise(const float[::1] src, float[::1] dst,
                                   const float[::1] weight, const float[::1] bias, tuple shape,
                                   tuple window, float lo, float hi, int num_thread,
                                   int act=-1, float[::1] rows=None, float[::1] pool=None):
    if act != -1 and act not in FUSED_ACTS:
        raise ValueError(f"activation {act} cannot be fused")
    cdef DepthwiseCall call = DepthwiseCall.__new__(DepthwiseCall)
    call.act = act
    cdef mnnpy_dw_geom* g = &call.g
    cdef Py_ssize_t batch, c, oc, oh, c4
    batch, c, g.ih, g.iw, oc, oh, g.ow = shape
    g.KY, g.KX, g.sy, g.sx, g.dy, g.dx, g.top, g.left = window
    if min(batch, c, g.ih, g.iw, oc, oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(g.KY, g.KX, g.sy, g.sx, g.dy, g.dx, num_thread) < 1:
        raise ValueError(
            f"kernel, stride, dilation and threads must be positive, got window {window!r}")
    if c != oc:
        raise ValueError(f"depthwise needs ic == oc, got shape {shape!r}")
    c4 = (c + 3) // 4
    if (src.shape[0] < batch * c4 * g.ih * g.iw * 4
            or dst.shape[0] < batch * c4 * oh * g.ow * 4):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]} for shape {shape!r}")
    if weight.shape[0] < c4 * g.KY * g.KX * 4 or bias.shape[0] < c4 * 4:
        raise ValueError(
            f"weight ({weight.shape[0]}) or bias ({bias.shape[0]}) too small for "
            f"shape {shape!r}, window {window!r}")
    # items: (plane, rows chunk); rows in chunks when there are fewer planes than 2 per thread,
    # or, with threads, one chunk per thread on maps of 512 pixels or more. Threads take
    # contiguous ranges of items (static) in row-chunk order then, so each thread keeps to
    # the same part of every plane as the GEMM convolutions' pixel tiles around it (and, on
    # small maps, to the same channel blocks as their channel chunks): data stays in the cache
    # of the core that wrote it, which matters most when the two vCPUs sit on different
    # L3 caches (measured: MobileNetV2 at 2 threads 12.0 -> 9.4 ms then, same elsewhere).
    cdef Py_ssize_t planes = batch * c4, step = oh, band = oh
    if planes < 2 * num_thread:
        step = (oh * planes + 2 * num_thread - 1) // (2 * num_thread)
    elif num_thread > 1 and oh * g.ow >= 512:
        step = (oh + num_thread - 1) // num_thread
    if pool is not None:  # whole bands of rows per item
        band = min(oh, cdiv(256, g.ow))
        step = min(oh, cdiv(step, band) * band)
    call.band = band
    call.c, call.oh, call.step = c, oh, step
    call.chunks = (oh + step - 1) // step
    call.items = planes * call.chunks
    call.planes = planes
    call.buffers = (src, dst, weight, bias, rows, pool)  # alive as long as the pointers below
    call.rsum = call.pool = NULL
    if (rows is None) != (pool is None):
        raise ValueError("a fused global average needs both rows and pool")
    if pool is not None:
        if pool.shape[0] < planes * 4 or rows.shape[0] < planes * cdiv(oh, band) * 4:
            raise ValueError(f"pool ({pool.shape[0]}) or rows ({rows.shape[0]}) too small for "
                             f"shape {shape!r}")
        call.rsum, call.pool = &rows[0], &pool[0]
    call.s, call.d, call.w, call.b = &src[0], &dst[0], &weight[0], &bias[0]
    call.lo, call.hi, call.num_thread = lo, hi, num_thread
    return call


cdef inline void _dw_item(int isa, const mnnpy_dw_geom* g, const float* s, float* d,
                          const float* w, const float* b, Py_ssize_t c, Py_ssize_t oh,
                          Py_ssize_t step, Py_ssize_t chunks, float lo, float hi, int act,
                          float* rsum, Py_ssize_t band, Py_ssize_t it) noexcept nogil:
    # item it: rows [y0, y0 + step) of plane it // chunks (image n, block plane % c4)
    cdef Py_ssize_t plane = it // chunks, y0 = (it % chunks) * step, y1 = min(oh, y0 + step)
    cdef Py_ssize_t blk = plane % cdiv(c, 4), a, e
    if rsum == NULL:
        mnnpy_dw_rows(isa, g, s + plane * g.ih * g.iw * 4, d + plane * oh * g.ow * 4,
                      w + blk * g.KY * g.KX * 4, b + blk * 4, y0, y1, min(4, c - blk * 4), lo,
                      hi, act)
        return
    a = y0  # starts a band: each band's sums taken while it is in L1
    while a < y1:
        e = min(a + band, y1)
        mnnpy_dw_rows(isa, g, s + plane * g.ih * g.iw * 4, d + plane * oh * g.ow * 4,
                      w + blk * g.KY * g.KX * 4, b + blk * 4, a, e, min(4, c - blk * 4), lo,
                      hi, act)
        mnnpy_sum_plane(isa, d + (plane * oh + a) * g.ow * 4, (e - a) * g.ow, 1.0,
                        rsum + (plane * cdiv(oh, band) + a // band) * 4, 4)
        a = e


cdef void _pool_bands(const float* rsum, float* pool, Py_ssize_t planes, Py_ssize_t bands,
                      float inv) noexcept nogil:
    # the global average from the bands' sums, added in band order
    cdef Py_ssize_t plane, k, lane
    cdef float acc
    for plane in range(planes):
        for lane in range(4):
            acc = 0
            for k in range(bands):
                acc = acc + rsum[(plane * bands + k) * 4 + lane]
            pool[plane * 4 + lane] = acc * inv


cdef inline void _copy_plane(const float* sp, float* dp, Py_ssize_t area) noexcept nogil:
    cdef Py_ssize_t p
    for p in range(area):
        dp[4 * p] = sp[4 * p]


cdef struct GPlan:
    Py_ssize_t batch, group, ic, oc, icg, ocg, ih, iw, ihw, ohw, ow, k, k4, tile, ntile
    Py_ssize_t wsize, bsize, gin_img, gout_img, ic4, oc4
    bint in_aligned, out_aligned, direct


def grouped_scratch_size(tuple shape, tuple window, Py_ssize_t group, Py_ssize_t tile,
                         int num_thread=1):
    """Floats of scratch ``conv2d_grouped`` needs."""
    cdef GPlan g = _gplan(shape, window, group, tile, num_thread)
    return _gscratch(&g, num_thread)


cdef Py_ssize_t _gscratch(const GPlan* g, int num_thread) noexcept:
    cdef Py_ssize_t n = 0 if g.direct else num_thread * g.tile * 4 * g.k4
    if not g.in_aligned:
        n += g.group * g.batch * g.gin_img
    if not g.out_aligned:
        n += g.group * g.batch * g.gout_img
    return n


cdef GPlan _gplan(tuple shape, tuple window, Py_ssize_t group, Py_ssize_t tile,
                  int num_thread) except *:
    cdef GPlan g
    cdef Py_ssize_t oh, ky, kx, sy, sx, dy, dx, top, left
    g.batch, g.ic, g.ih, g.iw, g.oc, oh, g.ow = shape
    ky, kx, sy, sx, dy, dx, top, left = window
    if min(g.batch, g.ic, g.ih, g.iw, g.oc, oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(ky, kx, sy, sx, dy, dx, tile, num_thread, group) < 1:
        raise ValueError(f"kernel, stride, dilation, tile, threads and group must be positive, "
                         f"got window {window!r}, tile {tile}, group {group}")
    if g.ic % group or g.oc % group:
        raise ValueError(f"group {group} does not divide the channels of shape {shape!r}")
    g.group, g.icg, g.ocg = group, g.ic // group, g.oc // group
    g.ihw, g.ohw = g.ih * g.iw, oh * g.ow
    g.k = g.icg * ky * kx
    g.k4 = (g.k + 3) // 4
    g.ic4, g.oc4 = (g.ic + 3) // 4, (g.oc + 3) // 4
    g.in_aligned, g.out_aligned = g.icg % 4 == 0, g.ocg % 4 == 0
    g.direct = (ky == 1 and kx == 1 and sy == 1 and sx == 1 and top == 0 and left == 0
                and oh == g.ih and g.ow == g.iw)
    g.bsize = (g.ocg + 15) // 16 * 16
    g.wsize = g.bsize * g.k
    g.gin_img = (g.icg + 3) // 4 * g.ihw * 4
    g.gout_img = (g.ocg + 3) // 4 * g.ohw * 4
    g.tile = min(tile, g.ohw)
    g.ntile = (g.ohw + g.tile - 1) // g.tile
    g.tile = (g.ohw + g.ntile - 1) // g.ntile  # equal tiles
    return g


def conv2d_grouped(const float[::1] src, float[::1] dst, const float[::1] weight,
                   const float[::1] bias, float[::1] scratch, tuple shape, tuple window,
                   Py_ssize_t group, float lo, float hi, Py_ssize_t tile, int num_thread=1):
    """Grouped convolution by one im2col + GEMM per (group, image, pixel tile).

    ``weight`` holds each group's ``[ceil(ocg/16)][K][16]`` panels (``K = icg * ky * kx``)
    one after another, ``bias`` each group's ``16 * ceil(ocg/16)`` values. A group whose
    channels do not start on 4-channel blocks is gathered into ``scratch`` first (all groups
    in one pass) and its outputs scattered back after, so the whole op is at most three
    parallel loops whatever the group count. ``scratch`` needs ``grouped_scratch_size``
    floats.
    """
    cdef GPlan g = _gplan(shape, window, group, tile, num_thread)
    cdef Py_ssize_t need = _gscratch(&g, num_thread)
    if (src.shape[0] < g.batch * g.ic4 * g.ihw * 4 or dst.shape[0] < g.batch * g.oc4 * g.ohw * 4
            or weight.shape[0] < group * g.wsize or bias.shape[0] < group * g.bsize
            or scratch.shape[0] < need):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, weight "
            f"{weight.shape[0]}, bias {bias.shape[0]}, scratch {scratch.shape[0]} (needs "
            f"{need}) for shape {shape!r}, window {window!r}, group {group}")
    cdef ptrdiff_t win[8]
    cdef Py_ssize_t i
    for i in range(8):
        win[i] = window[i]
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef float* t = &scratch[0] if need else NULL
    cdef float* gin = t
    cdef float* gout
    cdef float* cols
    if not g.in_aligned:
        gin = t
        t = t + group * g.batch * g.gin_img
    gout = t
    if not g.out_aligned:
        t = t + group * g.batch * g.gout_img
    cols = t
    cdef Py_ssize_t it, n, c, gi, lane
    cdef float* dp
    with nogil:
        if not g.in_aligned:  # [group][batch][ceil(icg/4)][ih][iw][4]
            for it in prange(g.batch * g.ic, num_threads=num_thread, schedule="static"):
                n = it // g.ic
                c = it % g.ic
                gi = c // g.icg
                _copy_plane(s + (n * g.ic4 + c // 4) * g.ihw * 4 + c % 4,
                            gin + (gi * g.batch + n) * g.gin_img
                            + ((c % g.icg) // 4) * g.ihw * 4 + (c % g.icg) % 4, g.ihw)
        for it in prange(group * g.batch * g.ntile, num_threads=num_thread, schedule="dynamic"):
            _gitem(&g, s, d, gin, gout, cols, &weight[0], &bias[0], win, lo, hi, it, threadid())
        if not g.out_aligned:
            for it in prange(g.batch * g.oc, num_threads=num_thread, schedule="static"):
                n = it // g.oc
                c = it % g.oc
                gi = c // g.ocg
                _copy_plane(gout + (gi * g.batch + n) * g.gout_img
                            + ((c % g.ocg) // 4) * g.ohw * 4 + (c % g.ocg) % 4,
                            d + (n * g.oc4 + c // 4) * g.ohw * 4 + c % 4, g.ohw)
            if g.oc % 4:  # padding lanes of the last block
                for n in range(g.batch):
                    dp = d + (n * g.oc4 + g.oc4 - 1) * g.ohw * 4
                    for it in range(g.ohw):
                        for lane in range(g.oc % 4, 4):
                            dp[4 * it + lane] = 0


cdef void _gitem(const GPlan* g, const float* src, float* dst, const float* gin, float* gout,
                 float* cols, const float* w, const float* bias, const ptrdiff_t* win,
                 float lo, float hi, Py_ssize_t it, int tid) noexcept nogil:
    cdef Py_ssize_t gi = it // (g.batch * g.ntile), n = (it // g.ntile) % g.batch
    cdef Py_ssize_t p0 = (it % g.ntile) * g.tile
    cdef Py_ssize_t pixels = min(g.tile, g.ohw - p0), a_stride
    cdef const float* img
    cdef const float* a
    cdef float* out
    if g.in_aligned:
        img = src + (n * g.ic4 + gi * (g.icg // 4)) * g.ihw * 4
    else:
        img = gin + (gi * g.batch + n) * g.gin_img
    if g.out_aligned:
        out = dst + (n * g.oc4 + gi * (g.ocg // 4)) * g.ohw * 4
    else:
        out = gout + (gi * g.batch + n) * g.gout_img
    if g.direct:
        a = img + p0 * 4
        a_stride = g.ohw * 4
    else:
        a_stride = g.tile * 4
        a = cols + tid * a_stride * g.k4
        mnnpy_im2col(img, g.icg, g.ih, g.iw, g.ow, win, p0, pixels, <float*>a, g.tile)
    mnnpy_gemm_c4(current_isa(), a, a_stride, pixels, g.k, w + gi * g.wsize,
                  bias + gi * g.bsize, out + p0 * 4, g.ohw * 4, g.ocg, lo, hi)
