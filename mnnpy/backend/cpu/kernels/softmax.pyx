# cython: language_level=3
"""Softmax over the middle axis of a plain ``[outer][channel][inner]`` float32 buffer.

NumPy reference: ``mnnpy/ops/softmax.py``. Numerically stable (the maximum is subtracted before
``exp``). Each (outer, inner) column is computed by one thread in a fixed order, so results do not
depend on the thread count. ``src`` and ``dst`` may be the same buffer.
"""

from cython.parallel cimport prange
from libc.math cimport expf


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
    cdef Py_ssize_t columns = outer * inner, col, base, c
    cdef float m, s, v
    with nogil:
        for col in prange(columns, num_threads=num_thread, schedule="static"):
            base = (col // inner) * channel * inner + col % inner
            m = src[base]
            for c in range(1, channel):
                v = src[base + c * inner]
                if v > m:
                    m = v
            s = 0
            for c in range(channel):
                v = expf(src[base + c * inner] - m)
                dst[base + c * inner] = v
                s = s + v
            s = 1 / s
            for c in range(channel):
                dst[base + c * inner] = dst[base + c * inner] * s
