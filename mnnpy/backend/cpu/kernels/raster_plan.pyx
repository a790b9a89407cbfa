# cython: language_level=3
"""C twins of the raster execution's planning at resize: ``raster._itself`` and
``lane_gather._plan``.

Both run once per raster op at every resize, over a few region rows each: the Python versions
spend most of their time building small NumPy arrays and tuples. These give the same answers
(the tests compare them on random rows). Every row is read through the buffer protocol and
checked first (int64 rows of ``COLS``, values in ``[0, 2**40)`` where planning does arithmetic on
them); what they cannot take they decline with None, and the caller runs the Python version,
which stays the reference. Nothing here runs without the GIL.
"""

from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS,
    PyBUF_FORMAT,
    PyBUF_SIMPLE,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from libc.stdlib cimport free, malloc, qsort

import numpy as np

cdef enum:
    COLS = 11
    GCOLS = 10

cdef long long LIMIT = 1LL << 40  # bound of a row value planned on (no overflow below it)


cdef struct Cell:
    long long base  # the block's first element (dst offset rounded down to 4)
    long long n  # pixels of the strip
    long long so  # source offset
    long long s  # source index
    int lane  # dst offset % 4
    int seq  # order of appearance (the first writer of a lane wins)


cdef int _cmp(const void* pa, const void* pb) noexcept nogil:
    cdef const Cell* a = <const Cell*>pa
    cdef const Cell* b = <const Cell*>pb
    if a.base != b.base:
        return -1 if a.base < b.base else 1
    if a.n != b.n:
        return -1 if a.n < b.n else 1
    if a.lane != b.lane:
        return -1 if a.lane < b.lane else 1
    return -1 if a.seq < b.seq else (1 if a.seq > b.seq else 0)


cdef bint _rows_of(object rows, Py_buffer* view) except -1:
    """Take ``rows`` as C-contiguous int64 rows ``(n, COLS)`` (False, nothing held, if not)."""
    cdef bytes fmt
    try:
        PyObject_GetBuffer(rows, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, TypeError, ValueError):
        return False
    fmt = view.format if view.format != NULL else b"B"
    if (view.itemsize != 8 or view.ndim != 2 or view.shape[1] != COLS
            or fmt.lstrip(b"@=<") not in (b"l", b"q")):
        PyBuffer_Release(view)
        return False
    return True


def itself(object a, object b, object rows):
    """``raster._itself``: per row whether it copies ``a``'s elements onto the same bytes of ``b``.

    Args:
        a: the source buffer, or None.
        b: the destination buffer, or None.
        rows: int64 region rows ``(n, COLS)``.

    Returns:
        A bool array of one flag per row, or None when a buffer or the rows are not plain
        contiguous memory (the caller then asks the Python version).
    """
    cdef Py_buffer va, vb, vr, vo
    cdef char* f
    cdef Py_ssize_t count, i, shift = 0, diff
    cdef const long long* r
    cdef bint usable = a is not None and b is not None
    if not _rows_of(rows, &vr):
        return None
    try:
        count = vr.len // (COLS * 8)
        out = np.zeros(count, dtype=bool)
        if usable:
            try:
                PyObject_GetBuffer(a, &va, PyBUF_SIMPLE)
            except (BufferError, TypeError, ValueError):
                return None
            try:
                try:
                    PyObject_GetBuffer(b, &vb, PyBUF_SIMPLE)
                except (BufferError, TypeError, ValueError):
                    return None
                diff = <Py_ssize_t>(<char*>va.buf - <char*>vb.buf)
                usable = va.itemsize == vb.itemsize and va.itemsize > 0
                if usable:
                    usable = diff % va.itemsize == 0  # cdivision: exact when 0 either way
                    shift = diff // va.itemsize
                PyBuffer_Release(&vb)
            finally:
                PyBuffer_Release(&va)
        if not usable or count == 0:
            return out
        r = <const long long*>vr.buf
        for i in range(count):
            if r[i * COLS] <= -LIMIT or r[i * COLS] >= LIMIT:
                return None
            if r[i * COLS + 1] <= -LIMIT or r[i * COLS + 1] >= LIMIT:
                return None
        PyObject_GetBuffer(out, &vo, PyBUF_SIMPLE | PyBUF_WRITABLE)
        f = <char*>vo.buf
        for i in range(count):
            f[i] = (r[1] - r[0] == shift and r[5] == r[8] and r[6] == r[9] and r[7] == r[10])
            r += COLS
        PyBuffer_Release(&vo)
        return out
    finally:
        PyBuffer_Release(&vr)


MIN_RUN = 16  # lane_gather.MIN_RUN: shorter lane strips are left to the region rows
MAX_STRIPS = 1 << 14  # lane_gather._MAX_STRIPS


cdef inline bint _candidate(const long long* r) noexcept:
    """A row writing single lanes (steps 4 on both sides) over ``MIN_RUN`` pixels or more."""
    return r[7] == 4 and r[10] == 4 and r[4] >= MIN_RUN


def lane_plan(list jobs):
    """``lane_gather._plan``: gather rows and the region rows left, the same values.

    Args:
        jobs: ``(source index, rows)`` of one output, rows of 4-byte elements.

    Returns:
        ``(gather rows, [(source index, rows)])`` as ``_plan`` gives them (``jobs`` itself as
        the rest when nothing gathers), or None when a row cannot be taken (the caller then
        runs ``_plan``).
    """
    cdef Py_ssize_t nj = len(jobs), ji, k, count, total = 0, ncell = 0, c, g, e, q
    cdef Py_buffer* views = <Py_buffer*>malloc(max(nj, 1) * sizeof(Py_buffer))
    cdef Py_ssize_t held = 0
    cdef Cell* cells = NULL
    cdef Cell* order = NULL
    cdef char* used = NULL
    cdef long long src_index, i, j
    cdef const long long* r
    cdef long long lane_s[4]
    cdef long long lane_so[4]
    cdef int have, lane, nfull = 0
    cdef bint any_used
    if views == NULL:
        raise MemoryError()
    try:
        sources = []
        for ji in range(nj):
            s, rows = jobs[ji]
            if type(s) is not int or not 0 <= s < LIMIT:
                return None
            if not _rows_of(rows, &views[ji]):
                return None
            held += 1
            sources.append(s)
            count = views[ji].len // (COLS * 8)
            r = <const long long*>views[ji].buf
            for k in range(count * COLS):
                if r[k] < 0 or r[k] >= LIMIT:
                    return None
            for k in range(count):
                if _candidate(r + k * COLS):
                    total += r[k * COLS + 2] * r[k * COLS + 3]
                    if total > MAX_STRIPS:
                        return np.zeros((0, GCOLS), np.int64), jobs
        if total == 0:
            return np.zeros((0, GCOLS), np.int64), jobs
        cells = <Cell*>malloc(total * sizeof(Cell))
        order = <Cell*>malloc(total * sizeof(Cell))
        used = <char*>malloc(total)
        if cells == NULL or order == NULL or used == NULL:
            raise MemoryError()
        for ji in range(nj):  # every strip in order (first writer of a lane wins)
            src_index = sources[ji]
            count = views[ji].len // (COLS * 8)
            for k in range(count):
                r = <const long long*>views[ji].buf + k * COLS
                if not _candidate(r):
                    continue
                for i in range(r[2]):
                    for j in range(r[3]):
                        e = r[1] + i * r[8] + j * r[9]
                        cells[ncell].so = r[0] + i * r[5] + j * r[6]
                        cells[ncell].base = e - e % 4
                        cells[ncell].lane = <int>(e % 4)
                        cells[ncell].n = r[4]
                        cells[ncell].s = src_index
                        cells[ncell].seq = <int>ncell
                        ncell += 1
        for c in range(ncell):
            order[c] = cells[c]
            used[c] = 0
        qsort(order, ncell, sizeof(Cell), _cmp)
        gathers = []
        c = 0
        while c < ncell:  # one (base, n) block at a time, lanes in order
            e = c
            have = 0
            while e < ncell and order[e].base == order[c].base and order[e].n == order[c].n:
                lane = order[e].lane
                if not have & (1 << lane):
                    have |= 1 << lane
                    lane_s[lane], lane_so[lane] = order[e].s, order[e].so
                e += 1
            if have == 15:
                nfull += 1
                gathers.append([order[c].base, order[c].n, lane_s[0], lane_so[0], lane_s[1],
                                lane_so[1], lane_s[2], lane_so[2], lane_s[3], lane_so[3]])
                for g in range(c, e):
                    lane = order[g].lane
                    if order[g].s == lane_s[lane] and order[g].so == lane_so[lane]:
                        used[order[g].seq] = 1
            c = e
        if nfull == 0:
            return np.zeros((0, GCOLS), np.int64), jobs
        rest = []
        c = 0
        for ji in range(nj):
            count = views[ji].len // (COLS * 8)
            r = <const long long*>views[ji].buf
            kept = []
            for k in range(count):
                if not _candidate(r + k * COLS):
                    kept.append([r[k * COLS + q] for q in range(COLS)])
                    continue
                e = c + r[k * COLS + 2] * r[k * COLS + 3]
                any_used = False
                for g in range(c, e):
                    if used[g]:
                        any_used = True
                if not any_used:
                    kept.append([r[k * COLS + q] for q in range(COLS)])
                else:
                    for g in range(c, e):
                        if not used[g]:
                            kept.append([cells[g].so, cells[g].base + cells[g].lane, 1, 1,
                                         cells[g].n, 0, 0, 4, 0, 0, 4])
                c = e
            if kept:
                rest.append((sources[ji], np.array(kept, np.int64).reshape(-1, COLS)))
        return np.array(gathers, np.int64).reshape(-1, GCOLS), rest
    finally:
        for ji in range(held):
            PyBuffer_Release(&views[ji])
        free(views)
        free(cells)
        free(order)
        free(used)
