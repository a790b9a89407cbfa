# cython: language_level=3
"""A direct 1x1 convolution whose output only a global average pooling reads, as one call.

SqueezeNet's classifier: a 512 -> 1000 1x1 convolution with ReLU on 13 x 13, then the mean of
each channel. Work items are (image, chunk of 16-channel panels); an item runs the GEMM of
``gemm.pyx`` (the same micro-kernel, ``gemm_bcast512.h`` on maps up to ``BCAST_MAX_PIXELS``) over
all the image's pixels into its thread's slot of scratch (``[cw / 4][pixels][4]``, in L2), the
fused activation on it, then each channel block's mean with ``pool_kernels.h``'s
``mnnpy_sum_plane`` (the global average pool's own sums) while the slot is in cache: the
convolution's output (SqueezeNet: 1000 x 13 x 13 floats) is never written to memory. Every value
goes through the same operations as in the two ops run apart, so the bits are theirs, whatever
the thread count. ``shape = (batch, ic, h, w, oc, h, w)``; weights and bias as ``gemm.pyx``'s.
The reference is ``gemm.conv2d`` followed by ``pool.avg_pool`` (tests/kernels/test_gemm_mean.py).
"""

from cython.parallel cimport prange, threadid
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport (
    KernelCall, cdiv, current_isa, mnnpy_gemm_c4_bcast)

from mnnpy.backend.cpu.kernels.gemm import BCAST_MAX_PIXELS, FUSED_ACTS


cdef extern from "unary_kernels.h" nogil:
    int mnnpy_unary_simd(int isa, int op, const float* src, float* dst, ptrdiff_t n)


cdef extern from "pool_kernels.h" nogil:
    void mnnpy_sum_plane(int isa, const float* plane, ptrdiff_t n, float scale, float* out,
                         ptrdiff_t lanes)


MAX_PIXELS = BCAST_MAX_PIXELS  # larger maps keep the two ops (a slot per thread grows with them)
SLOT_FLOATS = 64 * 1024  # a thread's slot (256 KB, in L2) bounds the panels per chunk


cdef struct Plan:
    Py_ssize_t batch, ic, oc, pixels, n16, nchunk, items
    int act


cdef class MeanCall(KernelCall):
    """The fused convolution and mean (``bind_conv1x1_mean``)."""
    cdef Plan g

    cdef void run(self) noexcept:
        cdef Py_ssize_t it
        cdef int isa = current_isa()
        with nogil:
            if self.num_thread == 1 or self.g.items == 1:  # no parallel region to enter
                for it in range(self.g.items):
                    _item(isa, &self.g, self.s, self.d, self.w, self.b, self.t, self.lo,
                          self.hi, it, 0)
            else:
                for it in prange(self.g.items, num_threads=self.num_thread, schedule="static"):
                    _item(isa, &self.g, self.s, self.d, self.w, self.b, self.t, self.lo,
                          self.hi, it, threadid())


cdef inline Py_ssize_t _chunk0(const Plan* g, Py_ssize_t c) noexcept nogil:
    """The first output channel of chunk ``c``: whole panels, counts differing by at most one."""
    return min(c * g.n16 // g.nchunk * 16, g.oc)


cdef void _item(int isa, const Plan* g, const float* src, float* dst, const float* w,
                const float* bias, float* scratch, float lo, float hi, Py_ssize_t it,
                int tid) noexcept nogil:
    cdef Py_ssize_t n = it // g.nchunk, c = it % g.nchunk, p = g.pixels
    cdef Py_ssize_t o0 = _chunk0(g, c), cw = _chunk0(g, c + 1) - o0, blk
    cdef Py_ssize_t oc4 = cdiv(g.oc, 4)
    cdef const float* a = src + n * cdiv(g.ic, 4) * p * 4
    cdef float* slot = scratch + tid * cdiv(g.n16, g.nchunk) * 16 * p
    mnnpy_gemm_c4_bcast(isa, a, p * 4, p, g.ic, w + o0 * g.ic, bias + o0, slot, p * 4, cw, lo,
                        hi)
    for blk in range(cdiv(cw, 4)):
        if g.act >= 0:
            mnnpy_unary_simd(isa, g.act, slot + blk * p * 4, slot + blk * p * 4, p * 4)
        mnnpy_sum_plane(isa, slot + blk * p * 4, p, 1.0 / p,
                        dst + (n * oc4 + o0 // 4 + blk) * 4, g.oc - o0 - 4 * blk)


cdef Plan _plan(tuple shape, int num_thread) except *:
    cdef Plan g
    cdef Py_ssize_t ih, iw, oh, ow, cp
    g.batch, g.ic, ih, iw, g.oc, oh, ow = shape
    if min(g.batch, g.ic, ih, iw, g.oc) < 1 or num_thread < 1:
        raise ValueError(f"sizes and threads must be positive, got shape {shape!r}")
    if (oh, ow) != (ih, iw) or ih * iw > MAX_PIXELS:
        raise ValueError(f"a 1x1 stride-1 map of at most {MAX_PIXELS} pixels, got {shape!r}")
    g.pixels = ih * iw
    g.n16 = cdiv(g.oc, 16)
    cp = max(1, SLOT_FLOATS // (16 * g.pixels))  # panels a slot holds
    # at least one chunk per thread for one image, and as few as the slot allows
    g.nchunk = max(cdiv(g.n16, cp), cdiv(num_thread, g.batch))
    g.nchunk = min(g.n16, cdiv(g.nchunk, num_thread) * num_thread)
    g.items = g.batch * g.nchunk
    return g


def scratch_size(tuple shape, int num_thread=1):
    """Floats of scratch ``bind_conv1x1_mean`` needs: a slot of the largest chunk per thread."""
    cdef Plan g = _plan(shape, num_thread)
    return num_thread * cdiv(g.n16, g.nchunk) * 16 * g.pixels


def plan(tuple shape, int num_thread=1):
    """``(nchunk, items)``: 16-channel panel chunks per image, and work items."""
    cdef Plan g = _plan(shape, num_thread)
    return g.nchunk, g.items


def bind_conv1x1_mean(const float[::1] src, float[::1] dst, const float[::1] weight,
                      const float[::1] bias, float[::1] scratch, tuple shape, float lo,
                      float hi, int num_thread=1, int act=-1):
    """The convolution ``gemm.conv2d`` makes of a 1x1 stride-1 unpadded window, then the
    global average of each output channel into ``dst`` (``[batch][ceil(oc/4)][4]``, lanes past
    ``oc`` zero), as one call; ``act`` as ``gemm.conv2d``'s.

    Raises:
        ValueError: for bad sizes, a map over ``MAX_PIXELS``, an activation that cannot be
            fused, or buffers too small.
    """
    if act != -1 and act not in FUSED_ACTS:
        raise ValueError(f"activation {act} cannot be fused")
    cdef MeanCall call = MeanCall.__new__(MeanCall)
    cdef Plan* g = &call.g
    g[0] = _plan(shape, num_thread)
    g.act = act
    need = scratch_size(shape, num_thread)
    if (src.shape[0] < g.batch * cdiv(g.ic, 4) * g.pixels * 4
            or dst.shape[0] < g.batch * cdiv(g.oc, 4) * 4
            or weight.shape[0] < g.n16 * 16 * g.ic or bias.shape[0] < g.n16 * 16
            or scratch.shape[0] < need):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, weight "
            f"{weight.shape[0]}, bias {bias.shape[0]}, scratch {scratch.shape[0]} (needs "
            f"{need}) for shape {shape!r}")
    call.buffers = (src, dst, weight, bias, scratch)  # alive as long as the pointers below
    call.s, call.d, call.w, call.b, call.t = &src[0], &dst[0], &weight[0], &bias[0], &scratch[0]
    call.lo, call.hi, call.num_thread = lo, hi, num_thread
    return call
