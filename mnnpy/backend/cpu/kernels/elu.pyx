# cython: language_level=3
"""ELU and SELU over raw storage; the NumPy references are in ``mnnpy/ops/activation.py``.

``y = x > 0 ? scale * x : alpha * expm1(x)`` (ELU: ``scale = 1``; SELU: ``alpha`` is already
``scale * alpha`` in float32, as MNN's ``GeometryELU`` folds it). Zeros stay zeros, so NC4HW4
padding lanes need no reset. Threads split the elements; results do not depend on the count.
"""

from cython.parallel cimport prange
from libc.math cimport expm1f


def elu(const float[::1] src, float[::1] dst, Py_ssize_t n, float alpha, float scale=1,
        int num_thread=1):
    """The first ``n`` elements of ``src`` into ``dst``."""
    cdef Py_ssize_t i
    cdef float v
    if n < 0 or src.shape[0] < n or dst.shape[0] < n:
        raise ValueError(f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]} for {n}")
    if n == 0:
        return
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    with nogil:
        for i in prange(n, num_threads=num_thread, schedule="static"):
            v = s[i]
            d[i] = scale * v if v > 0 else alpha * expm1f(v)
