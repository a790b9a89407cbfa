# cython: language_level=3, boundscheck=False, wraparound=False
"""C twin of ``compose._compose`` (MNN's fuseRegion): the same pieces, from plain lists.

A side is ``(start, terms)``: per logical dim a start and its ``(iteration dim, coefficient)``
terms; layouts are never looked at here, only passed through by the caller. Every side is read
into fixed-size C structs first, each rank, term count and iteration dim checked against its
bounds; the values are C integers whose every product and sum is checked (``_mul``, ``_add``),
and division and modulo follow Python's floor semantics. :func:`compose` answers what
``_compose`` answers, as ``(producer index, space, src start, src terms, dst start, dst terms)``
rows, or None; anything it cannot hold or read (a rank, term count or value past its bounds, a
dim out of range, start and terms of different lengths) raises ``ValueError`` / ``TypeError`` /
``IndexError``, and the caller then runs the Python ``_compose``, which stays the reference (the
tests compare both). Nothing here runs without the GIL: each call is small and uses its own
buffers.
"""

from libc.stdlib cimport free, malloc

cdef extern from "checked_int.h":
    long long _mul "ck_mul"(long long a, long long b, int* bad) noexcept
    long long _add "ck_add"(long long a, long long b, int* bad) noexcept
    long long _fdiv "ck_fdiv"(long long a, long long b) noexcept
    long long _fmod "ck_fmod"(long long a, long long b) noexcept

cdef enum:
    MAXK = 8  # dims of a side
    MAXT = 8  # terms of one dim of a read side
    MAXR = 16  # iteration dims of a piece
    MAXW = 32  # iteration dims of a walk (split digits added)
    MAXS = 16  # terms of one split or producer dim
    MAXB = 16  # boxes a piece is cut into (``_boxes``'s limit)
    NONE = -1  # ``d is None``


cdef struct CSide:
    int K
    long long start[MAXK]
    int nt[MAXK]
    int tq[MAXK][MAXT]
    long long tc[MAXK][MAXT]


cdef struct CPiece:
    int R
    long long space[MAXR]
    CSide src
    CSide dst


cdef struct Walk:
    int n  # len(space)
    int n0  # the reader's dims (offset and split)
    long long space[MAXW]
    long long offset[MAXR]
    int ns[MAXR]
    int sd[MAXR][MAXS]
    long long sf[MAXR][MAXS]
    int qn
    long long q_const[MAXR]
    int nq[MAXR]
    int qd[MAXR][MAXS]
    long long qf[MAXR][MAXS]
    int seen[MAXR]


cdef int _beyond() except -1:
    raise ValueError("beyond what the C composition holds")


cdef int _read_side(list start, list terms, int R, CSide* out) except -1:
    """``out`` from a side's lists; every dim checked against ``R`` iteration dims."""
    cdef Py_ssize_t K = len(start), k, i, n
    cdef list t
    if K != len(terms):
        raise ValueError("a side's start and terms differ in length")
    if K > MAXK:
        _beyond()
    out.K = <int>K
    for k in range(K):
        out.start[k] = start[k]
        t = list(terms[k])
        n = len(t)
        if n > MAXT:
            _beyond()
        out.nt[k] = <int>n
        for i in range(n):
            q, c = t[i]
            if q < 0 or q >= R:
                _beyond()
            out.tq[k][i] = <int>q
            out.tc[k][i] = c
    return 0


cdef int _read_piece(tuple plain, CPiece* out) except -1:
    cdef list space = plain[0]
    cdef Py_ssize_t R = len(space), j
    if R > MAXR:
        _beyond()
    out.R = <int>R
    for j in range(R):
        out.space[j] = space[j]
    _read_side(plain[1], plain[2], out.R, &out.src)
    _read_side(plain[3], plain[4], out.R, &out.dst)
    return 0


cdef void _fix(CSide* side, int j, long long value, int* bad) noexcept:
    """``Side.fixed``: iteration dim ``j`` fixed at ``value`` (in place)."""
    cdef int k, i, m
    for k in range(side.K):
        m = 0
        for i in range(side.nt[k]):
            if side.tq[k][i] == j:
                side.start[k] = _add(side.start[k], _mul(side.tc[k][i], value, bad), bad)
            else:
                side.tq[k][m], side.tc[k][m] = side.tq[k][i], side.tc[k][i]
                m += 1
        side.nt[k] = m


cdef int _boxes(CPiece* piece, CPiece* out, int* bad) noexcept:
    """``compose._boxes`` (limit 16): how many boxes in ``out``, -1 for None."""
    cdef int fix[MAXR * MAXT]
    cdef long long values[MAXR * MAXT]
    cdef int nfix = 0, before, k, i, x, y, ones, n = 0
    cdef long long total = 1
    cdef CSide* src = &piece.src
    for k in range(src.K):
        if src.nt[k] > 1 or (src.nt[k] == 1 and src.tc[k][0] != 1):
            ones = 0
            for i in range(src.nt[k]):
                if src.tc[k][i] == 1:
                    ones += 1
            if ones != 1:
                return -1
            before = nfix
            for i in range(src.nt[k]):  # not among those fixed before this dim
                if src.tc[k][i] != 1:
                    y = 0
                    for x in range(before):
                        if fix[x] == src.tq[k][i]:
                            y = 1
                    if not y:
                        fix[nfix] = src.tq[k][i]
                        nfix += 1
    if nfix == 0:
        out[0] = piece[0]
        return 1
    for x in range(nfix):
        total = _mul(total, piece.space[fix[x]], bad)
    if total > MAXB:
        return -1
    for x in range(nfix):
        if piece.space[fix[x]] <= 0:
            return 0  # an empty product: no boxes
        values[x] = 0
    while True:  # itertools.product order: the last value fastest
        out[n] = piece[0]
        for x in range(nfix):
            _fix(&out[n].src, fix[x], values[x], bad)
            _fix(&out[n].dst, fix[x], values[x], bad)
            out[n].space[fix[x]] = 1
        n += 1
        x = nfix - 1
        while x >= 0:
            values[x] += 1
            if values[x] < piece.space[fix[x]]:
                break
            values[x] = 0
            x -= 1
        if x < 0:
            return n


cdef int _digits(long long* u_space, int* js, long long* cs, int m, int* bad) noexcept:
    """``compose._digits`` in place (a stable sort by place value, outer first); 0: None."""
    cdef int i, k, tj
    cdef long long tc
    for i in range(1, m):
        tj, tc, k = js[i], cs[i], i - 1
        while k >= 0 and cs[k] < tc:
            js[k + 1], cs[k + 1] = js[k], cs[k]
            k -= 1
        js[k + 1], cs[k + 1] = tj, tc
    for i in range(m):
        if i + 1 < m:
            if cs[i] != _mul(cs[i + 1], u_space[js[i + 1]], bad):
                return 0
        elif cs[i] != 1:
            return 0
    return 1


cdef int _q_term(Walk* w, int j, int d) except -1:
    if w.nq[j] >= MAXS:
        _beyond()
    w.qd[j][w.nq[j]], w.qf[j][w.nq[j]] = d, 1
    w.nq[j] += 1
    return 0


cdef int _strided(Walk* w, CPiece* u, int d, long long a, long long n, long long start,
                  int j, long long c, int* bad) except -1:
    """``compose._strided``: 1, or 0 when none of the positions is read."""
    cdef long long q0 = -_fdiv(-_add(a, -start, bad), c)
    cdef long long q1 = -_fdiv(-_add(_add(a, n, bad), -start, bad), c)
    if q0 < 0:
        q0 = 0
    if q1 > u.space[j]:
        q1 = u.space[j]
    if q1 <= q0:
        return 0
    w.q_const[j] = _add(w.q_const[j], q0, bad)
    w.seen[j] = 1
    if d != NONE:
        w.offset[d] = _add(_add(start, _mul(c, q0, bad), bad), -a, bad)
        w.space[d] = q1 - q0
        w.ns[d], w.sd[d][0], w.sf[d][0] = 1, d, c
        _q_term(w, j, d)
    return 1


cdef int _invert(Walk* w, CPiece* u, int d, long long r0, long long n, int* js, long long* cs,
                 int m, int* bad) except -1:
    """``compose._invert``: 1, or 0 for False."""
    cdef long long g[MAXS]
    cdef long long first, count, whole
    cdef int i, o
    if m == 0:
        return 1
    for i in range(m):
        g[i] = u.space[js[i]]
    if d == NONE or n == 1:
        for i in range(m):
            w.q_const[js[i]] = _add(w.q_const[js[i]], _fmod(_fdiv(r0, cs[i]), g[i]), bad)
            w.seen[js[i]] = 1
        return 1
    i = m - 1
    while i > 0:
        whole = _mul(cs[i], g[i], bad)
        if _fmod(r0, whole) != 0 or _fmod(n, whole) != 0:
            break
        i -= 1
    first, count = _fmod(_fdiv(r0, cs[i]), g[i]), _fdiv(n, cs[i])
    if _fmod(r0, cs[i]) or _fmod(n, cs[i]) or first + count > g[i]:
        return 0
    w.space[d] = count
    w.ns[d], w.sd[d][0], w.sf[d][0] = 1, d, cs[i]
    for o in range(i):
        w.q_const[js[o]] = _add(w.q_const[js[o]], _fmod(_fdiv(r0, cs[o]), g[o]), bad)
    w.q_const[js[i]] = _add(w.q_const[js[i]], first, bad)
    _q_term(w, js[i], d)
    for o in range(i + 1, m):
        if w.n >= MAXW or w.ns[d] >= MAXS:
            _beyond()
        w.space[w.n] = g[o]
        w.sd[d][w.ns[d]], w.sf[d][w.ns[d]] = w.n, cs[o]
        w.ns[d] += 1
        _q_term(w, js[o], w.n)
        w.n += 1
    for o in range(m):
        w.seen[js[o]] = 1
    return 1


cdef tuple _side(Walk* w, CSide* side, int* bad):
    """``_Walk.side``: a producer side over the walk, as Python lists."""
    cdef list new_start = [], new_terms = [], terms
    cdef int dims[MAXW]
    cdef long long coefs[MAXW]
    cdef int k, i, x, y, n, j, d
    cdef long long s, c
    for k in range(side.K):
        s, n = side.start[k], 0
        for i in range(side.nt[k]):
            j, c = side.tq[k][i], side.tc[k][i]
            s = _add(s, _mul(c, w.q_const[j], bad), bad)
            for x in range(w.nq[j]):
                d = w.qd[j][x]
                for y in range(n):
                    if dims[y] == d:
                        break
                else:
                    if n >= MAXW:
                        _beyond()
                    dims[n], coefs[n] = d, 0
                    y = n
                    n += 1
                coefs[y] = _add(coefs[y], _mul(c, w.qf[j][x], bad), bad)
        new_start.append(s)
        terms = []
        for y in range(n):
            if coefs[y]:
                terms.append((dims[y], coefs[y]))
        new_terms.append(terms)
    return new_start, new_terms


cdef tuple _moved(Walk* w, CSide* side, int* bad):
    """``_Walk.moved``: the reader's side over the restricted and split dims."""
    cdef list new_start = [], new_terms = [], terms
    cdef int k, i, x, d
    cdef long long s, c
    for k in range(side.K):
        s, terms = side.start[k], []
        for i in range(side.nt[k]):
            d, c = side.tq[k][i], side.tc[k][i]
            if d >= w.n0:
                _beyond()
            s = _add(s, _mul(c, w.offset[d], bad), bad)
        for i in range(side.nt[k]):
            d, c = side.tq[k][i], side.tc[k][i]
            for x in range(w.ns[d]):
                terms.append((w.sd[d][x], _mul(c, w.sf[d][x], bad)))
        new_start.append(s)
        new_terms.append(terms)
    return new_start, new_terms


cdef object _through(CPiece* v, int* acc_d, long long* acc_a, int na, int k_u, CPiece* u,
                     int* bad):
    """``compose._through``: a list of 0 or 1 rows, or None."""
    cdef Walk w
    cdef int js[MAXS]
    cdef long long cs[MAXS]
    cdef int k, i, m, d, j
    cdef long long a, start, n, extent, lo, hi
    if u.dst.K < na:
        raise IndexError("the producer's destination has fewer dims than the piece reads")
    w.n = w.n0 = v.R
    for k in range(v.R):
        w.space[k], w.offset[k], w.ns[k], w.sd[k][0], w.sf[k][0] = v.space[k], 0, 1, k, 1
    w.qn = u.R
    for j in range(u.R):
        w.q_const[j], w.nq[j], w.seen[j] = 0, 0, 0
    for k in range(na):
        d, a, start = acc_d[k], acc_a[k], u.dst.start[k]
        m = 0
        for i in range(u.dst.nt[k]):  # a dim of 1 moves nothing
            if u.space[u.dst.tq[k][i]] > 1:
                js[m], cs[m] = u.dst.tq[k][i], u.dst.tc[k][i]
                m += 1
        n = 1 if d == NONE else v.space[d]
        if m == 1 and cs[0] > 1:  # a strided write (an interleave)
            if not _strided(&w, u, d, a, n, start, js[0], cs[0], bad):
                return []
            continue
        if m and not _digits(u.space, js, cs, m, bad):
            return None
        extent = _mul(cs[0], u.space[js[0]], bad) if m else 1
        lo = a if a > start else start
        hi = _add(a, n, bad)
        if _add(start, extent, bad) < hi:
            hi = _add(start, extent, bad)
        if hi <= lo:
            return []
        if d != NONE:
            w.offset[d], w.space[d] = lo - a, hi - lo
        if not _invert(&w, u, d, lo - start, hi - lo, js, cs, m, bad):
            return None
    for j in range(u.R):
        if not w.seen[j] and u.space[j] > 1:
            return None
    src = _side(&w, &u.src, bad)
    dst = _moved(&w, &v.dst, bad)
    return [(k_u, [w.space[i] for i in range(w.n)], src[0], src[1], dst[0], dst[1])]


cdef object _compose_box(CPiece* box, CPiece* producer, Py_ssize_t count, int* bad):
    """``compose._compose_box``."""
    cdef int acc_d[MAXK]
    cdef long long acc_a[MAXK]
    cdef int k, x
    cdef Py_ssize_t i
    cdef list result = []
    for k in range(box.src.K):
        if box.src.nt[k] > 1 or (box.src.nt[k] == 1 and box.src.tc[k][0] != 1):
            return None
        acc_d[k] = box.src.tq[k][0] if box.src.nt[k] else NONE
        acc_a[k] = box.src.start[k]
        for x in range(k):
            if acc_d[k] != NONE and acc_d[x] == acc_d[k]:
                return None
    for i in range(count):
        sub = _through(box, acc_d, acc_a, box.src.K, <int>i, &producer[i], bad)
        if sub is None:
            return None
        result += sub
    return result


def compose(tuple piece, list producer):
    """``compose._compose`` over plain sides.

    Args:
        piece: ``(space, src start, src terms, dst start, dst terms)`` of the reading piece.
        producer: the producer's pieces in the same form.

    Returns:
        ``[(producer index, space, src start, src terms, dst start, dst terms)]`` (the source
        side over the producer piece's source, the destination over the piece's), or None where
        ``_compose`` gives None.
    """
    cdef CPiece reader
    cdef CPiece boxes[MAXB]
    cdef CPiece* made = NULL
    cdef Py_ssize_t count = len(producer), i
    cdef int n, b, bad = 0
    if len(piece) != 5:
        raise ValueError("a piece is (space, src start, src terms, dst start, dst terms)")
    try:
        _read_piece(piece, &reader)
        made = <CPiece*>malloc(max(count, 1) * sizeof(CPiece))
        if made == NULL:
            raise MemoryError()
        for i in range(count):
            _read_piece(producer[i], &made[i])
        n = _boxes(&reader, boxes, &bad)
        if bad:
            _beyond()
        if n < 0:
            return None
        result = []
        for b in range(n):
            sub = _compose_box(&boxes[b], made, count, &bad)
            if bad:
                _beyond()
            if sub is None:
                return None
            result += sub
        return result
    except OverflowError:
        raise ValueError("a value past what the C composition holds")
    finally:
        free(made)
