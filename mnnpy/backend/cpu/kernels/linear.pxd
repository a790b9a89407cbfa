# cython: language_level=3
from libc.stddef cimport ptrdiff_t


# the C kernel of linear_kernels.h, for every module that runs the row-major GEMM
cdef extern from "linear_kernels.h" nogil:
    void mnnpy_linear(int isa, const float* a, ptrdiff_t lda, ptrdiff_t M, ptrdiff_t K,
                      const float* w, const float* bias, float* d, ptrdiff_t ldd, ptrdiff_t N,
                      ptrdiff_t Nz, float lo, float hi)
    void mnnpy_linear_act(int isa, const float* a, ptrdiff_t lda, ptrdiff_t M, ptrdiff_t K,
                          const float* w, const float* bias, float* d, ptrdiff_t ldd,
                          ptrdiff_t N, ptrdiff_t Nz, float lo, float hi, int act)


cdef struct LinearPlan:
    # M x K times K x N (Nz columns written); items: nr row chunks of ``rows`` x nc column
    # chunks of ``cols``; ``act``: a fused activation's UnaryOp code applied to each chunk once
    # written (``gemm.FUSED_ACTS``), -1 for none
    Py_ssize_t M, K, N, Nz, rows, cols, nr, nc
    int act

cdef LinearPlan plan_linear(Py_ssize_t M, Py_ssize_t K, Py_ssize_t N, Py_ssize_t Nz,
                            int num_thread) noexcept nogil

cdef void linear_item(const LinearPlan* g, const float* a, Py_ssize_t lda, const float* w,
                      const float* bias, float* d, Py_ssize_t ldd, float lo, float hi,
                      Py_ssize_t it) noexcept nogil

cdef void linear_run(const LinearPlan* g, const float* a, Py_ssize_t lda, const float* w,
                     const float* bias, float* d, Py_ssize_t ldd, float lo, float hi,
                     int num_thread) noexcept nogil
