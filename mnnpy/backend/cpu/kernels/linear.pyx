# cython: language_level=3
"""A GEMM on row-major matrices with B in 16-column panels (MNN's MNNPackedMatMul role).

``D[m][n] = clamp(bias[n] + sum_k A[m][k] W(n, k), lo, hi)`` for ``m < M``, ``n < N``; columns
``N <= n < Nz`` of D are written as zeros. A is read in place (``lda`` floats per row), D is
written in place (``ldd``); W is ``[ceil(Nz/16)][K][16]`` panels
(``CPUConvolutionGemm.pack_weight``) and bias ``16 * ceil(Nz/16)`` values or none. This is
both a MatMul with a packed B and a 1x1 convolution on ``[M, C, 1, 1]``, whose NC4HW4 storage
is row-major with ``4 * ceil(C/4)`` floats per row (Nz then covers the padding lanes).

The C kernels are in ``linear_kernels.h`` (AVX-512, AVX2, portable C; the ISA ``gemm.set_isa``
chose); the NumPy reference is in ``tests/kernels/test_linear_kernels.py``. Threads take
contiguous column chunks (multiples of 32) or row chunks (multiples of 10), whichever splits
the work more evenly; every value is one FMA chain over k in increasing order, the same as the
NC4HW4 GEMM's, so results do not depend on the thread count or on which GEMM ran. ``act`` (a
UnaryOp code of ``gemm.FUSED_ACTS``, -1 for none) applies that activation to each micro-kernel
tile right after it is written (in L1), with the UnaryOp's own kernel, as the NC4HW4 GEMM does for
a convolution fused with its activation (``executions/conv_activation.py``).
"""

from cython.parallel cimport prange

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall, cdiv, current_isa

from mnnpy.backend.cpu.kernels.gemm import FUSED_ACTS


cdef LinearPlan plan_linear(Py_ssize_t M, Py_ssize_t K, Py_ssize_t N, Py_ssize_t Nz,
                            int num_thread) noexcept nogil:
    """Sizes and the thread split (``num_thread`` items at most, each a row x column chunk)."""
    cdef LinearPlan g
    cdef Py_ssize_t ur = cdiv(M, 10), uc = cdiv(Nz, 32), t = num_thread, nr, nc
    g.M, g.K, g.N, g.Nz = M, K, N, Nz
    g.rows, g.cols, g.nr, g.nc = M, Nz, 1, 1
    g.act = -1
    if t > 1:
        nr, nc = min(t, ur), min(t, uc)
        # the split whose busiest thread has the least work; a tie halves the larger operand
        if cdiv(ur, nr) * uc < cdiv(uc, nc) * ur or (
                cdiv(ur, nr) * uc == cdiv(uc, nc) * ur and M > Nz):
            g.rows = cdiv(ur, nr) * 10
            g.nr = cdiv(M, g.rows)
        else:
            g.cols = cdiv(uc, nc) * 32
            g.nc = cdiv(Nz, g.cols)
    return g


cdef void linear_item(const LinearPlan* g, const float* a, Py_ssize_t lda, const float* w,
                      const float* bias, float* d, Py_ssize_t ldd, float lo, float hi,
                      Py_ssize_t it) noexcept nogil:
    """Work item ``it`` of ``g`` (row chunk ``it // nc``, column chunk ``it % nc``)."""
    cdef Py_ssize_t m0 = (it // g.nc) * g.rows, o0 = (it % g.nc) * g.cols
    cdef Py_ssize_t nz = min(g.cols, g.Nz - o0), rows = min(g.rows, g.M - m0)
    mnnpy_linear_act(current_isa(), a + m0 * lda, lda, rows, g.K, w + o0 * g.K,
                     bias + o0 if bias != NULL else NULL, d + m0 * ldd + o0, ldd, g.N - o0, nz,
                     lo, hi, g.act)


cdef void linear_run(const LinearPlan* g, const float* a, Py_ssize_t lda, const float* w,
                     const float* bias, float* d, Py_ssize_t ldd, float lo, float hi,
                     int num_thread) noexcept nogil:
    """All items of ``g``, over ``num_thread`` threads (no parallel region for one item)."""
    cdef Py_ssize_t it, items = g.nr * g.nc
    if items == 1 or num_thread == 1:
        for it in range(items):
            linear_item(g, a, lda, w, bias, d, ldd, lo, hi, it)
    else:
        for it in prange(items, num_threads=num_thread, schedule="static"):
            linear_item(g, a, lda, w, bias, d, ldd, lo, hi, it)


cdef LinearPlan _checked(const float[::1] a, Py_ssize_t lda, Py_ssize_t rows, Py_ssize_t k,
                         const float[::1] weight, const float[::1] bias, float[::1] dst,
                         Py_ssize_t ldd, Py_ssize_t n, Py_ssize_t nz, int num_thread,
                         int act) except *:
    if act != -1 and act not in FUSED_ACTS:
        raise ValueError(f"activation {act} cannot be fused")
    if min(rows, k, n, num_thread) < 1 or nz < n or nz > 16 * cdiv(n, 16) or lda < k or ldd < nz:
        raise ValueError(f"bad sizes: rows {rows}, k {k}, n {n}, nz {nz}, lda {lda}, ldd {ldd}, "
                         f"num_thread {num_thread}")
    cdef Py_ssize_t n16 = cdiv(nz, 16)
    if (a.shape[0] < (rows - 1) * lda + k or weight.shape[0] < n16 * 16 * k
            or bias.shape[0] not in (0, n16 * 16) or dst.shape[0] < (rows - 1) * ldd + nz):
        raise ValueError(
            f"buffers too small: a {a.shape[0]}, weight {weight.shape[0]}, bias "
            f"{bias.shape[0]} (0 or {n16 * 16}), dst {dst.shape[0]} for rows {rows}, k {k}, "
            f"n {n}, nz {nz}, lda {lda}, ldd {ldd}")
    cdef LinearPlan g = plan_linear(rows, k, n, nz, num_thread)
    g.act = act
    return g


def linear(const float[::1] a, Py_ssize_t lda, Py_ssize_t rows, Py_ssize_t k,
           const float[::1] weight, const float[::1] bias, float[::1] dst, Py_ssize_t ldd,
           Py_ssize_t n, Py_ssize_t nz, float lo, float hi, int num_thread=1, int act=-1):
    """The GEMM of the module docstring (``bias`` empty for none), checked, on ``num_thread``."""
    cdef LinearPlan g = _checked(a, lda, rows, k, weight, bias, dst, ldd, n, nz, num_thread, act)
    cdef const float* b = &bias[0] if bias.shape[0] else NULL
    with nogil:
        linear_run(&g, &a[0], lda, &weight[0], b, &dst[0], ldd, lo, hi, num_thread)


cdef class LinearCall(KernelCall):
    """``linear`` on fixed buffers (``bind_linear``)."""
    cdef LinearPlan g
    cdef Py_ssize_t lda, ldd

    cdef void run(self) noexcept:
        with nogil:
            linear_run(&self.g, self.s, self.lda, self.w, self.b, self.d, self.ldd, self.lo,
                       self.hi, self.num_thread)


def bind_linear(const float[::1] a, Py_ssize_t lda, Py_ssize_t rows, Py_ssize_t k,
                const float[::1] weight, const float[::1] bias, float[::1] dst, Py_ssize_t ldd,
                Py_ssize_t n, Py_ssize_t nz, float lo, float hi, int num_thread=1, int act=-1):
    """``linear`` on these buffers, checked and planned now: a ``LinearCall`` that runs it
    when called with no arguments (a session's prepared step, ``Execution.bind``)."""
    cdef LinearCall call = LinearCall.__new__(LinearCall)
    call.g = _checked(a, lda, rows, k, weight, bias, dst, ldd, n, nz, num_thread, act)
    call.buffers = (a, weight, bias, dst)  # alive as long as the pointers below
    call.s, call.w, call.d = &a[0], &weight[0], &dst[0]
    call.b = &bias[0] if bias.shape[0] else NULL
    call.lda, call.ldd, call.lo, call.hi, call.num_thread = lda, ldd, lo, hi, num_thread
    return call
