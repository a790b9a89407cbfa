# cython: language_level=3
"""Fused attention: ``out = softmax(q k * scale + mask) v`` over ``B`` matrix triples.

``q`` is ``B`` matrices ``[M][d]``; ``k`` is ``[n][d]`` each (``tk``, q k^T) or ``[d][n]``;
``v`` is ``[n][dv]``; ``out`` is ``[M][dv]``, all row-major float32. With ``k_heads`` h > 1,
k is ``[B / h][n][h][d]`` instead (the input of the Permute that made it ``[B / h][h][d][n]``;
``tk`` must be set): matrix ``b`` has rows of ``d`` at ``h * d`` floats apart. ``q_heads``,
``v_heads`` and ``out_heads`` do the same for q (``[B / h][M][h][d]``), v (``[B / h][n][h][dv]``)
and out (``[B / h][M][h][dv]``): the tensors before (after, for out) the head Permutes a graph
puts around its attention.

The scale multiplies the scores (or divides them, ``div``), as the BinaryOp it replaces; the mask
(``[mask_batches][M or 1][n]``, its batch and row strides ``mb`` and ``mr`` 0 where it broadcasts)
is added after; or, instead of a mask, an int32 condition of the same shapes selects a constant
``fill`` where it is non-zero (``fill_where`` 1) or zero (0), the scores elsewhere (a Select, as in
causal masks).

Per run, in scratch: every batch's k and v as the row-major GEMM's 16-column panels
(``linear_kernels.h``), then, for each block of ``rows`` query rows (one work item, one thread),
the block's scores in a per-thread tile: GEMM, scale, mask and ``mnnpy_softmax_row``
(``softmax_kernels.h``) on each row, then the tile times v's panels into the output rows. Only
one tile of scores per thread exists. A condition that fills -inf up to the end of rows (a causal
mask) ends each block's scores, softmax and product with v at its rows' last live column: the
filled scores are 0 after the softmax, so only those zero terms are left out. Each step is the
arithmetic of the op it replaces (the same FMA chains as MatMul, the same softmax row), so
results do not depend on the thread count.
NumPy reference: ``tests/kernels/test_sdpa_kernel.py``.
"""

from cython.parallel cimport prange, threadid
from libc.stddef cimport ptrdiff_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from mnnpy.backend.cpu.kernels.gemm cimport cdiv, current_isa
from mnnpy.backend.cpu.kernels.linear cimport mnnpy_linear


cdef extern from "math.h" nogil:
    float INFINITY

cdef extern from "softmax_kernels.h" nogil:
    void mnnpy_softmax_row(int isa, const float* src, float* dst, ptrdiff_t n)


cdef struct Att:
    Py_ssize_t B, M, n, d, dv, rows, nblk, kp, vp, tile
    bint tk, div, has_scale
    float scale, fill
    int fill_where  # -1: no condition; 1: fill where cond != 0; 0: where cond == 0
    Py_ssize_t mask_batches, mb, mr
    Py_ssize_t kh  # k's heads interleaved per row (1: contiguous matrices)
    Py_ssize_t qh, vh, oh  # the same for q, v and out
    Py_ssize_t rep  # query matrices per k / v matrix (grouped-query attention)
    Py_ssize_t* lim  # per query row, 1 + its last score not filled with -inf; NULL: all n


cdef Att _plan(tuple dims, int num_thread) except *:
    cdef Att g
    g.B, g.M, g.n, g.d, g.dv = dims
    if min(g.B, g.M, g.n, g.d, g.dv, num_thread) < 1:
        raise ValueError(f"sizes and threads must be positive, got dims {dims!r}, "
                         f"num_thread {num_thread}")
    # about 32K floats of scores per tile, in blocks of the micro-kernel's 10 rows
    g.rows = min(g.M, max(10, (32768 // g.n) // 10 * 10))
    g.nblk = cdiv(g.M, g.rows)
    g.kp = cdiv(g.n, 16) * 16 * g.d  # floats of one batch's k panels
    g.vp = cdiv(g.dv, 16) * 16 * g.n
    g.tile = g.rows * g.n
    g.lim = NULL
    g.rep = 1
    return g


def scratch_size(tuple dims, int num_thread=1):
    """Floats of scratch ``attention`` needs; ``dims = (B, M, n, d, dv)``."""
    cdef Att g = _plan(dims, num_thread)
    return g.B * (g.kp + g.vp) + num_thread * g.tile


def attention(const float[::1] q, const float[::1] k, const float[::1] v, const float[::1] mask,
              float[::1] out, float[::1] scratch, tuple dims, bint tk, float scale, bint div,
              bint has_scale, tuple mask_dims, int num_thread=1, const int[::1] cond=None,
              float fill=0, int fill_where=1, Py_ssize_t k_heads=1, Py_ssize_t q_heads=1,
              Py_ssize_t v_heads=1, Py_ssize_t out_heads=1, Py_ssize_t kv_rep=1):
    """The fused attention of the module docstring; ``mask`` empty for none, ``mask_dims`` =
    ``(mask_batches, mb, mr)`` for the mask or ``cond``; ``scratch`` needs
    ``scratch_size(dims, num_thread)`` floats. ``kv_rep`` r > 1: k and v hold ``B / r``
    matrices, matrix ``b`` of q reading ``b / r`` of them (grouped-query attention: the heads
    a graph repeats with an Expand before its MatMuls)."""
    cdef Att g = _plan(dims, num_thread)
    g.tk, g.scale, g.div, g.has_scale = tk, scale, div, has_scale
    g.mask_batches, g.mb, g.mr = mask_dims
    if kv_rep < 1 or g.B % kv_rep:
        raise ValueError(f"kv_rep {kv_rep} must divide {g.B} matrices")
    g.rep = kv_rep
    cdef Py_ssize_t kvb = g.B // kv_rep
    g.fill, g.fill_where = fill, -1
    if k_heads < 1 or kvb % k_heads or (k_heads > 1 and not tk):
        raise ValueError(f"k_heads {k_heads} must divide {kvb} matrices and come with tk")
    g.kh = k_heads
    for h, mats in ((q_heads, g.B), (v_heads, kvb), (out_heads, g.B)):
        if h < 1 or mats % h:
            raise ValueError(f"heads {h} must divide {mats} matrices")
    g.qh, g.vh, g.oh = q_heads, v_heads, out_heads
    cdef Py_ssize_t need = g.B * (g.kp + g.vp) + num_thread * g.tile
    cdef Py_ssize_t mneed = 0, msize = mask.shape[0]
    cdef const int* cp = NULL
    if cond is not None and cond.shape[0]:
        if msize:
            raise ValueError("a mask or a condition, not both")
        if fill_where not in (0, 1):
            raise ValueError(f"fill_where must be 0 or 1, got {fill_where}")
        g.fill_where, msize, cp = fill_where, cond.shape[0], &cond[0]
    if msize:
        if g.mask_batches not in (1, g.B) or g.mb < 0 or g.mr < 0:
            raise ValueError(f"mask dims {mask_dims!r} do not broadcast to scores "
                             f"{(g.B, g.M, g.n)!r}")
        mneed = (g.mask_batches - 1) * g.mb + (g.M - 1) * g.mr + g.n
    if (q.shape[0] < g.B * g.M * g.d or k.shape[0] < kvb * g.n * g.d
            or v.shape[0] < kvb * g.n * g.dv or out.shape[0] < g.B * g.M * g.dv
            or scratch.shape[0] < need or msize < mneed):
        raise ValueError(
            f"buffers too small: q {q.shape[0]}, k {k.shape[0]}, v {v.shape[0]}, out "
            f"{out.shape[0]}, mask / cond {msize} (needs {mneed}), scratch {scratch.shape[0]} "
            f"(needs {need}) for dims {dims!r}")
    cdef const float* mp = &mask[0] if mask.shape[0] else NULL
    cdef Py_ssize_t* lim = NULL
    if cp != NULL and fill == -INFINITY and (g.mask_batches == 1 or g.mb == 0):
        lim = <Py_ssize_t*>malloc(g.M * sizeof(Py_ssize_t))
        if lim == NULL:
            raise MemoryError()
    try:
        with nogil:
            if lim != NULL and _limits(&g, cp, lim):
                g.lim = lim  # causal: blocks of fewer rows, each up to its last live score
                g.rows = min(g.rows, _LIM_ROWS)
                g.nblk = cdiv(g.M, g.rows)
                g.tile = g.rows * g.n
            _run(&g, &q[0], &k[0], &v[0], mp, cp, &out[0], &scratch[0], num_thread)
    finally:
        free(lim)


# query rows per block when rows end early (causal masks): about 58% of a 128 x 128 mask's
# scores are then computed, against all of them in one block of 128 rows
cdef enum:
    _LIM_ROWS = 20


cdef bint _limits(const Att* g, const int* cond, Py_ssize_t* lim) noexcept nogil:
    """``lim[i]``: 1 + the last column of row ``i`` that the condition leaves (a filled -inf
    scores 0 after the softmax, so columns past it add nothing). False when no row ends early or
    a row is filled completely (then every score runs as before)."""
    cdef Py_ssize_t i, j
    cdef bint early = False
    cdef int filled = g.fill_where == 1
    for i in range(g.M):
        j = g.n
        while j > 0 and ((cond[i * g.mr + j - 1] != 0) == filled):
            j -= 1
        if j == 0:
            return False
        lim[i] = j
        early = early or j < g.n
    return early


cdef void _pack(const float* b, Py_ssize_t K, Py_ssize_t N, bint tb, Py_ssize_t ld,
                float* w) noexcept nogil:
    """``B[K][N]`` (``[N][K]`` when ``tb``), rows ``ld`` apart, as ``[ceil(N/16)][K][16]``
    panels, zero-padded."""
    cdef Py_ssize_t p, kk, j, n0, cols
    for p in range(cdiv(N, 16)):
        n0 = p * 16
        cols = min(16, N - n0)
        if tb:
            for kk in range(K):
                for j in range(cols):
                    w[kk * 16 + j] = b[(n0 + j) * ld + kk]
        else:
            for kk in range(K):
                memcpy(w + kk * 16, b + kk * ld + n0, cols * 4)
        if cols < 16:
            for kk in range(K):
                memset(w + kk * 16 + cols, 0, (16 - cols) * 4)
        w += 16 * K


cdef void _block(const Att* g, const float* q, const float* kp, const float* vp,
                 const float* mask, const int* cond, float* out, float* s, Py_ssize_t b,
                 Py_ssize_t r0, int isa) noexcept nogil:
    cdef Py_ssize_t rr = min(g.rows, g.M - r0), i, j, at, p, n = g.n
    cdef float* row
    cdef float* o
    cdef const float* m
    cdef const int* c
    if g.lim != NULL:  # the block's scores end at its rows' last live column
        n = 0
        for i in range(r0, r0 + rr):
            n = max(n, g.lim[i])
    mnnpy_linear(isa, _at(q, b, g.qh, g.M, g.d) + r0 * g.qh * g.d, g.qh * g.d, rr, g.d, kp,
                 NULL, s, g.n, n, n, -INFINITY, INFINITY)
    for i in range(rr):
        row = s + i * g.n
        if g.has_scale:
            if g.div:
                for j in range(n):
                    row[j] = row[j] / g.scale
            else:
                for j in range(n):
                    row[j] = row[j] * g.scale
        at = (b if g.mask_batches > 1 else 0) * g.mb + (r0 + i) * g.mr
        if mask != NULL:
            m = mask + at
            for j in range(n):
                row[j] = row[j] + m[j]
        elif cond != NULL:
            c = cond + at
            for j in range(n):
                if (c[j] != 0) == (g.fill_where == 1):
                    row[j] = g.fill
        mnnpy_softmax_row(isa, row, row, n)
    o = _at(out, b, g.oh, g.M, g.dv) + r0 * g.oh * g.dv
    if n == g.n:
        mnnpy_linear(isa, s, g.n, rr, g.n, vp, NULL, o, g.oh * g.dv, g.dv, g.dv, -INFINITY,
                     INFINITY)
        return
    for p in range(cdiv(g.dv, 16)):  # v's panels one by one: a panel holds all g.n rows of v
        mnnpy_linear(isa, s, g.n, rr, n, vp + p * 16 * g.n, NULL, o + p * 16, g.oh * g.dv,
                     min(16, g.dv - p * 16), min(16, g.dv - p * 16), -INFINITY, INFINITY)


cdef inline Py_ssize_t _k_ld(const Att* g) noexcept nogil:
    """Floats between k's rows: ``[n][kh][d]`` when ``tk``, else ``[d][n]``."""
    return g.kh * g.d if g.tk else g.n


cdef inline float* _at(const float* x, Py_ssize_t b, Py_ssize_t h, Py_ssize_t rows,
                       Py_ssize_t width) noexcept nogil:
    """Matrix ``b``'s first row: contiguous ``[rows][width]`` matrices (``h`` 1), or head
    ``b % h`` of the ``[rows][h][width]`` block ``b / h`` (its rows ``h * width`` apart)."""
    return <float*>x + (b // h) * rows * h * width + (b % h) * width


cdef void _run(const Att* g, const float* q, const float* k, const float* v, const float* mask,
               const int* cond, float* out, float* scratch, int num_thread) noexcept nogil:
    cdef float* kp = scratch
    cdef float* vp = scratch + g.B * g.kp
    cdef float* tiles = vp + g.B * g.vp
    cdef int isa = current_isa()
    cdef Py_ssize_t it, b
    if num_thread == 1:
        for b in range(g.B // g.rep):
            _pack(_at(k, b, g.kh, g.n, g.d), g.d, g.n, g.tk, _k_ld(g), kp + b * g.kp)
            _pack(_at(v, b, g.vh, g.n, g.dv), g.n, g.dv, False, g.vh * g.dv, vp + b * g.vp)
        for it in range(g.B * g.nblk):
            b = it // g.nblk
            _block(g, q, kp + (b // g.rep) * g.kp, vp + (b // g.rep) * g.vp, mask, cond, out,
                   tiles, b, (it % g.nblk) * g.rows, isa)
        return
    for it in prange(2 * (g.B // g.rep), num_threads=num_thread, schedule="static"):
        b = it // 2
        if it % 2 == 0:
            _pack(_at(k, b, g.kh, g.n, g.d), g.d, g.n, g.tk, _k_ld(g), kp + b * g.kp)
        else:
            _pack(_at(v, b, g.vh, g.n, g.dv), g.n, g.dv, False, g.vh * g.dv, vp + b * g.vp)
    for it in prange(g.B * g.nblk, num_threads=num_thread, schedule="static"):
        b = it // g.nblk
        _block(g, q, kp + (b // g.rep) * g.kp, vp + (b // g.rep) * g.vp, mask, cond, out,
               tiles + threadid() * g.tile, b, (it % g.nblk) * g.rows, isa)
