# cython: language_level=3
"""Softmax over the middle axis of a plain ``[outer][channel][inner]`` float32 buffer.

NumPy reference: ``mnnpy/ops/softmax.py``. Numerically stable (the maximum is subtracted before
``exp``). The C kernels (``softmax_kernels.h``, the ISA from ``gemm.set_isa``) use a vectorized
exp; a contiguous row (``inner == 1``) is one work item, otherwise up to 16 adjacent columns of
one outer index are (the columns are the vector lanes). Each column is computed by one thread in
a fixed order, so results do not depend on the thread count. ``src`` and ``dst`` may be the same
buffer.
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport current_isa


cdef extern from "softmax_kernels.h" nogil:
    void mnnpy_softmax_row(int isa, const float* src, float* dst, ptrdiff_t n)
    void mnnpy_softmax_cols(int isa, const float* src, float* dst, ptrdiff_t channel,
                            ptrdiff_t inner, ptrdiff_t w)
    void mnnpy_exp_neg(int isa, const float* src, float* dst, ptrdiff_t n)


def softmax(const float[::1] src, float[::1] dst, Py_ssize_t outer, Py_ssize_t channel,
            Py_ssize_t inner, int num_thread=1):
    """``dst = exp(src - max) / sum(exp(src - max))`` along ``channel`` for every column."""
    if outer < 0 or channel < 0 or inner < 0:
        raise ValueError("negative size")
    cdef Py_ssize_t total = outer * channel * inner
    if src.shape[0] < total or dst.shape[0] < total:
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, need {total}"
        )
    if total == 0:
        return
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef int isa = current_isa()
    cdef Py_ssize_t blocks = (inner + 15) // 16, it, o, j
    with nogil:
        if inner == 1:
            for it in prange(outer, num_threads=num_thread, schedule="static"):
                mnnpy_softmax_row(isa, s + it * channel, d + it * channel, channel)
        else:
            for it in prange(outer * blocks, num_threads=num_thread, schedule="static"):
                o = it // blocks
                j = (it % blocks) * 16
                mnnpy_softmax_cols(isa, s + o * channel * inner + j, d + o * channel * inner + j,
                                   channel, inner, min(16, inner - j))


def exp_neg(const float[::1] src, float[::1] dst):
    """``dst = exp(src)`` for ``src <= 0`` with the kernel softmax uses (for tests)."""
    if dst.shape[0] < src.shape[0]:
        raise ValueError(f"dst has {dst.shape[0]} values, src {src.shape[0]}")
    if src.shape[0] == 0:
        return
    with nogil:
        mnnpy_exp_neg(current_isa(), &src[0], &dst[0], src.shape[0])
