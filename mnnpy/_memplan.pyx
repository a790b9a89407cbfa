# cython: language_level=3
"""C twin of the memory planner's placement (``mnnpy.memory._plan_python``): the same offsets.

Blocks come as three sequences of integers in the planner's creation order: the tick each
starts, the tick each ends (-1: never) and its size. :func:`plan` places them largest first,
best fit (``memory._place`` / ``_best_offset``), then, while the arena is above
``lower_bound``, again in ``retries`` jittered orders: the jitter of seed ``s`` is
``random.Random(s).uniform(0.5, 1.5)`` per block, drawn here from the same Mersenne Twister
(MT19937 seeded by ``init_by_array([s])``, 53-bit ``random()``), so both answer the same plan.

Each block is placed against its time neighbours only (lists made once by a sweep in start
order), so a placement costs about the pairs of blocks alive together, not the square of the
blocks. Every length and value is checked before the C loop (nothing there can overflow); what
it does not take raises ``ValueError`` (or ``TypeError`` / ``OverflowError``) and ``memory``
plans in Python, which stays the reference (tests/unit/test_memplan_c.py compares both on
thousands of random block sets).
"""

from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport calloc, free, malloc, qsort
from libc.string cimport memcpy

cdef int64_t _FOREVER = 0x7FFFFFFFFFFFFFFF
cdef int64_t _LARGEST = 1LL << 52  # sizes and ticks: exact as doubles (their total: < 2**62)

cdef struct Key:
    double weight  # -size (times the jitter): largest first
    Py_ssize_t index  # the block; keys start in (start, index) order, the sort is stable

cdef struct Span:
    int64_t lo, hi  # a placed block alive with the one being placed: its bytes

cdef struct Twister:
    uint32_t mt[624]
    int mti

cdef struct Plan:
    Py_ssize_t n
    int64_t *start
    int64_t *end
    int64_t *size
    int64_t *best  # the best plan's offsets
    int64_t *offset  # the order being tried
    Key *order
    Key *spare  # the merge sort's other half
    Key *sorted  # order or spare: the order being placed
    Py_ssize_t *chron  # the blocks by (start, index): ties in weight keep this order
    double *factor  # a retry's jitter, per block
    char *placed
    Span *live
    Py_ssize_t *by_offset
    Py_ssize_t *first  # NULL: no neighbour lists
    int32_t *met  # (n < 2**31, checked)
    Twister *twister


cdef inline bint _before(const Key *x, const Key *y) noexcept nogil:
    """``x``'s weight below ``y``'s (the sort is stable: equal weights keep their order)."""
    return x.weight < y.weight


cdef Key *_sort_keys(Key *keys, Key *spare, Py_ssize_t n) noexcept nogil:
    """``keys`` sorted (bottom-up merge sort, runs of 8 by insertion); in ``keys`` or ``spare``."""
    cdef Py_ssize_t lo, i, j, k, mid, hi, width = 8
    cdef Key x
    cdef Key *src = keys
    cdef Key *dst = spare
    cdef Key *t
    lo = 0
    while lo < n:
        hi = lo + width if lo + width < n else n
        for i in range(lo + 1, hi):
            x = src[i]
            j = i
            while j > lo and _before(&x, &src[j - 1]):
                src[j] = src[j - 1]
                j -= 1
            src[j] = x
        lo = hi
    while width < n:
        lo = 0
        while lo < n:
            mid = lo + width if lo + width < n else n
            hi = lo + 2 * width if lo + 2 * width < n else n
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _before(&src[j], &src[i]):
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
            lo = hi
        t = src
        src = dst
        dst = t
        width *= 2
    return src


cdef uint32_t _GENRAND[624]  # init_genrand(19650218): the same for every seed


cdef void _init_genrand() noexcept nogil:
    cdef uint32_t *mt = _GENRAND
    cdef int i
    mt[0] = 19650218
    for i in range(1, 624):
        mt[i] = <uint32_t>(1812433253U * (mt[i - 1] ^ (mt[i - 1] >> 30)) + <uint32_t>i)


_init_genrand()


cdef void _seed(Twister *t, uint32_t s) noexcept nogil:
    """CPython's ``init_genrand(19650218)`` then ``init_by_array`` with the key ``[s]``."""
    cdef uint32_t *mt = t.mt
    cdef int i, j, _k
    memcpy(mt, _GENRAND, sizeof(_GENRAND))
    i, j = 1, 0
    for _k in range(624):
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * <uint32_t>1664525)) + s + <uint32_t>j
        i += 1
        j = 0  # the key has one word
        if i >= 624:
            mt[0] = mt[623]
            i = 1
    for _k in range(623):
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * <uint32_t>1566083941)) - <uint32_t>i
        i += 1
        if i >= 624:
            mt[0] = mt[623]
            i = 1
    mt[0] = 0x80000000U
    t.mti = 624


cdef uint32_t _next(Twister *t) noexcept nogil:
    """CPython's ``genrand_uint32``."""
    cdef uint32_t *mt = t.mt
    cdef uint32_t y
    cdef int kk
    if t.mti >= 624:
        for kk in range(227):
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7FFFFFFFU)
            mt[kk] = mt[kk + 397] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0)
        for kk in range(227, 623):
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7FFFFFFFU)
            mt[kk] = mt[kk - 227] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0)
        y = (mt[623] & 0x80000000U) | (mt[0] & 0x7FFFFFFFU)
        mt[623] = mt[396] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0)
        t.mti = 0
    y = mt[t.mti]
    t.mti += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680U
    y ^= (y << 15) & 0xEFC60000U
    y ^= y >> 18
    return y


cdef double _random(Twister *t) noexcept nogil:
    """CPython's ``random()`` (53 bits)."""
    cdef uint32_t a = _next(t) >> 5
    cdef uint32_t b = _next(t) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


cdef int _by_span(const void *a, const void *b) noexcept nogil:
    cdef const Span *x = <const Span *>a
    cdef const Span *y = <const Span *>b
    if x.lo != y.lo:
        return -1 if x.lo < y.lo else 1
    return -1 if x.hi < y.hi else (1 if x.hi > y.hi else 0)


cdef void _sort_spans(Span *live, Py_ssize_t d) noexcept nogil:
    """``live`` by (lo, hi): insertion sort for the few a block usually meets, else qsort."""
    cdef Py_ssize_t i, j
    cdef Span x
    if d > 32:
        qsort(live, d, sizeof(Span), _by_span)
        return
    for i in range(1, d):
        x = live[i]
        j = i
        while j > 0 and (
            live[j - 1].lo > x.lo or (live[j - 1].lo == x.lo and live[j - 1].hi > x.hi)
        ):
            live[j] = live[j - 1]
            j -= 1
        live[j] = x


cdef int64_t _best_offset(const Span *live, Py_ssize_t d, int64_t need) noexcept nogil:
    """``_best_offset`` over the spans alive with the block, sorted by (lo, hi)."""
    cdef Py_ssize_t pos
    cdef int64_t cursor = 0, best = -1, best_gap = 0, gap
    cdef bint found = False
    for pos in range(d):
        gap = live[pos].lo - cursor
        if gap >= need and (not found or gap < best_gap):
            best, best_gap, found = cursor, gap, True
        if live[pos].hi > cursor:
            cursor = live[pos].hi
    return best if best >= 0 else cursor


cdef int64_t _place(Plan *c, int64_t *offset) noexcept nogil:
    """``_place``: best fit in ``c.sorted``'s order; ``offset`` per block, returns the arena.

    With the blocks' time neighbours (``c.first``/``c.met``) a block looks at the placed ones
    among them; without (too many pairs), at every placed block, kept sorted by offset.
    """
    cdef Py_ssize_t i, k, m = 0, p, q, d
    cdef int64_t need, arena = 0
    for i in range(c.n):
        c.placed[i] = 0
    for i in range(c.n):
        k = c.sorted[i].index
        need = c.size[k]
        d = 0
        if c.first != NULL:
            for q in range(c.first[k], c.first[k + 1]):
                p = c.met[q]
                if c.placed[p]:
                    c.live[d].lo = offset[p]
                    c.live[d].hi = offset[p] + c.size[p]
                    d += 1
            _sort_spans(c.live, d)
        else:
            for q in range(m):  # c.by_offset: the placed blocks by (offset, offset + size)
                p = c.by_offset[q]
                if c.start[p] < c.end[k] and c.start[k] < c.end[p]:
                    c.live[d].lo = offset[p]
                    c.live[d].hi = offset[p] + c.size[p]
                    d += 1
        offset[k] = _best_offset(c.live, d, need)
        c.placed[k] = 1
        if offset[k] + need > arena:
            arena = offset[k] + need
        if c.first == NULL:
            q = m  # insert k, keeping by_offset sorted (equal pairs place alike in any order)
            while q > 0 and (
                offset[c.by_offset[q - 1]] > offset[k]
                or (offset[c.by_offset[q - 1]] == offset[k] and c.size[c.by_offset[q - 1]] > need)
            ):
                c.by_offset[q] = c.by_offset[q - 1]
                q -= 1
            c.by_offset[q] = k
            m += 1
    return arena


cdef int _meet(Plan *c, Py_ssize_t max_pairs) noexcept nogil:
    """Each block's time neighbours (``met[first[k]:first[k + 1]]``); none over ``max_pairs``.

    A sweep in start order: a block meets the later-starting ones that start before it ends
    (and end after it starts). Returns -1 when out of memory.
    """
    cdef Py_ssize_t n = c.n, a, b, i, j, pairs = 0
    cdef Py_ssize_t *fill
    cdef Key *by_start
    if n <= 0 or n >= 0x7FFFFFFF:
        return 0  # plan() answers these first; the bound tells the compiler calloc's range
    for i in range(n):
        c.order[i].weight = <double>c.start[i]
        c.order[i].index = i
    by_start = _sort_keys(c.order, c.spare, n)
    for i in range(n):
        c.chron[i] = by_start[i].index
    c.first = <Py_ssize_t *>calloc(n + 1, sizeof(Py_ssize_t))
    if c.first == NULL:
        return -1
    for a in range(n):
        i = by_start[a].index
        for b in range(a + 1, n):
            j = by_start[b].index
            if c.start[j] >= c.end[i]:
                break
            if c.start[i] < c.end[j]:
                c.first[i + 1] += 1
                c.first[j + 1] += 1
                pairs += 1
    if pairs > max_pairs:
        free(c.first)
        c.first = NULL
        return 0
    c.met = <int32_t *>malloc((2 * pairs + 1) * sizeof(int32_t))
    if c.met == NULL:
        return -1
    for i in range(n):
        c.first[i + 1] += c.first[i]
    fill = c.by_offset  # free until placement: each block's next free slot
    for i in range(n):
        fill[i] = c.first[i]
    for a in range(n):
        i = by_start[a].index
        for b in range(a + 1, n):
            j = by_start[b].index
            if c.start[j] >= c.end[i]:
                break
            if c.start[i] < c.end[j]:
                c.met[fill[i]] = <int32_t>j
                fill[i] += 1
                c.met[fill[j]] = <int32_t>i
                fill[j] += 1
    return 0


cdef int64_t _plan(Plan *c, int64_t lower_bound, int retries) noexcept nogil:
    """``memory._plan_python``: the offsets in ``c.best``, returns the arena."""
    cdef Py_ssize_t i, k
    cdef int seed
    cdef int64_t arena, tried
    for i in range(c.n):  # Python's stable sort by (-size, start): by -size from chron order
        k = c.chron[i]
        c.order[i].weight = <double>(-c.size[k])
        c.order[i].index = k
    c.sorted = _sort_keys(c.order, c.spare, c.n)
    arena = _place(c, c.best)
    if arena <= lower_bound:
        return arena
    for seed in range(retries):
        _seed(c.twister, <uint32_t>seed)
        for i in range(c.n):  # drawn in creation order, as Python's dict of factors
            c.factor[i] = 0.5 + 1.0 * _random(c.twister)
        for i in range(c.n):
            k = c.chron[i]
            c.order[i].weight = <double>(-c.size[k]) * c.factor[k]
            c.order[i].index = k
        c.sorted = _sort_keys(c.order, c.spare, c.n)
        tried = _place(c, c.offset)
        if tried < arena:
            arena = tried
            for i in range(c.n):
                c.best[i] = c.offset[i]
            if arena <= lower_bound:
                break
    return arena


cdef void _read(object values, int64_t *into, Py_ssize_t n, int64_t low, str what) except *:
    cdef Py_ssize_t i
    cdef int64_t v
    for i in range(n):
        x = values[i]
        if not isinstance(x, int):  # a float would be truncated silently
            raise TypeError(f"block {i}: {what} {x!r} is not an integer")
        v = x
        if v < low or v >= _LARGEST:
            raise ValueError(f"block {i}: {what} {v} out of range")
        into[i] = v


def jitter(seed, count):
    """The first ``count`` factors :func:`plan` draws for ``seed``: ``random.Random(seed)``'s
    ``uniform(0.5, 1.5)``, value for value (the tests compare them)."""
    cdef Twister t
    cdef Py_ssize_t _i, n = count
    if not 0 <= seed <= 65536 or n < 0:
        raise ValueError(f"seed {seed} or count {n} out of range")
    _seed(&t, <uint32_t>seed)
    return [0.5 + 1.0 * _random(&t) for _i in range(n)]


def plan(starts, ends, sizes, lower_bound, retries, max_pairs=1 << 20):
    """Offsets of the blocks (creation order) and the arena, as ``memory._plan_python`` answers.

    Args:
        starts: the tick each block starts at (0 <= tick < 2**52).
        ends: the tick each block ends at, -1 for never.
        sizes: each block's bytes (0 <= bytes < 2**52, all of them < 2**62).
        lower_bound: the arena no plan can beat; retries stop there.
        retries: how many jittered orders (seeds 0..retries-1) to try above the bound.
        max_pairs: above this many pairs of blocks alive together, each block is placed against
            every placed block instead of its time neighbours (the same plan; the lists take
            8 bytes a pair: 8 MiB at most by default, and 1024 blocks, the most planned again,
            have fewer pairs).

    Returns:
        ``(offsets, arena)``: a list of offsets in the blocks' order, and the arena's bytes.

    Raises:
        ValueError: lengths differ, a value or the sizes' total is out of range, or retries
            is not 0..65536.
        TypeError: a value is not an integer (OverflowError: nor an int64).
    """
    cdef Py_ssize_t n = len(starts), i, pairs = max_pairs
    cdef int64_t bound = lower_bound, arena = 0, total
    cdef int tries = retries, failed = 0
    cdef Plan c
    if len(ends) != n or len(sizes) != n:
        raise ValueError(f"{n} starts, {len(ends)} ends, {len(sizes)} sizes")
    if not 0 <= tries <= 65536:
        raise ValueError(f"retries {tries} out of range")
    if n >= 0x7FFFFFFF:
        raise ValueError(f"{n} blocks")
    if n == 0:
        return [], 0
    c.n = n
    c.start = <int64_t *>malloc(5 * n * sizeof(int64_t))
    c.end, c.size = c.start + n, c.start + 2 * n
    c.best, c.offset = c.start + 3 * n, c.start + 4 * n
    c.order = <Key *>malloc(2 * n * sizeof(Key))
    c.spare = c.order + n
    c.placed = <char *>malloc(n)
    c.live = <Span *>malloc(n * sizeof(Span))
    c.by_offset = <Py_ssize_t *>malloc(2 * n * sizeof(Py_ssize_t))
    c.chron = c.by_offset + n
    c.factor = <double *>malloc(n * sizeof(double))
    c.first = NULL
    c.met = NULL
    c.twister = <Twister *>malloc(sizeof(Twister))
    try:
        if (
            c.start == NULL or c.order == NULL or c.placed == NULL or c.live == NULL
            or c.by_offset == NULL or c.twister == NULL or c.factor == NULL
        ):
            raise MemoryError()
        _read(starts, c.start, n, 0, "start")
        _read(ends, c.end, n, -1, "end")
        _read(sizes, c.size, n, 0, "size")
        total = 0
        for i in range(n):
            total += c.size[i]  # < 2**52 each: no overflow before the check below
            if total >= _LARGEST * 1024:
                raise ValueError("the blocks' sizes add up to 2**62 bytes or more")
            if c.end[i] < 0:
                c.end[i] = _FOREVER
        with nogil:
            failed = _meet(&c, pairs)
            if not failed:
                arena = _plan(&c, bound, tries)
        if failed:
            raise MemoryError()
        return [c.best[i] for i in range(n)], arena
    finally:
        free(c.start)
        free(c.order)
        free(c.placed)
        free(c.live)
        free(c.by_offset)
        free(c.factor)
        free(c.first)
        free(c.met)
        free(c.twister)
