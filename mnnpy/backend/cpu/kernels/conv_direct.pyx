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
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall, current_isa

from mnnpy.backend.cpu.kernels.gemm import FUSED_ACTS


cdef extern from "unary_kernels.h" nogil:
    int mnnpy_unary_simd(int isa, int op, const float* src, float* dst, ptrdiff_t n)


cdef extern from "conv_direct_kernels.h" nogil:
    ctypedef struct mnnpy_cd_geom:
        ptrdiff_t ic, ih, iw, oc, oh, ow, KY, KX, sy, sx, dy, dx, top, left, ps, cs
    void mnnpy_cd_row(int isa, const mnnpy_cd_geom* g, const float* src, float* dst,
                      const float* w, const float* bias, ptrdiff_t oy, float lo, float hi)


MAX_CHANNELS = 4  # one NC4HW4 input block


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
    if act != -1 and act not in FUSED_ACTS:
        raise ValueError(f"activation {act} cannot be fused")
    cdef ConvDirectCall call = ConvDirectCall.__new__(ConvDirectCall)
    cdef mnnpy_cd_geom* g = &call.g
    cdef Py_ssize_t batch, panels
    batch, g.ic, g.ih, g.iw, g.oc, g.oh, g.ow = shape
    g.KY, g.KX, g.sy, g.sx, g.dy, g.dx, g.top, g.left = window
    if min(batch, g.ic, g.ih, g.iw, g.oc, g.oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(g.KY, g.KX, g.sy, g.sx, g.dy, g.dx, num_thread) < 1:
        raise ValueError(
            f"kernel, stride, dilation and threads must be positive, got window {window!r}")
    if g.ic > MAX_CHANNELS:
        raise ValueError(f"at most {MAX_CHANNELS} input channels, got shape {shape!r}")
    panels = (g.oc + 15) // 16
    g.ps = 1 if nchw else 4
    g.cs = g.ih * g.iw if nchw else 1
    if (src.shape[0] < batch * g.ih * g.iw * (g.ic if nchw else 4)
            or dst.shape[0] < batch * ((g.oc + 3) // 4) * g.oh * g.ow * 4):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]} for shape {shape!r}")
    if (weight.shape[0] < panels * 16 * g.KY * g.KX * g.ic or bias.shape[0] < panels * 16):
        raise ValueError(
            f"weight ({weight.shape[0]}) or bias ({bias.shape[0]}) too small for "
            f"shape {shape!r}, window {window!r}")
    call.act = act
    call.rows = batch * g.oh
    call.buffers = (src, dst, weight, bias)  # alive as long as the pointers below
    call.s, call.d, call.w, call.b = &src[0], &dst[0], &weight[0], &bias[0]
    call.lo, call.hi, call.num_thread = lo, hi, num_thread
    return call


def conv2d_direct(const float[::1] src, float[::1] dst, const float[::1] weight,
                  const float[::1] bias, tuple shape, tuple window, float lo, float hi,
                  int num_thread=1, int act=-1, bint nchw=False):
    """``bind_conv_direct(...)()``: the convolution, run once."""
    bind_conv_direct(src, dst, weight, bias, shape, window, lo, hi, num_thread, act, nchw)()
