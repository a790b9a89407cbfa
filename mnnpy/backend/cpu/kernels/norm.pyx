# cython: language_level=3
"""LayerNorm / RMSNorm over the middle axis of a plain ``[outer][n][inner]`` float32 buffer.

NumPy reference: ``mnnpy/ops/layer_norm.py``. As MNN's MNNNorm, in float32: mean, then the
variance of ``x - mean``, then ``(x - mean) / sqrt(var + eps) * gamma[k] + beta[k]``; RMSNorm
uses mean 0. The C kernels (``norm_kernels.h``, the ISA from ``gemm.set_isa``) take a contiguous
row (``inner == 1``) or up to 16 adjacent columns as one work item, each computed by one thread
in a fixed order, so results do not depend on the thread count. A column is read completely
before it is written, so ``src`` and ``dst`` may be the same buffer.
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport current_isa


cdef extern from "norm_kernels.h" nogil:
    void mnnpy_norm_row(int isa, const float* src, float* dst, ptrdiff_t n, const float* gamma,
                        const float* beta, float eps, int rms)
    void mnnpy_norm_cols(int isa, const float* src, float* dst, ptrdiff_t n, ptrdiff_t inner,
                         ptrdiff_t w, const float* gamma, const float* beta, float eps, int rms)


def layer_norm(const float[::1] src, float[::1] dst, Py_ssize_t outer, Py_ssize_t n,
               Py_ssize_t inner, const float[::1] gamma, const float[::1] beta, double eps,
               bint rms=False, int num_thread=1):
    """Normalize each column of ``n`` elements (stride ``inner``); ``gamma`` / ``beta`` are
    ``n`` long, or both empty for no affine part."""
    if outer < 0 or n < 0 or inner < 0:
        raise ValueError("negative size")
    cdef Py_ssize_t total = outer * n * inner
    if src.shape[0] < total or dst.shape[0] < total:
        raise ValueError(f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, need {total}")
    if gamma.shape[0] != beta.shape[0] or gamma.shape[0] not in (0, n):
        raise ValueError(f"gamma / beta have {gamma.shape[0]} / {beta.shape[0]} values, need {n}")
    if total == 0:
        return
    cdef const float* g = &gamma[0] if gamma.shape[0] else NULL
    cdef const float* b = &beta[0] if beta.shape[0] else NULL
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef float e = <float>eps
    cdef int isa = current_isa(), r = rms
    cdef Py_ssize_t blocks = (inner + 15) // 16, it, o, j
    with nogil:
        if inner == 1:
            if outer == 1 or num_thread == 1:
                for it in range(outer):
                    mnnpy_norm_row(isa, s + it * n, d + it * n, n, g, b, e, r)
            else:
                for it in prange(outer, num_threads=num_thread, schedule="static"):
                    mnnpy_norm_row(isa, s + it * n, d + it * n, n, g, b, e, r)
        else:
            for it in prange(outer * blocks, num_threads=num_thread, schedule="static"):
                o = it // blocks
                j = (it % blocks) * 16
                mnnpy_norm_cols(isa, s + o * n * inner + j, d + o * n * inner + j, n, inner,
                                min(16, inner - j), g, b, e, r)
