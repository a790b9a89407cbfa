# cython: language_level=3
"""Weight panels in one pass; ``convolution_gemm.fill_panels_numpy`` is their NumPy reference.

``fill_panels`` writes ``[G][O][I][KH*KW]`` weights into zeroed ``[G][ceil(O/L)][KH*KW*I][L]``
panels of ``L`` lanes (16: GEMM convolutions; 4: depthwise, ``[C/4][KH][KW][4]``), k = (ky * KW +
kx) * I + i: each panel's ``L`` rows are read side by side and its ``k`` rows written in order,
with no transposed copy in between. The rows past ``O`` in the last panel are left as they are
(zero). Elements are copied as unsigned integers of their width, so
every bit pattern (NaN payloads included) is kept. Sizes are checked before the ``nogil`` loop.
"""

ctypedef fused word_t:
    unsigned int
    unsigned short
    unsigned char


cdef inline void _fill(const word_t* src, word_t* dst, Py_ssize_t groups, Py_ssize_t rows,
                       Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes) noexcept nogil:
    cdef Py_ssize_t blocks = (rows + lanes - 1) // lanes, k = cols * taps
    cdef Py_ssize_t g, b, t, i, lane, n
    cdef const word_t* s
    cdef word_t* d
    for g in range(groups):
        for b in range(blocks):
            n = min(lanes, rows - b * lanes)
            s = src + (g * rows + b * lanes) * k
            d = dst + (g * blocks + b) * k * lanes
            if taps == 1:
                for i in range(cols):
                    for lane in range(n):
                        d[i * lanes + lane] = s[lane * k + i]
            else:
                for t in range(taps):
                    for i in range(cols):
                        for lane in range(n):
                            d[(t * cols + i) * lanes + lane] = s[lane * k + i * taps + t]


def fill_panels(const word_t[::1] src, word_t[::1] dst, Py_ssize_t groups, Py_ssize_t rows,
                Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes=16):
    """Flat ``[groups][rows][cols][taps]`` ``src`` into flat zeroed panels ``dst``.

    Raises:
        ValueError: a negative size or ``lanes`` < 1, or a buffer smaller than the sizes say.
    """
    if groups < 0 or rows < 0 or cols < 0 or taps < 0 or lanes < 1:
        raise ValueError("negative size, or lanes < 1")
    if src.shape[0] < groups * rows * cols * taps or (
        dst.shape[0] < groups * ((rows + lanes - 1) // lanes) * lanes * cols * taps
    ):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]} for groups {groups}, "
            f"rows {rows}, cols {cols}, taps {taps}, lanes {lanes}"
        )
    if groups * rows * cols * taps == 0:
        return
    with nogil:  # constant lane counts, so the compiler unrolls the inner loop
        if lanes == 16:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, 16)
        elif lanes == 4:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, 4)
        else:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, lanes)
