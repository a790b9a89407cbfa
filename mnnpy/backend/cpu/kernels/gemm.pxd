# cython: language_level=3
cdef int current_isa() noexcept nogil
