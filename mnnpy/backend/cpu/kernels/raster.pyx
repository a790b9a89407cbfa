# cython: language_level=3
"""Strided region copies (MNN's raster regions); ``regions.apply_reference`` is the NumPy twin.

A region is one int64 row ``[src_off, dst_off, n0, n1, n2, ss0, ss1, ss2, ds0, ds1, ds2]``::

    for i, j, k in ndindex(n0, n1, n2):
        dst[dst_off + i*ds0 + j*ds1 + k*ds2] = src[src_off + i*ss0 + j*ss1 + k*ss2]

in elements of the buffers (storage order, so NC4HW4 lanes are addressed directly). Elements
are moved as raw bits of their size, so any dtype works (both buffers must have the same item
size); the buffers are C-contiguous arrays taken through the buffer protocol (cheaper than typed
memoryviews: these ops are often tiny). Rows whose innermost strides are both 1 are ``memcpy``'d;
a region whose middle dim is a few lanes of one block (``lanes``) is walked lanes-innermost; a
region copying a buffer onto itself is skipped (an in-place Reshape). Every region is checked
against both buffers before the ``nogil`` loop (non-negative sizes, offsets and strides, the
last element in bounds). Threads split each region's rows, or its inner run when there are fewer
rows than threads, in one parallel section per call (regions write disjoint elements); each
element is written once, so results do not depend on the thread count.
"""

from cpython.buffer cimport (
    PyBUF_SIMPLE,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from cython.parallel cimport prange
from libc.stdlib cimport free, malloc

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall

cdef extern from "raster_kernels.h" nogil:
    void mnnpy_raster_row(const char* src, char* dst, const long long* r, Py_ssize_t row,
                          Py_ssize_t lo, Py_ssize_t hi, int es, int zero)
    void mnnpy_raster_lanes(const char* src, char* dst, const long long* r, Py_ssize_t i,
                            Py_ssize_t lo, Py_ssize_t hi, int es, int zero)
    void mnnpy_raster_gather4(const char* const* srcs, char* dst, const long long* g,
                              Py_ssize_t lo, Py_ssize_t hi)

cdef enum:
    COLS = 11
    GCOLS = 10  # a gather row: dst_off, n, then (source index, offset) per lane
    MIN_PARALLEL_BYTES = 65536  # below this a parallel region costs more than it saves


cdef inline bint lanes(const long long* r) noexcept nogil:
    """Whether the kernel walks the middle dim inside the inner one: up to 4 elements that lie
    in one 4-lane group on one side (an NC4HW4 block), moved together per inner step instead of
    as 4-strided scalars. ``regions._cost`` models the same rule."""
    cdef long long near = r[6] if r[6] < r[9] else r[9]
    return 1 < r[3] <= 4 and near * (r[3] - 1) <= 3 and not (r[7] == 1 and r[10] == 1)


cdef Py_ssize_t _reach(const long long* r, bint dst) noexcept nogil:
    """One past the last element a region touches (0 for an empty region)."""
    cdef Py_ssize_t off = r[1] if dst else r[0], k
    cdef const long long* st = r + (8 if dst else 5)
    for k in range(3):
        if r[2 + k] == 0:
            return 0
        off += (r[2 + k] - 1) * st[k]
    return off + 1


cdef int _check(const long long* rows, Py_ssize_t count, Py_ssize_t src_len,
                Py_ssize_t dst_len) noexcept nogil:
    """The index of the first bad region, or -1."""
    cdef Py_ssize_t i, k
    for i in range(count):
        for k in range(COLS):
            if rows[i * COLS + k] < 0:
                return i
        if src_len >= 0 and _reach(rows + i * COLS, False) > src_len:
            return i
        if _reach(rows + i * COLS, True) > dst_len:
            return i
    return -1


cdef inline bint _onto_itself(const char* src, const char* dst, const long long* r) noexcept nogil:
    return src == dst and r[0] == r[1] and r[5] == r[8] and r[6] == r[9] and r[7] == r[10]


cdef void _share(const char* src, char* dst, const long long* rows, Py_ssize_t count, int es,
                 bint zero, Py_ssize_t part, Py_ssize_t parts) noexcept nogil:
    """Part ``part`` of ``parts`` of every region: a slice of its rows, or of each row's inner
    run when it has fewer rows than parts."""
    cdef Py_ssize_t q, n, inner, row, lo, hi, first, last
    cdef const long long* r
    cdef bint by_lanes
    for q in range(count):
        r = rows + q * COLS
        if r[2] * r[3] * r[4] == 0 or (not zero and _onto_itself(src, dst, r)):
            continue
        by_lanes = lanes(r)
        n = r[2] if by_lanes else r[2] * r[3]  # by lanes a row is a block of n1 rows
        inner = r[4]
        first, last, lo, hi = 0, n, 0, inner
        if n >= parts:
            first, last = n * part // parts, n * (part + 1) // parts
        else:
            lo, hi = inner * part // parts, inner * (part + 1) // parts
        for row in range(first, last):
            if by_lanes:
                mnnpy_raster_lanes(src, dst, r, row, lo, hi, es, zero)
            else:
                mnnpy_raster_row(src, dst, r, row, lo, hi, es, zero)


cdef void _run(const char* src, char* dst, const long long* rows, Py_ssize_t count, int es,
               bint zero, int num_thread) noexcept nogil:
    """All regions, split among up to ``num_thread`` threads in one parallel section."""
    cdef Py_ssize_t q, work = 0, part
    for q in range(count):
        work += rows[q * COLS + 2] * rows[q * COLS + 3] * rows[q * COLS + 4]
    if num_thread <= 1 or work * es < MIN_PARALLEL_BYTES:
        _share(src, dst, rows, count, es, zero, 0, 1)
        return
    for part in prange(num_thread, num_threads=num_thread, schedule="static"):
        _share(src, dst, rows, count, es, zero, part, num_thread)


cdef void _apply(object src, object dst, object regions, int num_thread, bint zero) except *:
    cdef Py_buffer s, d, g
    cdef Py_ssize_t count, bad, es
    PyObject_GetBuffer(regions, &g, PyBUF_SIMPLE)
    try:
        if g.itemsize != 8 or g.len % (COLS * 8):
            raise ValueError(f"regions must be int64 rows of {COLS}, got {regions!r}")
        count = g.len // (COLS * 8)
        PyObject_GetBuffer(dst, &d, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            PyObject_GetBuffer(src, &s, PyBUF_SIMPLE)
            try:
                es = d.itemsize
                if s.itemsize != es or es not in (1, 2, 4, 8):
                    raise ValueError(f"item sizes {s.itemsize} and {es} differ or are unusual")
                bad = _check(<const long long*>g.buf, count, -1 if zero else s.len // es,
                             d.len // es)
                if bad >= 0:
                    raise ValueError(
                        f"region {bad} is negative or out of bounds (source {s.len // es}, "
                        f"destination {d.len // es} elements): {list(regions[bad])}"
                    )
                with nogil:
                    _run(<const char*>s.buf, <char*>d.buf, <const long long*>g.buf, count,
                         <int>es, zero, num_thread)
            finally:
                PyBuffer_Release(&s)
        finally:
            PyBuffer_Release(&d)
    finally:
        PyBuffer_Release(&g)


def copy_regions(src, dst, regions, int num_thread=1):
    """Copy every region of ``regions`` (C-contiguous int64 rows of 11, see the module) from
    ``src`` to ``dst`` (C-contiguous arrays of one item size)."""
    _apply(src, dst, regions, num_thread, False)


def zero_regions(dst, regions, int num_thread=1):
    """Set the destination elements of every region to zero (source columns are ignored)."""
    _apply(dst, dst, regions, num_thread, True)


cdef void _gather(const char** srcs, char* dst, const long long* rows, Py_ssize_t count,
                  int num_thread) noexcept nogil:
    """All gather rows, split among up to ``num_thread`` threads (rows, or each row's run)."""
    cdef Py_ssize_t q, work = 0, part
    for q in range(count):
        work += rows[q * GCOLS + 1] * 4
    if num_thread <= 1 or work * 4 < MIN_PARALLEL_BYTES:
        _gather_part(srcs, dst, rows, count, 0, 1)
        return
    for part in prange(num_thread, num_threads=num_thread, schedule="static"):
        _gather_part(srcs, dst, rows, count, part, num_thread)


cdef void _gather_part(const char** srcs, char* dst, const long long* rows, Py_ssize_t count,
                       Py_ssize_t part, Py_ssize_t parts) noexcept nogil:
    cdef Py_ssize_t q, n
    if count >= parts:
        for q in range(count * part // parts, count * (part + 1) // parts):
            mnnpy_raster_gather4(srcs, dst, rows + q * GCOLS, 0, rows[q * GCOLS + 1])
        return
    for q in range(count):
        n = rows[q * GCOLS + 1]
        mnnpy_raster_gather4(srcs, dst, rows + q * GCOLS, n * part // parts,
                             n * (part + 1) // parts)


cdef int _check_gather(const long long* rows, Py_ssize_t count, const Py_ssize_t* src_len,
                       Py_ssize_t nsrc, Py_ssize_t dst_len) noexcept nogil:
    """The index of the first bad gather row, or -1."""
    cdef Py_ssize_t i, k, n
    cdef const long long* g
    for i in range(count):
        g = rows + i * GCOLS
        n = g[1]
        if g[0] < 0 or n < 0 or (n and g[0] + 4 * (n - 1) + 3 >= dst_len):
            return i
        for k in range(4):
            if g[2 + 2 * k] < 0 or g[2 + 2 * k] >= nsrc or g[3 + 2 * k] < 0:
                return i
            if n and g[3 + 2 * k] + 4 * (n - 1) >= src_len[g[2 + 2 * k]]:
                return i
    return -1


cdef struct _Job:
    const char* src
    char* dst
    const long long* rows
    Py_ssize_t count
    int es
    bint zero
    const char** srcs  # a gather job's sources (NULL for a region job)


cdef class RegionsCall(KernelCall):
    """Several ``copy_regions`` / ``zero_regions`` calls with their buffers fixed
    (``bind_regions``): one raster op's run, in C."""
    cdef _Job* jobs
    cdef Py_ssize_t njobs

    def __dealloc__(self):
        cdef Py_ssize_t q
        if self.jobs != NULL:
            for q in range(self.njobs):
                free(self.jobs[q].srcs)
        free(self.jobs)

    cdef void run(self) noexcept:
        cdef Py_ssize_t q
        with nogil:
            for q in range(self.njobs):
                if self.jobs[q].srcs != NULL:
                    _gather(self.jobs[q].srcs, self.jobs[q].dst, self.jobs[q].rows,
                            self.jobs[q].count, self.num_thread)
                else:
                    _run(self.jobs[q].src, self.jobs[q].dst, self.jobs[q].rows,
                         self.jobs[q].count, self.jobs[q].es, self.jobs[q].zero,
                         self.num_thread)


cdef const char** _gather_sources(tuple srcs, Py_ssize_t* lens) except NULL:
    """The data pointers of 4-byte C-contiguous ``srcs`` (lengths in elements into ``lens``)."""
    cdef Py_buffer b
    cdef Py_ssize_t k
    cdef const char** ptrs = <const char**>malloc(max(len(srcs), 1) * sizeof(char*))
    if ptrs == NULL:
        raise MemoryError("gather: no memory for the sources")
    for k, src in enumerate(srcs):
        PyObject_GetBuffer(src, &b, PyBUF_SIMPLE)
        try:
            if b.itemsize != 4:
                free(ptrs)
                raise ValueError(f"gather sources must have 4-byte items, not {b.itemsize}")
            ptrs[k] = <const char*>b.buf
            lens[k] = b.len // 4
        finally:
            PyBuffer_Release(&b)
    return ptrs


cdef const char** _checked_gather(tuple srcs, object dst, object rows, Py_ssize_t* count,
                                  char** dst_ptr, const long long** row_ptr) except NULL:
    """Checked pointers of a gather job (the sources' array is the caller's to free)."""
    cdef Py_buffer d, g
    cdef Py_ssize_t bad
    cdef Py_ssize_t* lens = <Py_ssize_t*>malloc(max(len(srcs), 1) * sizeof(Py_ssize_t))
    if lens == NULL:
        raise MemoryError("gather: no memory for the sources")
    cdef const char** ptrs = NULL
    try:
        ptrs = _gather_sources(srcs, lens)
        PyObject_GetBuffer(rows, &g, PyBUF_SIMPLE)
        PyObject_GetBuffer(dst, &d, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            if g.itemsize != 8 or g.len % (GCOLS * 8) or d.itemsize != 4:
                raise ValueError(f"gather rows must be int64 rows of {GCOLS} into 4-byte items")
            count[0] = g.len // (GCOLS * 8)
            bad = _check_gather(<const long long*>g.buf, count[0], lens, len(srcs), d.len // 4)
            if bad >= 0:
                raise ValueError(f"gather row {bad} is negative or out of bounds")
            dst_ptr[0] = <char*>d.buf
            row_ptr[0] = <const long long*>g.buf
        finally:
            PyBuffer_Release(&d)
            PyBuffer_Release(&g)
    except BaseException:
        free(ptrs)
        raise
    finally:
        free(lens)
    return ptrs


def gather_regions(tuple srcs, dst, rows, int num_thread=1):
    """Run gather rows (C-contiguous int64 rows of 10: ``dst_off, n`` then per lane ``l`` a
    source index and offset): ``dst[dst_off + 4k + l] = srcs[s_l][o_l + 4k]`` for k < n, 4-byte
    items. ``backend.cpu.lane_gather.reference`` is the NumPy twin."""
    cdef Py_ssize_t count = 0
    cdef char* d = NULL
    cdef const long long* g = NULL
    cdef const char** ptrs = _checked_gather(srcs, dst, rows, &count, &d, &g)
    try:
        with nogil:
            _gather(ptrs, d, g, count, num_thread)
    finally:
        free(ptrs)


def bind_regions(list jobs, int num_thread=1):
    """A ``RegionsCall`` running ``(src, dst, regions, zero)`` jobs in order, each as
    ``copy_regions(src, dst, regions)`` (or ``zero_regions(dst, regions)`` when ``zero``),
    checked now; a job whose ``src`` is a tuple of buffers runs ``gather_regions(src, dst,
    regions)``. The buffers are kept alive; their contents may change, not their place."""
    cdef RegionsCall call = RegionsCall()
    cdef Py_buffer s, d, g
    cdef Py_ssize_t q, count, bad, es
    call.jobs = <_Job*>malloc(max(len(jobs), 1) * sizeof(_Job))
    if call.jobs == NULL:
        raise MemoryError("bind_regions: no memory for the jobs")
    call.njobs = 0
    call.num_thread = num_thread
    call.buffers = tuple(jobs)
    for q, (src, dst, regions, zero) in enumerate(jobs):
        if isinstance(src, tuple):
            call.jobs[q].srcs = _checked_gather(src, dst, regions, &call.jobs[q].count,
                                                &call.jobs[q].dst, &call.jobs[q].rows)
            call.njobs = q + 1
            continue
        call.jobs[q].srcs = NULL
        PyObject_GetBuffer(regions, &g, PyBUF_SIMPLE)
        PyObject_GetBuffer(dst, &d, PyBUF_SIMPLE | PyBUF_WRITABLE)
        PyObject_GetBuffer(src, &s, PyBUF_SIMPLE)
        try:
            if g.itemsize != 8 or g.len % (COLS * 8):
                raise ValueError(f"regions must be int64 rows of {COLS}, got {regions!r}")
            count = g.len // (COLS * 8)
            es = d.itemsize
            if s.itemsize != es or es not in (1, 2, 4, 8):
                raise ValueError(f"item sizes {s.itemsize} and {es} differ or are unusual")
            bad = _check(<const long long*>g.buf, count, -1 if zero else s.len // es,
                         d.len // es)
            if bad >= 0:
                raise ValueError(f"region {bad} of job {q} is negative or out of bounds")
            call.jobs[q].src = <const char*>s.buf
            call.jobs[q].dst = <char*>d.buf
            call.jobs[q].rows = <const long long*>g.buf
            call.jobs[q].count = count
            call.jobs[q].es = <int>es
            call.jobs[q].zero = bool(zero)
            call.njobs = q + 1
        finally:
            PyBuffer_Release(&s)
            PyBuffer_Release(&d)
            PyBuffer_Release(&g)
    return call
