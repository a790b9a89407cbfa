# cython: language_level=3
"""Direct convolution of an input with at most 4 channels on NC4HW4 (``conv_direct_kernels.h``).

A network's first layer (3 RGB channels, 3x3 stride 2) or a 1-channel audio front end: one
input block, so each input value is broadcast against the 16-channel weight panels of
``CPUConvolutionGemm.pack_weight`` (the GEMM's own weights) and no im2col copy is made. The
reference is ``mnnpy/ops/convolution.py``; ``shape = (batch, ic, ih, iw, oc, oh, ow)`` and
``window = (ky, kx, sy, sx, dy, dx, pad_top, pad_left)`` as in ``conv.pyx``. Outputs are
clamped to ``[lo, hi]``, output padding lanes are zeros, a fused activation ``act``
(``gemm.FUSED_ACTS``, -1 for none) runs on each output row once written.

Threads take output rows (static ranges); each value is one fixed FMA chain, so results do not
depend on the thread count. Sizes and buffer lengths are checked before the ``nogil`` loop.

``bind_conv_direct_pool`` is the convolution followed by a max pooling of its output that never
writes that output: rows go to a per-thread ring of the pooling window's rows, each pooled row
is taken from there (``pool_kernels.h``'s ``mnnpy_max_row_ptrs``; ``conv_max_pool.py``).
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall, current_isa

from mnnpy.backend.cpu.kernels.gemm import FUSED_ACTS


cdef extern from "unary_kernels.h" nogil:
    int mnnpy_unary_simd(int isa, int op, const float* src, float* dst, ptrdiff_t n)


cdef extern from "conv_direct_kernels.h" nogil:
    ctypedef struct mnnpy_cd_geom:
        ptrdiff_t ic, ih, iw, oc, oh, ow, KY, KX, sy, sx, dy, dx, top, left, ps, cs, plane, oy0
    void mnnpy_cd_row(int isa, const mnnpy_cd_geom* g, const float* src, float* dst,
                      const float* w, const float* bias, ptrdiff_t oy, float lo, float hi)


cdef extern from "pool_kernels.h" nogil:
    void mnnpy_max_row_ptrs(int isa, const float* const* rows, ptrdiff_t nr, ptrdiff_t iw,
                            ptrdiff_t ow, ptrdiff_t kx, ptrdiff_t sx, ptrdiff_t left, float* out,
                            ptrdiff_t lanes)


MAX_CHANNELS = 4  # one NC4HW4 input block
MAX_POOL_ROWS = 16  # the most rows a fused max pooling's window may span (its ring's slots)


cdef class ConvDirectCall(KernelCall):
    """A direct small-input convolution (``bind_conv_direct``)."""
    cdef mnnpy_cd_geom g
    cdef Py_ssize_t rows
    cdef int act

    cdef void run(self) noexcept:
        cdef Py_ssize_t it
        cdef int isa = current_isa()
        with nogil:
            if self.num_thread == 1:  # no parallel region to enter
                for it in range(self.rows):
                    _row(isa, &self.g, self.s, self.d, self.w, self.b, self.lo, self.hi,
                         self.act, it)
            else:
                for it in prange(self.rows, num_threads=self.num_thread, schedule="static"):
                    _row(isa, &self.g, self.s, self.d, self.w, self.b, self.lo, self.hi,
                         self.act, it)


cdef inline void _row(int isa, const mnnpy_cd_geom* g, const float* s, float* d, const float* w,
                      const float* b, float lo, float hi, int act, Py_ssize_t it) noexcept nogil:
    # row it: image it // oh, output row it % oh
    cdef Py_ssize_t n = it // g.oh, oy = it % g.oh, oc4 = (g.oc + 3) // 4, blk
    cdef Py_ssize_t plane = g.oh * g.ow * 4
    cdef float* out = d + n * oc4 * plane
    mnnpy_cd_row(isa, g, s + n * g.ih * g.iw * (g.ic if g.ps == 1 else 4), out, w, b, oy, lo, hi)
    if act >= 0:
        for blk in range(oc4):
            mnnpy_unary_simd(isa, act, out + blk * plane + oy * g.ow * 4,
                             out + blk * plane + oy * g.ow * 4, g.ow * 4)


cdef int _fill_geom(mnnpy_cd_geom* g, Py_ssize_t* batch, const float[::1] src,
                    const float[::1] dst, const float[::1] weight, const float[::1] bias,
                    tuple shape, tuple window, int num_thread, int act, bint nchw) except -1:
    """``g`` from ``shape`` / ``window``, every size and buffer checked (``dst`` as the whole
    output; a pooled one is checked by the caller)."""
    cdef Py_ssize_t panels
    if act != -1 and act not in FUSED_ACTS:
        raise ValueError(f"activation {act} cannot be fused")
    batch[0], g.ic, g.ih, g.iw, g.oc, g.oh, g.ow = shape
    g.KY, g.KX, g.sy, g.sx, g.dy, g.dx, g.top, g.left = window
    if min(batch[0], g.ic, g.ih, g.iw, g.oc, g.oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(g.KY, g.KX, g.sy, g.sx, g.dy, g.dx, num_thread) < 1:
        raise ValueError(
            f"kernel, stride, dilation and threads must be positive, got window {window!r}")
    if g.ic > MAX_CHANNELS:
        raise ValueError(f"at most {MAX_CHANNELS} input channels, got shape {shape!r}")
    panels = (g.oc + 15) // 16
    g.ps = 1 if nchw else 4
    g.cs = g.ih * g.iw if nchw else 1
    g.plane, g.oy0 = g.oh * g.ow, 0
    if src.shape[0] < batch[0] * g.ih * g.iw * (g.ic if nchw else 4) or (
            dst is not None and dst.shape[0] < batch[0] * ((g.oc + 3) // 4) * g.oh * g.ow * 4):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst "
            f"{None if dst is None else dst.shape[0]} for shape {shape!r}")
    if (weight.shape[0] < panels * 16 * g.KY * g.KX * g.ic or bias.shape[0] < panels * 16):
        raise ValueError(
            f"weight ({weight.shape[0]}) or bias ({bias.shape[0]}) too small for "
            f"shape {shape!r}, window {window!r}")
    return 0


def bind_conv_direct(const float[::1] src, float[::1] dst, const float[::1] weight,
                     const float[::1] bias, tuple shape, tuple window, float lo, float hi,
                     int num_thread=1, int act=-1, bint nchw=False):
    """The convolution on these buffers, checked now: a ``ConvDirectCall`` that runs it when
    called with no arguments (a session's prepared step, ``Execution.bind``).

    ``weight`` is ``[ceil(oc/16)][ky * kx * ic][16]``, ``bias`` ``16 * ceil(oc/16)`` values.
    ``nchw``: ``src`` is NCHW (``[batch][ic][ih][iw]``), not NC4HW4; the same taps, the same bits.

    Raises:
        ValueError: for non-positive sizes, more than 4 input channels, an activation that
            cannot be fused, or buffers too small for ``shape``.
    """
    cdef ConvDirectCall call = ConvDirectCall.__new__(ConvDirectCall)
    cdef Py_ssize_t batch
    _fill_geom(&call.g, &batch, src, dst, weight, bias, shape, window, num_thread, act, nchw)
    call.act = act
    call.rows = batch * call.g.oh
    call.buffers = (src, dst, weight, bias)  # alive as long as the pointers below
    call.s, call.d, call.w, call.b = &src[0], &dst[0], &weight[0], &bias[0]
    call.lo, call.hi, call.num_thread = lo, hi, num_thread
    return call


def conv2d_direct(const float[::1] src, float[::1] dst, const float[::1] weight,
                  const float[::1] bias, tuple shape, tuple window, float lo, float hi,
                  int num_thread=1, int act=-1, bint nchw=False):
    """``bind_conv_direct(...)()``: the convolution, run once."""
    bind_conv_direct(src, dst, weight, bias, shape, window, lo, hi, num_thread, act, nchw)()


cdef struct PoolPlan:
    Py_ssize_t batch, oh, ow, ky, kx, sy, sx, top, left  # the pooling (oh, ow: its output)
    Py_ssize_t ring, slot, items  # ring rows, floats per item's ring, work items


cdef class ConvDirectPoolCall(KernelCall):
    """A direct convolution read only by a max pooling (``bind_conv_direct_pool``)."""
    cdef mnnpy_cd_geom g
    cdef PoolPlan p
    cdef int act

    cdef void run(self) noexcept:
        cdef Py_ssize_t it
        cdef int isa = current_isa()
        with nogil:
            if self.p.items == 1:  # no parallel region to enter
                _pooled(isa, &self.g, &self.p, self.s, self.d, self.w, self.b, self.t, self.lo,
                        self.hi, self.act, 0)
            else:
                for it in prange(self.p.items, num_threads=self.num_thread, schedule="static"):
                    _pooled(isa, &self.g, &self.p, self.s, self.d, self.w, self.b, self.t,
                            self.lo, self.hi, self.act, it)


cdef void _pooled(int isa, const mnnpy_cd_geom* g, const PoolPlan* p, const float* s, float* d,
                  const float* w, const float* b, float* t, float lo, float hi, int act,
                  Py_ssize_t it) noexcept nogil:
    """Item ``it``: a contiguous range of the pooling's output rows (image-major). Convolution
    row y goes to ring slot y % ring as it is first needed; each pooled row reads its window's
    rows from the ring."""
    cdef mnnpy_cd_geom gl = g[0]
    cdef Py_ssize_t rows = p.batch * p.oh, r0 = it * rows // p.items
    cdef Py_ssize_t r1 = (it + 1) * rows // p.items, oc4 = (g.oc + 3) // 4
    cdef Py_ssize_t r, n, py, iy0, ys, ye, y, blk, k, image = -1, done = 0
    cdef float* ring = t + it * p.slot
    cdef const float* src
    cdef const float* at[16]  # MAX_POOL_ROWS
    for r in range(r0, r1):
        n = r // p.oh
        py = r % p.oh
        iy0 = py * p.sy - p.top  # window rows clamped into the map, as pool.pyx's max_pool
        ys = min(max(iy0, 0), g.oh - 1)
        ye = min(max(iy0 + p.ky - 1, 0), g.oh - 1) + 1
        if n != image:
            image, done = n, 0
        src = s + n * g.ih * g.iw * (g.ic if g.ps == 1 else 4)
        for y in range(max(done, ys), ye):
            gl.oy0 = y - y % p.ring
            mnnpy_cd_row(isa, &gl, src, ring, w, b, y, lo, hi)
            if act >= 0:
                for blk in range(oc4):
                    mnnpy_unary_simd(isa, act, ring + (blk * gl.plane + y % p.ring * g.ow) * 4,
                                     ring + (blk * gl.plane + y % p.ring * g.ow) * 4, g.ow * 4)
        done = max(done, ye)
        for blk in range(oc4):
            for k in range(ye - ys):
                at[k] = ring + (blk * gl.plane + (ys + k) % p.ring * g.ow) * 4
            mnnpy_max_row_ptrs(isa, at, ye - ys, g.ow, p.ow, p.kx, p.sx, p.left,
                               d + ((n * oc4 + blk) * p.oh + py) * p.ow * 4, g.oc - 4 * blk)


def pool_scratch_size(tuple shape, tuple pool_window, tuple pool_out, int num_thread=1):
    """Floats of scratch ``bind_conv_direct_pool`` needs: a ring of the pooling window's rows
    of the convolution's output (every channel block) per work item."""
    batch, _, _, _, oc, _, ow = shape
    items = max(1, min(num_thread, batch * pool_out[0]))
    return items * pool_window[0] * ((oc + 3) // 4) * ow * 4


def bind_conv_direct_pool(const float[::1] src, float[::1] dst, const float[::1] weight,
                          const float[::1] bias, float[::1] scratch, tuple shape, tuple window,
                          tuple pool_window, tuple pool_out, float lo, float hi,
                          int num_thread=1, int act=-1, bint nchw=False):
    """``bind_conv_direct`` followed by a max pooling of its output, as one call that never
    writes that output: ``dst`` is the pooling's (``[batch][ceil(oc/4)][ph][pw][4]``).

    ``pool_window = (ky, kx, sy, sx, pad_top, pad_left)`` and ``pool_out = (ph, pw)`` as
    ``pool.max_pool`` takes them (windows clamped into the map; at most ``MAX_POOL_ROWS``
    rows); ``scratch`` needs ``pool_scratch_size`` floats. Work items are contiguous ranges of
    pooled rows, one per thread; a convolution row both ranges need is computed by both, the
    same way, so results do not depend on the thread count and equal the two ops run apart.

    Raises:
        ValueError: as ``bind_conv_direct``, for a bad pooling window, or buffers too small.
    """
    cdef ConvDirectPoolCall call = ConvDirectPoolCall.__new__(ConvDirectPoolCall)
    cdef PoolPlan* p = &call.p
    _fill_geom(&call.g, &p.batch, src, None, weight, bias, shape, window, num_thread, act, nchw)
    p.ky, p.kx, p.sy, p.sx, p.top, p.left = pool_window
    p.oh, p.ow = pool_out
    if min(p.ky, p.kx, p.sy, p.sx, p.oh, p.ow) < 1 or p.ky > MAX_POOL_ROWS:
        raise ValueError(
            f"bad pooling: window {pool_window!r} (at most {MAX_POOL_ROWS} rows), output "
            f"{pool_out!r}")
    p.ring = p.ky
    p.items = max(1, min(num_thread, p.batch * p.oh))
    p.slot = p.ring * ((call.g.oc + 3) // 4) * call.g.ow * 4
    call.g.plane = p.ring * call.g.ow  # the ring's rows of one channel block
    need = pool_scratch_size(shape, pool_window, pool_out, num_thread)
    if (dst.shape[0] < p.batch * ((call.g.oc + 3) // 4) * p.oh * p.ow * 4
            or scratch.shape[0] < need):
        raise ValueError(
            f"buffers too small: dst {dst.shape[0]}, scratch {scratch.shape[0]} (needs {need}) "
            f"for shape {shape!r}, pooled to {pool_out!r}")
    call.act = act
    call.buffers = (src, dst, weight, bias, scratch)  # alive as long as the pointers below
    call.s, call.d, call.w, call.b, call.t = &src[0], &dst[0], &weight[0], &bias[0], &scratch[0]
    call.lo, call.hi, call.num_thread = lo, hi, num_thread
    return call
