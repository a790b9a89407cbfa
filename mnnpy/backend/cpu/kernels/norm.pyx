# cython: language_level=3
"""LayerNorm / RMSNorm over the middle axis of a plain ``[outer][n][inner]`` float32 buffer.

NumPy reference: ``mnnpy/ops/layer_norm.py``. Every (outer, inner) column is normalized by one
thread: mean, then the variance of ``x - mean`` (two passes, in float64), then
``(x - mean) / sqrt(var + eps) * gamma[k] + beta[k]``. RMSNorm uses mean 0. A column is read
completely before it is written, so ``src`` and ``dst`` may be the same buffer; results do not
depend on the thread count.
"""

from cython.parallel cimport prange
from libc.math cimport sqrt

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall


cdef void _column(const float* src, float* dst, Py_ssize_t n, Py_ssize_t inner,
                  const float* gamma, const float* beta, double eps, bint rms) noexcept nogil:
    cdef Py_ssize_t k
    cdef double mean = 0, var = 0, d, scale
    if not rms:
        for k in range(n):
            mean += src[k * inner]
        mean /= n
    for k in range(n):
        d = src[k * inner] - mean
        var += d * d
    scale = 1.0 / sqrt(var / n + eps)
    if gamma != NULL:
        for k in range(n):
            dst[k * inner] = <float>((src[k * inner] - mean) * scale * gamma[k] + beta[k])
    else:
        for k in range(n):
            dst[k * inner] = <float>((src[k * inner] - mean) * scale)


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
    cdef Py_ssize_t columns = outer * inner, col, base
    with nogil:
        for col in prange(columns, num_threads=num_thread, schedule="static"):
            base = (col // inner) * n * inner + col % inner
            _column(&src[base], &dst[base], n, inner, g, b, eps, rms)


cdef class LayerNormCall(KernelCall):
    """``layer_norm`` with its buffers and sizes fixed (``bind_layer_norm``)."""
    cdef Py_ssize_t n, inner, columns
    cdef double eps
    cdef bint rms

    cdef void run(self) noexcept:
        cdef Py_ssize_t col, base, inner = self.inner, n = self.n
        cdef int threads = self.num_thread if self.columns > 1 else 1
        with nogil:
            for col in prange(self.columns, num_threads=threads, schedule="static"):
                base = (col // inner) * n * inner + col % inner
                _column(self.s + base, self.d + base, n, inner, self.w, self.b, self.eps,
                        self.rms)


def bind_layer_norm(const float[::1] src, float[::1] dst, Py_ssize_t outer, Py_ssize_t n,
                    Py_ssize_t inner, const float[::1] gamma, const float[::1] beta, double eps,
                    bint rms=False, int num_thread=1):
    """``layer_norm`` on these buffers, checked now: a ``LayerNormCall`` that runs it when
    called (``Execution.bind``)."""
    if outer < 0 or n < 0 or inner < 0:
        raise ValueError("negative size")
    cdef Py_ssize_t total = outer * n * inner
    if src.shape[0] < total or dst.shape[0] < total:
        raise ValueError(f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, need {total}")
    if gamma.shape[0] != beta.shape[0] or gamma.shape[0] not in (0, n):
        raise ValueError(f"gamma / beta have {gamma.shape[0]} / {beta.shape[0]} values, need {n}")
    cdef LayerNormCall call = LayerNormCall()
    call.buffers = (src, dst, gamma, beta)
    call.n, call.inner, call.columns = n, inner, (outer * inner if total else 0)
    call.eps, call.rms, call.num_thread = eps, rms, num_thread
    call.s = &src[0] if src.shape[0] else NULL
    call.d = &dst[0] if dst.shape[0] else NULL
    call.w = &gamma[0] if gamma.shape[0] else NULL
    call.b = &beta[0] if beta.shape[0] else NULL
    return call
