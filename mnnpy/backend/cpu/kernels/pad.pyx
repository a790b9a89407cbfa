# cython: language_level=3
"""Padding by per-axis source tables; the NumPy reference is ``mnnpy/ops/padding.py``.

The output is walked as ``out_shape`` (row-major) with ``inner`` contiguous elements per
position (1 for plain layouts, 4 for an NC4HW4 view ``[N][C/4][spatial...]``). For axis ``a``,
``tables[offsets[a] + i]`` is the input index that output index ``i`` copies, or -1 for the
constant ``value``; ``in_strides`` are the input's element strides of the walked axes. Sizes
and table entries are checked before the ``nogil`` loop. Threads split the output rows (all
axes but the last); results do not depend on the thread count.
"""

from cython.parallel cimport prange

ctypedef fused scalar_t:
    float
    int

cdef enum:
    MAX_RANK = 8


cdef void _row(const scalar_t* src, scalar_t* dst, Py_ssize_t rank,
               const long long* shape, const long long* strides, const long long* tables,
               const long long* offsets, Py_ssize_t inner, scalar_t value,
               Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t a, i, k, rem = row, base = 0, idx, last = shape[rank - 1]
    cdef bint fill = False
    cdef scalar_t* out = dst + row * last * inner
    cdef const long long* table = tables + offsets[rank - 1]
    for a in range(rank - 2, -1, -1):
        idx = tables[offsets[a] + rem % shape[a]]
        rem = rem // shape[a]
        if idx < 0:
            fill = True
        base = base + idx * strides[a]
    if fill:
        for i in range(last * inner):
            out[i] = value
        return
    for i in range(last):
        idx = table[i]
        if idx < 0:
            for k in range(inner):
                out[i * inner + k] = value
        else:
            idx = base + idx * strides[rank - 1]
            for k in range(inner):
                out[i * inner + k] = src[idx + k]


def pad(const scalar_t[::1] src, scalar_t[::1] dst, const long long[::1] out_shape,
        const long long[::1] in_shape, const long long[::1] in_strides,
        const long long[::1] tables, Py_ssize_t inner, scalar_t value, int num_thread=1):
    """Fill ``dst`` (``prod(out_shape) * inner`` elements) from ``src`` via the tables."""
    cdef Py_ssize_t rank = out_shape.shape[0], a, i, rows = 1, total = 0, reach = 0
    cdef long long offsets[MAX_RANK]
    if rank < 1 or rank > MAX_RANK or in_shape.shape[0] != rank or in_strides.shape[0] != rank:
        raise ValueError(f"rank must be 1..{MAX_RANK} for all shapes, got {rank}")
    if inner < 1 or min(out_shape) < 1 or min(in_shape) < 1:
        raise ValueError(f"sizes must be positive: {list(out_shape)}, {list(in_shape)}")
    for a in range(rank):
        offsets[a] = total
        total += out_shape[a]
        reach += (in_shape[a] - 1) * in_strides[a]
        if a < rank - 1:
            rows *= out_shape[a]
    if tables.shape[0] < total or dst.shape[0] < rows * out_shape[rank - 1] * inner:
        raise ValueError(f"tables ({tables.shape[0]}) or dst ({dst.shape[0]}) too small")
    if min(in_strides) < 0 or src.shape[0] < reach + inner:
        raise ValueError(f"src ({src.shape[0]}) too small for strides {list(in_strides)}")
    for a in range(rank):
        for i in range(out_shape[a]):
            if tables[offsets[a] + i] >= in_shape[a]:
                raise ValueError(f"table entry {tables[offsets[a] + i]} of axis {a} too large")
    cdef const scalar_t* s = &src[0]
    cdef scalar_t* d = &dst[0]
    cdef const long long* sh = &out_shape[0]
    cdef const long long* st = &in_strides[0]
    cdef const long long* tb = &tables[0]
    cdef const long long* of = offsets
    cdef Py_ssize_t r
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            _row(s, d, rank, sh, st, tb, of, inner, value, r)
