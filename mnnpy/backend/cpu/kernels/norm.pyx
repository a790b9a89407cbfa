# cython: language_level=3
"""LayerNorm / RMSNorm over the middle axis of a plain ``[outer][n][inner]`` float32 buffer.

NumPy reference: ``mnnpy/ops/layer_norm.py``. As MNN's MNNNorm, in float32: mean, then the
variance of ``x - mean``, then ``(x - mean) / sqrt(var + eps) * gamma[k] + beta[k]``; RMSNorm
uses mean 0. The C kernels (``norm_kernels.h``, the ISA from ``gemm.set_isa``) take a contiguous
row (``inner == 1``) or up to 16 adjacent columns as one work item, each computed by one thread
in a fixed order, so results do not depend on the thread count. A column is read completely
before it is written, so ``src`` and ``dst`` may be the same buffer. ``bind_layer_norm`` checks
and fixes the buffers once, for a session's run loop (a decode step's RMSNorms).
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall, current_isa


cdef extern from "norm_kernels.h" nogil:
    void mnnpy_norm_row(int isa, const float* src, float* dst, ptrdiff_t n, const float* gamma,
                        const float* beta, float eps, int rms)
    void mnnpy_norm_cols(int isa, const float* src, float* dst, ptrdiff_t n, ptrdiff_t inner,
                         ptrdiff_t w, const float* gamma, const float* beta, float eps, int rms)
    int mnnpy_group_norm(int isa, const float* src, float* dst, ptrdiff_t cg, ptrdiff_t area,
                         int src_packed, int dst_packed, const float* gamma, const float* beta,
                         float eps)

cdef extern from "unary_kernels.h" nogil:
    int mnnpy_unary_simd(int isa, int op, const float* src, float* dst, ptrdiff_t n)


cdef void norm_run(const float* s, float* d, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                   const float* g, const float* b, float e, int r,
                   int num_thread) noexcept nogil:
    """Every row (``inner == 1``) or 16-column block, over ``num_thread`` threads."""
    cdef int isa = current_isa()
    cdef Py_ssize_t blocks = (inner + 15) // 16, it, o, j
    if outer * n * inner == 0:
        return
    if inner == 1:
        if outer == 1 or num_thread == 1:
            for it in range(outer):
                mnnpy_norm_row(isa, s + it * n, d + it * n, n, g, b, e, r)
        else:
            for it in prange(outer, num_threads=num_thread, schedule="static"):
                mnnpy_norm_row(isa, s + it * n, d + it * n, n, g, b, e, r)
    elif outer * blocks == 1 or num_thread == 1:
        for it in range(outer * blocks):
            o = it // blocks
            j = (it % blocks) * 16
            mnnpy_norm_cols(isa, s + o * n * inner + j, d + o * n * inner + j, n, inner,
                            min(16, inner - j), g, b, e, r)
    else:
        for it in prange(outer * blocks, num_threads=num_thread, schedule="static"):
            o = it // blocks
            j = (it % blocks) * 16
            mnnpy_norm_cols(isa, s + o * n * inner + j, d + o * n * inner + j, n, inner,
                            min(16, inner - j), g, b, e, r)


cdef void _check(const float[::1] src, float[::1] dst, Py_ssize_t outer, Py_ssize_t n,
                 Py_ssize_t inner, const float[::1] gamma, const float[::1] beta) except *:
    if outer < 0 or n < 0 or inner < 0:
        raise ValueError("negative size")
    cdef Py_ssize_t total = outer * n * inner
    if src.shape[0] < total or dst.shape[0] < total:
        raise ValueError(f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, need {total}")
    if gamma.shape[0] != beta.shape[0] or gamma.shape[0] not in (0, n):
        raise ValueError(f"gamma / beta have {gamma.shape[0]} / {beta.shape[0]} values, need {n}")


def layer_norm(const float[::1] src, float[::1] dst, Py_ssize_t outer, Py_ssize_t n,
               Py_ssize_t inner, const float[::1] gamma, const float[::1] beta, double eps,
               bint rms=False, int num_thread=1):
    """Normalize each column of ``n`` elements (stride ``inner``); ``gamma`` / ``beta`` are
    ``n`` long, or both empty for no affine part."""
    _check(src, dst, outer, n, inner, gamma, beta)
    if outer * n * inner == 0:
        return
    cdef const float* g = &gamma[0] if gamma.shape[0] else NULL
    cdef const float* b = &beta[0] if beta.shape[0] else NULL
    with nogil:
        norm_run(&src[0], &dst[0], outer, n, inner, g, b, <float>eps, rms, num_thread)


cdef class LayerNormCall(KernelCall):
    """``layer_norm`` with its buffers and sizes fixed (``bind_layer_norm``)."""
    cdef Py_ssize_t outer, n, inner
    cdef float eps
    cdef int rms

    cdef void run(self) noexcept:
        with nogil:
            norm_run(self.s, self.d, self.outer, self.n, self.inner, self.w, self.b, self.eps,
                     self.rms, self.num_thread)


def bind_layer_norm(const float[::1] src, float[::1] dst, Py_ssize_t outer, Py_ssize_t n,
                    Py_ssize_t inner, const float[::1] gamma, const float[::1] beta, double eps,
                    bint rms=False, int num_thread=1):
    """``layer_norm`` on these buffers, checked now: a ``LayerNormCall`` that runs it when
    called (``Execution.bind``)."""
    _check(src, dst, outer, n, inner, gamma, beta)
    cdef LayerNormCall call = LayerNormCall()
    call.buffers = (src, dst, gamma, beta)
    empty = outer * n * inner == 0
    call.outer, call.n, call.inner = (0 if empty else outer), n, inner
    call.eps, call.rms, call.num_thread = <float>eps, rms, num_thread
    call.s = &src[0] if src.shape[0] else NULL
    call.d = &dst[0] if dst.shape[0] else NULL
    call.w = &gamma[0] if gamma.shape[0] else NULL
    call.b = &beta[0] if beta.shape[0] else NULL
    return call


def group_norm(const float[::1] src, float[::1] dst, Py_ssize_t batch, Py_ssize_t channel,
               Py_ssize_t area, Py_ssize_t group, const float[::1] gamma, const float[::1] beta,
               double eps, bint src_packed=False, bint dst_packed=False, int act=-1,
               int num_thread=1):
    """GroupNorm of ``[batch, channel, area]`` (NCHW or NC4HW4) into NCHW or NC4HW4.

    Each of the ``group`` runs of ``channel / group`` channels of a batch is normalized over
    all its values, then channel ``c`` is scaled by ``gamma[c]`` and shifted by ``beta[c]``
    (both empty: no affine part), then the UnaryOp ``act`` (``unary_kernels.h`` codes; -1: none)
    is applied. With either side packed, ``channel / group`` must be a multiple of 4. A group is
    one contiguous block in both layouts, so each is one work item: results do not depend on
    the thread count. ``src`` and ``dst`` must not overlap. A negative ``eps`` skips the
    normalization: ``act(x * gamma[c] + beta[c])`` only (MNN's Scale), moved between layouts.
    """
    if batch < 0 or channel < 0 or area < 0 or group <= 0 or channel % group:
        raise ValueError(f"bad sizes: batch {batch}, channel {channel}, area {area}, "
                         f"group {group}")
    cdef Py_ssize_t cg = channel // group
    if (src_packed or dst_packed) and cg % 4:
        raise ValueError(f"{cg} channels per group: packed layouts need a multiple of 4")
    cdef Py_ssize_t total = batch * channel * area
    if src.shape[0] < total or dst.shape[0] < total:
        raise ValueError(f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, need {total}")
    if gamma.shape[0] != beta.shape[0] or gamma.shape[0] not in (0, channel):
        raise ValueError(f"gamma / beta have {gamma.shape[0]} / {beta.shape[0]} values, "
                         f"need {channel}")
    if total == 0:
        return
    cdef const float* g = &gamma[0] if gamma.shape[0] else NULL
    cdef const float* b = &beta[0] if beta.shape[0] else NULL
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef int isa = current_isa(), failed = 0
    cdef Py_ssize_t it, off, n = cg * area, items = batch * group
    cdef float e = <float>eps
    with nogil:
        for it in prange(items, num_threads=num_thread, schedule="static"):
            off = it * n  # batch (it // group) at channel * area, group (it % group) at n
            if not mnnpy_group_norm(isa, s + off, d + off, cg, area, src_packed, dst_packed,
                                    (g + (it % group) * cg) if g != NULL else NULL,
                                    (b + (it % group) * cg) if b != NULL else NULL, e):
                failed += 1
            elif act >= 0:
                mnnpy_unary_simd(isa, act, d + off, d + off, n)
    if failed:
        raise MemoryError("group_norm: no scratch memory")
