# cython: language_level=3
"""The run loop of a session as one C loop over its prepared calls (``CPUBackend.call_loop``).

Bound kernels (``KernelCall``: the convolutions, UnaryOp, BinaryOp...) run through their C
``run`` method, with no Python call; any other zero-argument callable (an ``on_execute`` wrapper,
a cross-backend copy) is called as Python. Reference: ``mnnpy.execution.CallLoop``, the same loop
in Python, which this one must match call for call.
"""


from mnnpy.backend.cpu.kernels.gemm cimport KernelCall


cdef class CallLoop:
    """Calls ``calls`` in order when called; ``position`` is the index of the last one started
    (the one that raised, when a call raises: the error propagates unchanged)."""
    cdef tuple calls
    cdef bytes kernel  # per call: 1 for a KernelCall (run in C), 0 for a Python callable
    cdef public Py_ssize_t position

    def __init__(self, calls):
        self.calls = tuple(calls)
        for c in self.calls:
            if not callable(c):
                raise TypeError(f"not callable: {c!r}")
        self.kernel = bytes([isinstance(c, KernelCall) for c in self.calls])
        self.position = 0

    def __len__(self):
        return len(self.calls)

    def __call__(self):
        cdef tuple calls = self.calls
        cdef const unsigned char* kernel = self.kernel
        cdef Py_ssize_t i, n = len(calls)
        cdef object c
        for i in range(n):
            self.position = i
            c = calls[i]
            if kernel[i]:
                (<KernelCall>c).run()
            else:
                c()
