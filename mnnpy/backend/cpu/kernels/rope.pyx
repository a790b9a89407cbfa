# cython: language_level=3
"""Rotary position embedding as exported graphs write it, in one pass (MNN's RoPE role).

``out = x * cos + rotate_half(x) * sin`` over rows of ``D`` values (``D`` even, ``h = D / 2``):
``rotate_half(x)[j]`` is ``-x[j + h]`` for ``j < h`` and ``x[j - h]`` after. Row ``r`` of ``x``
uses row ``r % S`` of ``cos`` and ``sin`` (``[S][D]``, broadcast over the leading dims). Each
value is the two products and the sum of the ops it replaces (Mul, Mul, Add: three roundings,
no FMA), so the result is theirs bit for bit. NumPy reference: ``tests/ops/test_rope_fused.py``.
"""

from cython.parallel cimport prange


def rope(const float[::1] x, const float[::1] cos, const float[::1] sin, float[::1] out,
         Py_ssize_t rows, Py_ssize_t S, Py_ssize_t D, int num_thread=1):
    """``out = x * cos + rotate_half(x) * sin`` for ``rows`` rows of ``D`` (module docstring)."""
    if rows < 0 or S < 1 or D < 2 or D % 2:
        raise ValueError(f"bad sizes: rows {rows}, S {S}, D {D} (D even)")
    if (x.shape[0] < rows * D or out.shape[0] < rows * D or cos.shape[0] < S * D
            or sin.shape[0] < S * D):
        raise ValueError(f"buffers too small: x {x.shape[0]}, out {out.shape[0]}, cos "
                         f"{cos.shape[0]}, sin {sin.shape[0]} for {rows} x {D}, S {S}")
    if rows == 0:
        return
    cdef const float* xp = &x[0]
    cdef const float* cp = &cos[0]
    cdef const float* sp = &sin[0]
    cdef float* op = &out[0]
    cdef Py_ssize_t r
    with nogil:
        if num_thread == 1 or rows < 64:
            for r in range(rows):
                _row(xp + r * D, cp + (r % S) * D, sp + (r % S) * D, op + r * D, D // 2)
        else:
            for r in prange(rows, num_threads=num_thread, schedule="static"):
                _row(xp + r * D, cp + (r % S) * D, sp + (r % S) * D, op + r * D, D // 2)


cdef inline void _row(const float* x, const float* c, const float* s, float* o,
                      Py_ssize_t h) noexcept nogil:
    cdef Py_ssize_t j
    cdef float a, b
    for j in range(h):
        a = x[j] * c[j]
        b = (-x[j + h]) * s[j]
        o[j] = a + b
    for j in range(h, 2 * h):
        a = x[j] * c[j]
        b = x[j - h] * s[j]
        o[j] = a + b
