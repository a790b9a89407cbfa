# cython: language_level=3
# Index checks shared by gather_nd (index.pyx) and scatter_nd (elements.pyx).
cdef Py_ssize_t nd_rows(const int[::1] idx, const Py_ssize_t[::1] dims, Py_ssize_t slice_size,
                        Py_ssize_t table, Py_ssize_t rows, str what) except -1
cdef Py_ssize_t nd_first_bad(const int[::1] idx, const Py_ssize_t[::1] dims) noexcept
