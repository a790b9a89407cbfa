# cython: language_level=3
"""MatMul / BatchMatMul / InnerProduct on the row-major GEMM (``linear_kernels.h``).

Plain row-major operands: ``a`` holds ``na`` matrices ``A[M][K]`` (``[K][M]`` when
``transpose_a``), ``b`` holds ``nbb`` matrices ``B[K][N]`` (``[N][K]`` when ``transpose_b``), or,
with ``packed_b``, one weight already in the GEMM's ``[ceil(N/16)][K][16]`` panels. Output
matrix ``i < nb`` is ``A[a_idx[i]] @ B[b_idx[i]] + bias`` (broadcast batch dims flattened by the
caller). ``bias`` holds 0 (none), 1 (broadcast) or ``N`` values.

The GEMM reads A's rows in place and writes the output rows in place. Per run, in scratch:
transposed A matrices as row-major copies, B as 16-column weight panels (unless ``packed_b``)
and the bias padded to the panels. When every output uses the same B and the A matrices are
consecutive, all ``nb * M`` rows are one GEMM (full micro-kernel blocks for small ``M``); else
each output is its own GEMM, the threads taking whole outputs when there are enough of them.
Every phase is an OpenMP loop over ``num_thread`` threads; each output value is one fixed FMA
chain over k (the NC4HW4 GEMM's), so results do not depend on the thread count. Sizes and
indices are checked before ``nogil``. ``tile`` is accepted for the callers and unused: the
row-major GEMM plans its own split.
"""

from cython.parallel cimport prange
from libc.string cimport memcpy

from mnnpy.backend.cpu.kernels.gemm cimport cdiv
from mnnpy.backend.cpu.kernels.linear cimport LinearPlan, linear_item, plan_linear


cdef extern from "math.h" nogil:
    float INFINITY


cdef struct MM:
    Py_ssize_t nb, M, K, N, na, nbb, N16
    bint ta, packed, one  # one: all rows one GEMM
    Py_ssize_t a_size, w_size, bias_size


cdef MM _plan(tuple dims, bint transpose_a, bint packed_b, Py_ssize_t tile,
              int num_thread) except *:
    cdef MM g
    g.nb, g.M, g.K, g.N, g.na, g.nbb = dims
    if min(g.nb, g.M, g.K, g.N, g.na, g.nbb) < 1 or tile < 1 or num_thread < 1:
        raise ValueError(f"sizes, tile and threads must be positive, got dims {dims!r}, "
                         f"tile {tile}, num_thread {num_thread}")
    if packed_b and g.nbb != 1:
        raise ValueError(f"a packed B is one matrix, got nbb {g.nbb}")
    g.N16 = cdiv(g.N, 16)
    g.ta, g.packed = transpose_a, packed_b
    g.a_size = g.na * g.M * g.K if transpose_a else 0
    g.w_size = 0 if packed_b else g.nbb * g.N16 * 16 * g.K
    g.bias_size = g.N16 * 16
    return g


def scratch_size(tuple dims, bint packed_b, Py_ssize_t tile, int num_thread=1,
                 bint transpose_a=True):
    """Floats of scratch ``matmul`` needs; ``dims = (nb, M, K, N, na, nbb)``."""
    cdef MM g = _plan(dims, transpose_a, packed_b, tile, num_thread)
    return g.a_size + g.w_size + g.bias_size


def matmul(const float[::1] a, const float[::1] b, float[::1] out, const float[::1] bias,
           float[::1] scratch, const Py_ssize_t[::1] a_idx, const Py_ssize_t[::1] b_idx,
           tuple dims, bint transpose_a, bint transpose_b, bint packed_b, Py_ssize_t tile,
           int num_thread=1):
    """``out[i] = A[a_idx[i]] @ B[b_idx[i]] + bias`` for ``i < nb`` (see the module docstring).

    ``scratch`` needs ``scratch_size(dims, packed_b, tile, num_thread, transpose_a)`` floats.
    """
    cdef MM g = _plan(dims, transpose_a, packed_b, tile, num_thread)
    cdef Py_ssize_t need = g.a_size + g.w_size + g.bias_size, i
    cdef Py_ssize_t b_need = g.N16 * 16 * g.K if packed_b else g.nbb * g.K * g.N
    if (a.shape[0] < g.na * g.M * g.K or b.shape[0] < b_need
            or out.shape[0] < g.nb * g.M * g.N or scratch.shape[0] < need
            or a_idx.shape[0] < g.nb or b_idx.shape[0] < g.nb
            or bias.shape[0] not in (0, 1, g.N)):
        raise ValueError(
            f"buffers too small: a {a.shape[0]}, b {b.shape[0]}, out {out.shape[0]}, bias "
            f"{bias.shape[0]}, scratch {scratch.shape[0]} (needs {need}), indices "
            f"{a_idx.shape[0]}/{b_idx.shape[0]} for dims {dims!r}")
    g.one = g.nbb == 1
    for i in range(g.nb):
        if not (0 <= a_idx[i] < g.na and 0 <= b_idx[i] < g.nbb):
            raise ValueError(f"batch index {i}: a_idx {a_idx[i]}, b_idx {b_idx[i]} out of "
                             f"range for dims {dims!r}")
        g.one = g.one and a_idx[i] == i
    cdef float* ap = &scratch[0]
    cdef float* wp = ap + g.a_size
    cdef float* bp = wp + g.w_size
    cdef const float* bias_p = &bias[0] if bias.shape[0] else NULL
    cdef Py_ssize_t nbias = bias.shape[0]
    cdef const float* w = &b[0]
    cdef const float* av = &a[0]
    if not packed_b:
        w = wp
    if transpose_a:
        av = ap
    with nogil:
        for i in range(g.bias_size):
            bp[i] = 0.0 if i >= g.N or nbias == 0 else bias_p[0 if nbias == 1 else i]
        if transpose_a:
            _transpose_a(&g, &a[0], ap, num_thread)
        if not packed_b:
            _pack_b(&g, &b[0], transpose_b, wp, num_thread)
        _gemm(&g, av, &a_idx[0], w, &b_idx[0], bp if nbias else NULL, &out[0], num_thread)


cdef void _transpose_a(const MM* g, const float* a, float* t, int num_thread) noexcept nogil:
    """Each ``[K][M]`` matrix of ``a`` as ``[M][K]`` in ``t``."""
    cdef Py_ssize_t r, k, m
    cdef const float* s
    cdef float* d
    for r in prange(g.na * g.M, num_threads=num_thread, schedule="static"):
        m = r % g.M
        s = a + (r // g.M) * g.M * g.K + m
        d = t + r * g.K
        for k in range(g.K):
            d[k] = s[k * g.M]


cdef void _pack_b(const MM* g, const float* b, bint tb, float* w, int num_thread) noexcept nogil:
    cdef Py_ssize_t it, k, j, n, cols
    cdef const float* s
    cdef float* d
    for it in prange(g.nbb * g.N16, num_threads=num_thread, schedule="static"):
        s = b + (it // g.N16) * g.K * g.N
        n = (it % g.N16) * 16
        cols = min(16, g.N - n)
        d = w + it * 16 * g.K
        if tb:  # rows n.. of a [N][K] matrix, each read in order
            for j in range(16):
                if j < cols:
                    for k in range(g.K):
                        d[k * 16 + j] = s[(n + j) * g.K + k]
                else:
                    for k in range(g.K):
                        d[k * 16 + j] = 0.0
        else:
            for k in range(g.K):
                memcpy(d + k * 16, s + k * g.N + n, cols * 4)
                for j in range(cols, 16):
                    d[k * 16 + j] = 0.0


cdef void _gemm(const MM* g, const float* a, const Py_ssize_t* a_idx, const float* w,
                const Py_ssize_t* b_idx, const float* bias, float* out,
                int num_thread) noexcept nogil:
    cdef LinearPlan p
    cdef Py_ssize_t it, i, items, wsize = g.N16 * 16 * g.K
    if g.one:  # every row against one B: a single GEMM over nb * M rows
        p = plan_linear(g.nb * g.M, g.K, g.N, g.N, num_thread)
        items = p.nr * p.nc
        if items == 1 or num_thread == 1:
            for it in range(items):
                linear_item(&p, a, g.K, w, bias, out, g.N, -INFINITY, INFINITY, it)
        else:
            for it in prange(items, num_threads=num_thread, schedule="static"):
                linear_item(&p, a, g.K, w, bias, out, g.N, -INFINITY, INFINITY, it)
        return
    # one GEMM per output; threads take whole outputs when there are enough of them
    p = plan_linear(g.M, g.K, g.N, g.N, 1 if g.nb >= num_thread else num_thread)
    items = p.nr * p.nc
    if num_thread == 1:
        for it in range(g.nb * items):
            i = it // items
            linear_item(&p, a + a_idx[i] * g.M * g.K, g.K, w + b_idx[i] * wsize, bias,
                        out + i * g.M * g.N, g.N, -INFINITY, INFINITY, it % items)
    else:
        for it in prange(g.nb * items, num_threads=num_thread, schedule="static"):
            i = it // items
            linear_item(&p, a + a_idx[i] * g.M * g.K, g.K, w + b_idx[i] * wsize, bias,
                        out + i * g.M * g.N, g.N, -INFINITY, INFINITY, it % items)
