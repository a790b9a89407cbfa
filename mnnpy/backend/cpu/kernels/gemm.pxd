# cython: language_level=3
from libc.stddef cimport ptrdiff_t


# the C kernels of gemm_kernels.h, for every module that runs the GEMM
cdef extern from "gemm_kernels.h" nogil:
    int mnnpy_isa_best()
    void mnnpy_gemm_c4(int isa, const float* a, ptrdiff_t a_stride, ptrdiff_t P, ptrdiff_t K,
                       const float* w, const float* bias, float* d, ptrdiff_t d_stride,
                       ptrdiff_t oc, float lo, float hi)
    void mnnpy_gemm_c4_panels(int isa, const float* a, const ptrdiff_t* koff, ptrdiff_t P,
                              ptrdiff_t K, const float* w, const float* bias, float* d,
                              ptrdiff_t d_stride, ptrdiff_t oc, float lo, float hi)
    void mnnpy_im2col(const float* src, ptrdiff_t ic, ptrdiff_t ih, ptrdiff_t iw,
                      ptrdiff_t ow, const ptrdiff_t* win, ptrdiff_t p0, ptrdiff_t n,
                      float* t, ptrdiff_t T)

# gemm_bcast512.h's blocking (direct 1x1 on small maps; tiles and Winograd positions, K >= 128)
cdef extern from "gemm_bcast512.h" nogil:
    void mnnpy_gemm_c4_bcast(int isa, const float* a, ptrdiff_t a_stride, ptrdiff_t P,
                             ptrdiff_t K, const float* w, const float* bias, float* d,
                             ptrdiff_t d_stride, ptrdiff_t oc, float lo, float hi)
    void mnnpy_gemm_c4_tile(int isa, const float* a, ptrdiff_t a_stride, const ptrdiff_t* koff,
                            ptrdiff_t P, ptrdiff_t K, const float* w, const float* bias, float* d,
                            ptrdiff_t d_stride, ptrdiff_t oc, float lo, float hi)

cdef int current_isa() noexcept nogil


cdef inline Py_ssize_t cdiv(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    # ceil(a / b) for a >= 0, b > 0 (the kernels' block and tile counts)
    return (a + b - 1) // b

cdef (Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) split_work(
        Py_ssize_t pixels, Py_ssize_t channels, Py_ssize_t tile, Py_ssize_t want) noexcept


cdef class KernelCall:
    # a kernel with its buffers, sizes and threads fixed, run by run() (or by calling it):
    # the prepared steps of Execution.bind; subclasses add their plan and override run()
    cdef const float* s
    cdef float* d
    cdef const float* w
    cdef const float* b
    cdef float* t
    cdef float lo, hi
    cdef int num_thread
    cdef Py_ssize_t* last  # per thread, for subclasses that reuse scratch between items
    cdef object buffers  # what s, d, w, b and t point into, kept alive
    cdef void run(self) noexcept
