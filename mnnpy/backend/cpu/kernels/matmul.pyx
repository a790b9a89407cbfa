# cython: language_level=3
"""MatMul / BatchMatMul / InnerProduct on the NC4HW4 GEMM micro-kernels (``gemm_kernels.h``).

Plain row-major operands: ``a`` holds ``na`` matrices ``A[M][K]`` (``[K][M]`` when
``transpose_a``), ``b`` holds ``nbb`` matrices ``B[K][N]`` (``[N][K]`` when ``transpose_b``), or,
with ``packed_b``, one weight already in the GEMM's ``[ceil(N/16)][K][16]`` panels. Output
matrix ``i < nb`` is ``A[a_idx[i]] @ B[b_idx[i]] + bias`` (broadcast batch dims flattened by the
caller). ``bias`` holds 0 (none), 1 (broadcast) or ``N`` values.

Per run, in scratch: the A rows are packed as GEMM input panels (pixels = rows of A), B as
16-column weight panels (unless ``packed_b``), the GEMM writes ``[ceil(N/4)][rows][4]`` panels,
and those are copied out row by row. When every output uses the same B, all ``nb * M`` rows form
one GEMM (full 16-row micro-kernel blocks for small ``M``). Every phase is an OpenMP loop over
``num_thread`` threads; each output value is one fixed FMA chain over k, so results do not
depend on the thread count. Sizes and indices are checked before ``nogil``.
"""

from cython.parallel cimport prange
from libc.string cimport memcpy

from mnnpy.backend.cpu.kernels.gemm cimport cdiv, current_isa, mnnpy_gemm_c4, split_work


cdef extern from "math.h" nogil:
    float INFINITY


cdef struct MM:
    Py_ssize_t nb, M, K, N, na, nbb, K4, N4, N16, G, P
    Py_ssize_t tile, ntile, nchunk, cp, items
    Py_ssize_t a_size, w_size, d_size, bias_size


cdef MM _plan(tuple dims, bint packed_b, Py_ssize_t tile, int num_thread) except *:
    cdef MM g
    cdef Py_ssize_t want
    g.nb, g.M, g.K, g.N, g.na, g.nbb = dims
    if min(g.nb, g.M, g.K, g.N, g.na, g.nbb) < 1 or tile < 1 or num_thread < 1:
        raise ValueError(f"sizes, tile and threads must be positive, got dims {dims!r}, "
                         f"tile {tile}, num_thread {num_thread}")
    if packed_b and g.nbb != 1:
        raise ValueError(f"a packed B is one matrix, got nbb {g.nbb}")
    g.K4, g.N4, g.N16 = cdiv(g.K, 4), cdiv(g.N, 4), cdiv(g.N, 16)
    g.G = 1 if g.nbb == 1 else g.nb  # groups: one GEMM per distinct B use
    g.P = g.nb * g.M // g.G
    want = cdiv(2 * num_thread, g.G)
    g.tile, g.ntile, g.nchunk, g.cp = split_work(g.P, g.N, tile, want)
    g.items = g.G * g.ntile * g.nchunk
    g.a_size = g.nb * g.K4 * 4 * g.M
    g.w_size = 0 if packed_b else g.nbb * g.N16 * 16 * g.K
    g.d_size = g.nb * g.N4 * 4 * g.M
    g.bias_size = g.N16 * 16
    return g


def scratch_size(tuple dims, bint packed_b, Py_ssize_t tile, int num_thread=1):
    """Floats of scratch ``matmul`` needs; ``dims = (nb, M, K, N, na, nbb)``."""
    cdef MM g = _plan(dims, packed_b, tile, num_thread)
    return g.a_size + g.w_size + g.d_size + g.bias_size


def matmul(const float[::1] a, const float[::1] b, float[::1] out, const float[::1] bias,
           float[::1] scratch, const Py_ssize_t[::1] a_idx, const Py_ssize_t[::1] b_idx,
           tuple dims, bint transpose_a, bint transpose_b, bint packed_b, Py_ssize_t tile,
           int num_thread=1):
    """``out[i] = A[a_idx[i]] @ B[b_idx[i]] + bias`` for ``i < nb`` (see the module docstring).

    ``scratch`` needs ``scratch_size(dims, packed_b, tile, num_thread)`` floats.
    """
    cdef MM g = _plan(dims, packed_b, tile, num_thread)
    cdef Py_ssize_t need = g.a_size + g.w_size + g.d_size + g.bias_size, i
    cdef Py_ssize_t b_need = g.N16 * 16 * g.K if packed_b else g.nbb * g.K * g.N
    if (a.shape[0] < g.na * g.M * g.K or b.shape[0] < b_need
            or out.shape[0] < g.nb * g.M * g.N or scratch.shape[0] < need
            or a_idx.shape[0] < g.nb or b_idx.shape[0] < g.nb
            or bias.shape[0] not in (0, 1, g.N)):
        raise ValueError(
            f"buffers too small: a {a.shape[0]}, b {b.shape[0]}, out {out.shape[0]}, bias "
            f"{bias.shape[0]}, scratch {scratch.shape[0]} (needs {need}), indices "
            f"{a_idx.shape[0]}/{b_idx.shape[0]} for dims {dims!r}")
    for i in range(g.nb):
        if not (0 <= a_idx[i] < g.na and 0 <= b_idx[i] < g.nbb):
            raise ValueError(f"batch index {i}: a_idx {a_idx[i]}, b_idx {b_idx[i]} out of "
                             f"range for dims {dims!r}")
    cdef float* ap = &scratch[0]
    cdef float* wp = ap + g.a_size
    cdef float* dp = wp + g.w_size
    cdef float* bp = dp + g.d_size
    cdef const float* bias_p = &bias[0] if bias.shape[0] else NULL
    cdef Py_ssize_t nbias = bias.shape[0]
    cdef const float* w = &b[0]
    if not packed_b:
        w = wp
    with nogil:
        for i in range(g.bias_size):
            bp[i] = 0.0 if i >= g.N or nbias == 0 else bias_p[0 if nbias == 1 else i]
        _pack_a(&g, &a[0], &a_idx[0], transpose_a, ap, num_thread)
        if not packed_b:
            _pack_b(&g, &b[0], transpose_b, wp, num_thread)
        _gemm(&g, ap, w, &b_idx[0], bp if nbias else NULL, dp,
              num_thread)
        _unpack(&g, dp, &out[0], num_thread)


cdef inline Py_ssize_t _at(const MM* g, Py_ssize_t r, Py_ssize_t blocks) noexcept nogil:
    """Offset of row ``r`` (of all ``nb * M``) in a ``[group][blocks][P][4]`` panel (the
    stride between its 4-value blocks is ``4 * P``); returned, not through a pointer, so
    prange makes the result thread-private."""
    if g.G == 1:
        return 4 * r
    return (r // g.M) * blocks * 4 * g.M + 4 * (r % g.M)


cdef void _pack_a(const MM* g, const float* a, const Py_ssize_t* a_idx, bint ta, float* t,
                  int num_thread) noexcept nogil:
    cdef Py_ssize_t r, k, q, m, st = 4 * g.P
    cdef const float* s
    cdef float* d
    for r in prange(g.nb * g.M, num_threads=num_thread, schedule="static"):
        m = r % g.M
        d = t + _at(g, r, g.K4)
        if ta:  # column m of a [K][M] matrix
            s = a + a_idx[r // g.M] * g.M * g.K + m
            for k in range(g.K):
                d[(k >> 2) * st + (k & 3)] = s[k * g.M]
        else:  # row m: its 4-value runs are the panel's
            s = a + a_idx[r // g.M] * g.M * g.K + m * g.K
            for q in range(g.K >> 2):
                memcpy(d + q * st, s + 4 * q, 16)
            for k in range(g.K & ~3, g.K):
                d[(k >> 2) * st + (k & 3)] = s[k]


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


cdef void _gemm(const MM* g, const float* a, const float* w, const Py_ssize_t* b_idx,
                const float* bias, float* d, int num_thread) noexcept nogil:
    cdef Py_ssize_t it, grp, piece, c, p0, o0, st = 4 * g.P
    cdef int isa = current_isa()
    for it in prange(g.items, num_threads=num_thread, schedule="dynamic"):
        piece = it // g.nchunk
        c = it % g.nchunk
        grp = piece // g.ntile
        p0 = (piece % g.ntile) * g.tile
        o0 = c * g.cp * 16
        mnnpy_gemm_c4(isa, a + grp * g.K4 * st + 4 * p0, st, min(g.tile, g.P - p0), g.K,
                      w + b_idx[grp] * g.N16 * 16 * g.K + o0 * g.K,
                      bias + o0 if bias != NULL else NULL,
                      d + grp * g.N4 * st + (o0 // 4) * st + 4 * p0, st,
                      min(g.cp * 16, g.N - o0), -INFINITY, INFINITY)


cdef void _unpack(const MM* g, const float* d, float* out, int num_thread) noexcept nogil:
    cdef Py_ssize_t r, n, q, st = 4 * g.P
    cdef const float* s
    cdef float* o
    for r in prange(g.nb * g.M, num_threads=num_thread, schedule="static"):
        s = d + _at(g, r, g.N4)
        o = out + r * g.N
        for q in range(g.N >> 2):
            memcpy(o + 4 * q, s + q * st, 16)
        for n in range(g.N & ~3, g.N):
            o[n] = s[(n >> 2) * st + (n & 3)]
