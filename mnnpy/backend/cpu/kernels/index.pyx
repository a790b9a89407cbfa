# cython: language_level=3
"""Index-driven kernels on plain buffers: gather, gather_nd, one_hot, top_k.

NumPy references: ``mnnpy/ops/gather.py``, ``one_hot.py`` and ``topk.py``. ``gather`` and
``gather_nd`` move 4-byte elements (callers pass float32 data viewed as int32). Indices are
checked before anything is written: negative ones count from the end, others out of range make
the function return the position of the first bad index (-1 when all are valid). Each output row
is written by one thread, so results do not depend on the thread count.
"""

from cython.parallel cimport prange
from libc.string cimport memcpy

ctypedef fused scalar_t:
    float
    int


cdef Py_ssize_t _check(const int* idx, Py_ssize_t n, Py_ssize_t limit) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if idx[i] < -limit or idx[i] >= limit:
            return i
    return -1


def gather(const int[::1] src, const int[::1] idx, int[::1] dst, Py_ssize_t outer,
           Py_ssize_t axis, Py_ssize_t inner, int num_thread=1):
    """``dst[o][j][:] = src[o][idx[j]][:]`` for ``src`` as ``[outer][axis][inner]``.

    Returns:
        -1, or the position of the first index outside ``[-axis, axis)`` (nothing written).
    """
    cdef Py_ssize_t n = idx.shape[0], t, o, j, k
    if outer < 0 or axis < 0 or inner < 0:
        raise ValueError("negative size")
    if src.shape[0] < outer * axis * inner or dst.shape[0] < outer * n * inner:
        raise ValueError(f"buffers too small for [{outer}][{axis}][{inner}] and {n} indices")
    cdef Py_ssize_t bad = _check(&idx[0], n, axis) if n else -1
    if bad >= 0 or outer * n * inner == 0:
        return bad
    with nogil:
        for t in prange(outer * n, num_threads=num_thread, schedule="static"):
            o = t // n
            j = t % n
            k = idx[j] + axis if idx[j] < 0 else idx[j]
            memcpy(&dst[t * inner], &src[(o * axis + k) * inner], inner * sizeof(int))
    return -1


cdef Py_ssize_t nd_rows(const int[::1] idx, const Py_ssize_t[::1] dims, Py_ssize_t slice_size,
                        Py_ssize_t table, Py_ssize_t rows, str what) except -1:
    """The number of index rows of a GatherND / ScatterND, after checking the buffers.

    ``idx`` holds rows of ``d = len(dims)`` indices into a ``[*dims][slice_size]`` table of
    ``table`` values; the other side has ``rows`` values, ``slice_size`` per index row.
    """
    cdef Py_ssize_t d = dims.shape[0], n, j, total = slice_size
    if d == 0 or idx.shape[0] % d or slice_size < 0:
        raise ValueError(f"bad index rows: {idx.shape[0]} values for depth {d}")
    n = idx.shape[0] // d
    for j in range(d):
        total *= dims[j]
    if table < total or rows < n * slice_size:
        raise ValueError(f"buffers too small for the {what} slices")
    return n


cdef Py_ssize_t nd_first_bad(const int[::1] idx, const Py_ssize_t[::1] dims) noexcept:
    """-1, or the flat position in ``idx`` of the first index outside ``[-dim, dim)``."""
    cdef Py_ssize_t d = dims.shape[0], i
    for i in range(idx.shape[0]):
        if idx[i] < -dims[i % d] or idx[i] >= dims[i % d]:
            return i
    return -1


def gather_nd(const int[::1] src, const int[::1] idx, int[::1] dst, const Py_ssize_t[::1] dims,
              Py_ssize_t slice_size, int num_thread=1):
    """``dst[i][:] = src[idx[i][0], ..., idx[i][d - 1]][:]``, ``d = len(dims)``.

    ``src`` is ``[*dims][slice_size]``; ``idx`` holds ``n`` rows of ``d`` indices.

    Returns:
        -1, or the flat position in ``idx`` of the first index out of range (nothing written).
    """
    cdef Py_ssize_t d = dims.shape[0], i, j, v, off
    cdef Py_ssize_t n = nd_rows(idx, dims, slice_size, src.shape[0], dst.shape[0], "gathered")
    i = nd_first_bad(idx, dims)
    if i >= 0:
        return i
    with nogil:
        for i in prange(n, num_threads=num_thread, schedule="static"):
            off = 0
            for j in range(d):
                v = idx[i * d + j]
                off = off * dims[j] + (v + dims[j] if v < 0 else v)
            memcpy(&dst[i * slice_size], &src[off * slice_size], slice_size * sizeof(int))
    return -1


ctypedef fused index_t:
    float
    int


def one_hot(const index_t[::1] idx, scalar_t on, scalar_t off, scalar_t[::1] dst,
            Py_ssize_t outer, Py_ssize_t depth, Py_ssize_t inner):
    """``dst[o][d][i] = on if idx[o][i] == d else off``.

    Float indices are truncated toward zero (-0.5 selects 0); negative ones and NaN match nothing.
    """
    cdef Py_ssize_t o, d, i, k
    cdef index_t v
    if outer < 0 or depth < 0 or inner < 0:
        raise ValueError("negative size")
    if idx.shape[0] < outer * inner or dst.shape[0] < outer * depth * inner:
        raise ValueError("buffers too small")
    with nogil:
        for o in range(outer):
            for i in range(inner):
                v = idx[o * inner + i]
                # the range test comes first: casting NaN or a huge float is undefined
                k = <Py_ssize_t>v if (v > -1 and v < depth) else -1
                for d in range(depth):
                    dst[(o * depth + d) * inner + i] = on if k == d else off


cdef inline bint _before(const scalar_t* row, int a, int b, bint largest) noexcept nogil:
    # the total order of the result: better value first, then the lower index
    if row[a] != row[b]:
        return row[a] > row[b] if largest else row[a] < row[b]
    return a < b


cdef void _sift(const scalar_t* row, int* heap, Py_ssize_t size, Py_ssize_t i,
                bint largest) noexcept nogil:
    # heap root is the worst kept element
    cdef Py_ssize_t c
    cdef int tmp
    while True:
        c = 2 * i + 1
        if c >= size:
            return
        if c + 1 < size and _before(row, heap[c], heap[c + 1], largest):
            c += 1
        if not _before(row, heap[i], heap[c], largest):
            return
        tmp = heap[i]
        heap[i] = heap[c]
        heap[c] = tmp
        i = c


def top_k(const scalar_t[::1] src, scalar_t[::1] values, int[::1] indices, Py_ssize_t rows,
          Py_ssize_t n, Py_ssize_t k, bint largest=True, int num_thread=1):
    """The ``k`` best of each row of ``n``, best first; ties keep the lower index first."""
    if rows < 0 or n < 0 or not 0 <= k <= n:
        raise ValueError(f"bad sizes: rows {rows}, n {n}, k {k}")
    if src.shape[0] < rows * n or values.shape[0] < rows * k or indices.shape[0] < rows * k:
        raise ValueError("buffers too small")
    cdef Py_ssize_t r, i, m
    cdef int* heap
    cdef const scalar_t* row
    cdef int tmp
    if rows * k == 0:
        return
    with nogil:
        for r in prange(rows, num_threads=num_thread, schedule="static"):
            row = &src[r * n]
            heap = &indices[r * k]  # the output row holds the heap, then the sorted result
            for i in range(k):
                heap[i] = <int>i
            for i in range(k // 2 - 1, -1, -1):
                _sift(row, heap, k, i, largest)
            for i in range(k, n):
                if _before(row, <int>i, heap[0], largest):
                    heap[0] = <int>i
                    _sift(row, heap, k, 0, largest)
            for m in range(k - 1, 0, -1):  # heap sort: the worst goes last
                tmp = heap[0]
                heap[0] = heap[m]
                heap[m] = tmp
                _sift(row, heap, m, 0, largest)
            for i in range(k):
                values[r * k + i] = row[heap[i]]


ctypedef fused cond_t:
    float
    int
    unsigned char


def where(const cond_t[::1] src, int[::1] dst, const Py_ssize_t[::1] shape):
    """Row-major coordinates (one row of ``len(shape)`` per element) of the elements > 0.

    Returns:
        The number of rows written; nothing is written past ``dst``'s end.
    """
    cdef Py_ssize_t rank = shape.shape[0], n = 1, i, j, rem, rows = 0, cap
    for j in range(rank):
        n *= shape[j]
    if src.shape[0] < n:
        raise ValueError(f"source has {src.shape[0]} elements, shape needs {n}")
    cap = dst.shape[0] // rank if rank else 0
    with nogil:
        for i in range(n):
            if not src[i] > 0:
                continue
            if rows < cap:
                rem = i
                for j in range(rank - 1, -1, -1):
                    dst[rows * rank + j] = <int>(rem % shape[j])
                    rem = rem // shape[j]
            rows += 1
    return rows
