# cython: language_level=3
cdef int current_isa() noexcept nogil
cdef (Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) split_work(
        Py_ssize_t pixels, Py_ssize_t channels, Py_ssize_t tile, Py_ssize_t want) noexcept
