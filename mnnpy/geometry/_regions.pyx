# cython: language_level=3
"""C twin of ``regions._plan`` (with ``walk.order`` and ``walk.walk_rows``): the same rows.

:func:`plan` reads the two :class:`~mnnpy.geometry.regions.Side` s into fixed-size C structs,
checking every rank, term count, iteration dim and value first; what it cannot hold (too many
dims or terms, a negative extent, a value whose arithmetic could pass 4e18) it declines with
``False`` and the caller runs the Python planner, which stays the reference (the tests compare
both). All arithmetic on the model's values is checked (``_mul``, ``_add``); a check that
fails declines too. Division and modulo follow Python's floor semantics. No code here runs
without the GIL: planning is small and each call uses its own buffers.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.math cimport INFINITY
from libc.stdlib cimport free, realloc

import numpy as np

cdef extern from "checked_int.h":
    long long _mul "ck_mul"(long long a, long long b, int* bad)
    long long _add "ck_add"(long long a, long long b, int* bad)
    long long _fdiv "ck_fdiv"(long long a, long long b)
    long long _fmod "ck_fmod"(long long a, long long b)

cdef enum:
    MAXK = 8  # tensor rank
    MAXT = 8  # terms per tensor dim
    MAXR = 16  # iteration dims
    MAXD = 32  # dims of one region (two per iteration dim at most)
    COLS = 11

# walk._cost's rough ns per row and per element (strided, lanes of a block, memcpy)
cdef double ROW_COST = 12.0, STRIDED_COST = 1.0, LANE_COST = 0.35, MEMCPY_COST = 0.15
cdef long long BIG = 9007199254740992  # 2 ** 53: walk costs divide exactly below it


cdef struct CSide:
    int K
    int packed
    long long stride[MAXK]
    long long area4
    long long start[MAXK]
    int nt[MAXK]
    int tq[MAXK][MAXT]
    long long tc[MAXK][MAXT]


cdef struct Ctx:
    int bad  # declined: the caller runs the Python planner
    int none  # too many rows
    long long limit
    long long nrows
    long long cap
    long long* rows


cdef struct Dim:
    long long n
    long long s
    long long d


cdef int _load(object side, int R, CSide* out) except -1:
    """0 when ``side`` fits ``out``, 1 when it does not (the Python planner then runs)."""
    cdef int K, k, i, bad = 0
    cdef long long q, c, size
    cdef long long shape[MAXK]
    layout = side.layout
    dims, start, terms = layout.shape, side.start, side.terms
    K = len(dims)
    out.packed = 1 if layout.packed else 0
    if K > MAXK or len(start) != K or len(terms) != K or (out.packed and K < 2):
        return 1
    out.K = K
    for k in range(K):
        shape[k] = dims[k]
        out.start[k] = start[k]
        t = terms[k]
        if len(t) > MAXT:
            return 1
        out.nt[k] = len(t)
        for i, (q, c) in enumerate(t):
            if q < 0 or q >= R:
                return 1
            out.tq[k][i] = <int>q
            out.tc[k][i] = c
    size = 1
    for k in range(K - 1, -1, -1):  # unpacked strides: prod(shape[k + 1:])
        out.stride[k] = size
        size = _mul(size, shape[k], &bad)
    out.area4 = 0
    if out.packed:
        size = 4
        for k in range(K - 1, 1, -1):
            out.stride[k] = size
            size = _mul(size, shape[k], &bad)
        out.area4 = size
        out.stride[1] = 0
        out.stride[0] = _mul(_fdiv(shape[1] + 3, 4), size, &bad)
    return bad


cdef long long _gcd(long long a, long long b) noexcept:
    if a < 0:
        a = -a
    while b:
        a, b = b, a % b
    return a


cdef void _strided(
    const CSide* side, int j, long long p, long long r, CSide* out, int* bad
) noexcept:
    """``Side.strided``: ``i_j = p * k + r``."""
    cdef int k, i
    out[0] = side[0]
    for k in range(side.K):
        for i in range(side.nt[k]):
            if side.tq[k][i] == j:
                out.start[k] = _add(out.start[k], _mul(side.tc[k][i], r, bad), bad)
                out.tc[k][i] = _mul(side.tc[k][i], p, bad)


cdef long long _expand(Ctx* ctx, long long* space, int R, CSide* src, CSide* dst,
                       long long budget) except -2:
    """``regions._expand``, planning each problem as it is found; -1: None."""
    cdef CSide* side
    cdef CSide a, b
    cdef int x, i, n, ki, j = 0
    cdef long long g = 0, p, r, nr, sub, total
    cdef long long sub_space[MAXR]
    for x in range(2):
        side = src if x == 0 else dst
        if not side.packed:
            continue
        n, ki = 0, -1
        for i in range(side.nt[1]):
            if side.tc[1][i] % 4 == 0:
                continue
            n += 1
            if ki < 0 or side.tc[1][i] < side.tc[1][ki] or (
                side.tc[1][i] == side.tc[1][ki]
                and space[side.tq[1][i]] > space[side.tq[1][ki]]
            ):
                ki = i
        if n <= 1:
            continue
        for i in range(side.nt[1]):
            if side.tc[1][i] % 4 and (
                side.tq[1][i] != side.tq[1][ki] or side.tc[1][i] != side.tc[1][ki]
            ):
                j, g = side.tq[1][i], side.tc[1][i]
                break
        else:  # every lane term is the kept one: Python's next() raises
            ctx.bad = 1
            return -1
        p = 4 // _gcd(g, 4)
        nr = p if p < space[j] else space[j]
        total = 0
        for r in range(nr):
            for i in range(R):
                sub_space[i] = space[i]
            sub_space[j] = _fdiv(space[j] - r + p - 1, p)
            _strided(src, j, p, r, &a, &ctx.bad)
            _strided(dst, j, p, r, &b, &ctx.bad)
            if ctx.bad:
                return -1
            sub = _expand(ctx, sub_space, R, &a, &b, _fdiv(budget, p))
            if sub < 0 or ctx.bad or ctx.none:
                return -1
            total += sub
        return total if total <= budget else -1
    _problem(ctx, space, R, src, dst)
    return 1


cdef void _steps(const CSide* side, int R, long long* out, int* bad) noexcept:
    """``regions._steps``."""
    cdef int k, i
    for i in range(R):
        out[i] = 0
    for k in range(side.K):
        for i in range(side.nt[k]):
            if side.packed and k == 1:
                if side.tc[k][i] % 4 == 0:
                    out[side.tq[k][i]] = _add(
                        out[side.tq[k][i]], _mul(side.tc[k][i] // 4, side.area4, bad), bad
                    )
            else:
                out[side.tq[k][i]] = _add(
                    out[side.tq[k][i]], _mul(side.tc[k][i], side.stride[k], bad), bad
                )


cdef long long _offset(const CSide* side, const long long* point, int* bad) noexcept:
    """``side.layout.offset(side.index(point))``."""
    cdef int k, i
    cdef long long v, total = 0
    for k in range(side.K):
        v = side.start[k]
        for i in range(side.nt[k]):
            v = _add(v, _mul(side.tc[k][i], point[side.tq[k][i]], bad), bad)
        if side.packed and k == 1:
            total = _add(total, _add(_mul(_fdiv(v, 4), side.area4, bad), _fmod(v, 4), bad), bad)
        else:
            total = _add(total, _mul(v, side.stride[k], bad), bad)
    return total


cdef int _collapse(Dim* dims, int n, Dim* out, int* bad) noexcept:
    """``walk._collapse``: ``out`` may be ``dims``."""
    cdef int i, m = 0
    cdef Dim x
    for i in range(n):
        x = dims[i]
        if m and out[m - 1].s == _mul(x.s, x.n, bad) and out[m - 1].d == _mul(x.d, x.n, bad):
            out[m - 1].n = _mul(out[m - 1].n, x.n, bad)
            out[m - 1].s, out[m - 1].d = x.s, x.d
        else:
            out[m] = x
            m += 1
    return m


cdef double _cost(const Dim* walk, int L, double total) noexcept:
    """``walk._cost``."""
    cdef long long n = walk[L - 1].n, m = 1, s1 = 0, d1 = 0
    if walk[L - 1].s == 1 and walk[L - 1].d == 1:
        return total / <double>n * ROW_COST + total * MEMCPY_COST
    if L > 1:
        m, s1, d1 = walk[L - 2].n, walk[L - 2].s, walk[L - 2].d
    if 1 < m <= 4 and (s1 if s1 < d1 else d1) * (m - 1) <= 3:
        return total / <double>(n * m) * ROW_COST + total * LANE_COST
    return total / <double>n * ROW_COST + total * STRIDED_COST


cdef int _order(Dim* dims, int n, Dim* best, int* bad) noexcept:
    """``walk.order``: the walk into ``best``, its length returned."""
    cdef Dim sorted_[MAXD]
    cdef Dim walk[MAXD]
    cdef Dim x
    cdef int i, k, L = 0, W, c, m, nbest
    cdef long long total = 1
    cdef double cost, best_cost = INFINITY
    for i in range(n):  # drop dims of 1, stable insertion sort by (-d, -s)
        x = dims[i]
        if x.n == 1:
            continue
        k = L
        while k > 0 and (
            sorted_[k - 1].d < x.d or (sorted_[k - 1].d == x.d and sorted_[k - 1].s < x.s)
        ):
            sorted_[k] = sorted_[k - 1]
            k -= 1
        sorted_[k] = x
        L += 1
    L = _collapse(sorted_, L, sorted_, bad)
    if L == 0:
        best[0].n, best[0].s, best[0].d = 1, 0, 0
        return 1
    for i in range(L):
        total = _mul(total, sorted_[i].n, bad)
    if total > BIG or total < -BIG:
        bad[0] = 1
        return 0
    nbest = L
    for i in range(L):
        best[i] = sorted_[i]
    for c in range(L):
        for m in range(-1, L):
            if m == c:
                continue
            W = 0
            for k in range(L):
                if k != c and k != m:
                    walk[W] = sorted_[k]
                    W += 1
            if m >= 0:
                walk[W] = sorted_[m]
                W += 1
            walk[W] = sorted_[c]
            W = _collapse(walk, W + 1, walk, bad)
            cost = _cost(walk, W, <double>total)
            if cost < best_cost:
                best_cost = cost
                nbest = W
                for k in range(W):
                    best[k] = walk[k]
    return nbest


cdef int _grow(Ctx* ctx, long long more) except -1:
    cdef long long cap = ctx.cap
    cdef long long* rows
    if ctx.nrows + more <= cap:
        return 0
    while cap < ctx.nrows + more:
        cap = cap * 2 if cap else 64
    rows = <long long*>realloc(ctx.rows, cap * COLS * sizeof(long long))
    if rows == NULL:
        raise MemoryError()
    ctx.rows, ctx.cap = rows, cap
    return 0


cdef int _rows(Ctx* ctx, long long s_off, long long d_off, Dim* walk, int W) except -1:
    """``walk.walk_rows`` appended to the context's rows (room already made)."""
    cdef Dim padded[MAXD + 2]
    cdef long long idx[MAXD]
    cdef long long so, do
    cdef long long* row
    cdef int i, lead, pad = 3 - W if W < 3 else 0
    for i in range(pad):
        padded[i].n, padded[i].s, padded[i].d = 1, 0, 0
    for i in range(W):
        padded[pad + i] = walk[i]
    W += pad
    lead = W - 3
    for i in range(lead):
        idx[i] = 0
    while True:
        so, do = s_off, d_off
        for i in range(lead):
            so = _add(so, _mul(idx[i], padded[i].s, &ctx.bad), &ctx.bad)
            do = _add(do, _mul(idx[i], padded[i].d, &ctx.bad), &ctx.bad)
        row = ctx.rows + ctx.nrows * COLS
        row[0], row[1] = so, do
        for i in range(3):
            row[2 + i] = padded[lead + i].n
            row[5 + i] = padded[lead + i].s
            row[8 + i] = padded[lead + i].d
        ctx.nrows += 1
        i = lead - 1
        while i >= 0:
            idx[i] += 1
            if idx[i] < padded[i].n:
                break
            idx[i] = 0
            i -= 1
        if i < 0:
            return 0


cdef int _problem(Ctx* ctx, long long* space, int R, CSide* src, CSide* dst) except -1:
    """One problem of ``regions._plan``: its rows, option by option."""
    cdef long long steps[2][MAXR]
    cdef int lx[2 * MAXT]
    cdef long long ls[2 * MAXT]
    cdef int lq[2 * MAXT]
    cdef long long lg[2 * MAXT]
    cdef int moving[MAXR]
    cdef int nopt[MAXR]
    cdef int idx[MAXR]
    cdef long long ofirst[MAXR][4]
    cdef int ond[MAXR][4]
    cdef Dim odims[MAXR][4][2]
    cdef Dim dims[MAXD]
    cdef Dim walk[MAXD]
    cdef long long point[MAXR]
    cdef CSide* sides[2]
    cdef CSide* side
    cdef int nl = 0, x, i, k, j, nd, W, fits
    cdef long long n, p, q, t, r, lead, step0, step1, b0, b1, l0, l1, s_off, d_off
    sides[0], sides[1] = src, dst
    for j in range(R):
        if space[j] == 0:
            return 0
        moving[j] = 0
    _steps(src, R, steps[0], &ctx.bad)
    _steps(dst, R, steps[1], &ctx.bad)
    for x in range(2):
        side = sides[x]
        for k in range(side.K):
            for i in range(side.nt[k]):
                moving[side.tq[k][i]] = 1
                if side.packed and k == 1 and side.tc[k][i] % 4:
                    lx[nl], ls[nl], lq[nl], lg[nl] = x, side.start[1], side.tq[k][i], side.tc[k][i]
                    nl += 1
    for j in range(R):  # regions._options
        n = space[j]
        if not moving[j]:
            nopt[j], ofirst[j][0], ond[j][0] = 1, 0, 0
            continue
        step0, step1 = steps[0][j], steps[1][j]
        p = 0
        for i in range(nl):
            if lq[i] == j:
                q = 4 // _gcd(lg[i], 4)
                p = q if p == 0 else p // _gcd(p, q) * q
        if p == 0:
            nopt[j], ofirst[j][0], ond[j][0] = 1, 0, 1
            odims[j][0][0].n, odims[j][0][0].s, odims[j][0][0].d = n, step0, step1
            continue
        b0, b1 = _mul(p, step0, &ctx.bad), _mul(p, step1, &ctx.bad)
        l0, l1 = step0, step1
        fits = 1
        for i in range(nl):
            if lq[i] != j:
                continue
            t = _mul(_fdiv(_mul(lg[i], p, &ctx.bad), 4), sides[lx[i]].area4, &ctx.bad)
            if lx[i] == 0:
                b0, l0 = _add(b0, t, &ctx.bad), _add(l0, lg[i], &ctx.bad)
            else:
                b1, l1 = _add(b1, t, &ctx.bad), _add(l1, lg[i], &ctx.bad)
            if _fmod(ls[i], 4) + _mul(lg[i], (p if p < n else n) - 1, &ctx.bad) >= 4:
                fits = 0
        if fits:
            q, t = _fdiv(n, p), _fmod(n, p)
            k = 0
            if q:
                ofirst[j][k], ond[j][k] = 0, 2
                odims[j][k][0].n, odims[j][k][0].s, odims[j][k][0].d = q, b0, b1
                odims[j][k][1].n, odims[j][k][1].s, odims[j][k][1].d = p, l0, l1
                k += 1
            if t:
                ofirst[j][k], ond[j][k] = p * q, 1
                odims[j][k][0].n, odims[j][k][0].s, odims[j][k][0].d = t, l0, l1
                k += 1
            nopt[j] = k
        else:
            k = 0
            for r in range(p if p < n else n):
                ofirst[j][k], ond[j][k] = r, 1
                odims[j][k][0].n = _fdiv(n - r + p - 1, p)
                odims[j][k][0].s, odims[j][k][0].d = b0, b1
                k += 1
            nopt[j] = k
        if nopt[j] == 0:
            return 0  # no combination (itertools.product of an empty option list)
    if ctx.bad:
        return 0
    for j in range(R):
        idx[j] = 0
    while True:  # itertools.product of the options, the last dim fastest
        nd = 0
        for j in range(R):
            point[j] = ofirst[j][idx[j]]
            for i in range(ond[j][idx[j]]):
                dims[nd] = odims[j][idx[j]][i]
                nd += 1
        for i in range(nd):
            if dims[i].n == 0:
                break
        else:
            W = _order(dims, nd, walk, &ctx.bad)
            if ctx.bad:
                return 0
            lead = 1
            for i in range(W - 3):
                lead = _mul(lead, walk[i].n, &ctx.bad)
            if ctx.bad:
                return 0
            if ctx.nrows + lead > ctx.limit:
                ctx.none = 1
                return 0
            s_off = _offset(src, point, &ctx.bad)
            d_off = _offset(dst, point, &ctx.bad)
            if ctx.bad:
                return 0
            _grow(ctx, lead)
            _rows(ctx, s_off, d_off, walk, W)
            if ctx.bad:
                return 0
            if ctx.nrows > ctx.limit:
                ctx.none = 1
                return 0
        j = R - 1
        while j >= 0:
            idx[j] += 1
            if idx[j] < nopt[j]:
                break
            idx[j] = 0
            j -= 1
        if j < 0:
            return 0


def plan(space, src, dst, long long limit):
    """``regions._plan(space, src, dst)`` with ``limit`` rows (``MAX_REGIONS``).

    Returns:
        The rows (int64, ``COLS`` columns), None when there are too many, or False when these
        sides are beyond what this planner holds (the caller then runs the Python one).
    """
    cdef long long sp[MAXR]
    cdef CSide a, b
    cdef Ctx ctx
    cdef int R, j
    cdef long long[:, ::1] view
    cdef long long found
    try:
        R = len(space)
        if R > MAXR:
            return False
        for j in range(R):
            sp[j] = space[j]
        for j in range(R):
            if sp[j] == 0:
                return np.zeros((0, COLS), np.int64)
        for j in range(R):
            if sp[j] < 0:
                return False
        if _load(src, R, &a) or _load(dst, R, &b):
            return False
    except (TypeError, ValueError, OverflowError):
        return False
    ctx.bad, ctx.none, ctx.limit, ctx.nrows, ctx.cap, ctx.rows = 0, 0, limit, 0, 0, NULL
    try:
        found = _expand(&ctx, sp, R, &a, &b, limit)
        if ctx.bad:
            return False
        if found < 0 or ctx.none:
            return None
        out = np.empty((ctx.nrows, COLS), np.int64)
        if ctx.nrows:
            view = out
            for j in range(ctx.nrows * COLS):
                view[j // COLS, j % COLS] = ctx.rows[j]
        return out
    finally:
        free(ctx.rows)


def side_key(side):
    """``regions._key``: a :class:`~mnnpy.geometry.regions.Side` as a hashable value.

    Bytes of int64s (the rank, whether NC4HW4, the shape, the start, per dim its term count and
    terms) where every value fits; else the plain tuple form. Either way, equal sides give equal
    keys; the two forms never equal each other (a memo miss, not a wrong answer).
    """
    cdef long long buf[256]
    cdef Py_ssize_t n = 0, k, K
    cdef long long q, c
    layout = side.layout
    shape, start, terms = layout.shape, side.start, side.terms
    try:
        K = len(shape)
        if 2 + 2 * K > 256 or len(start) != K or len(terms) != K:
            raise ValueError
        buf[0], buf[1] = K, 1 if layout.packed else 0
        n = 2
        for k in range(K):
            buf[n], buf[n + 1] = shape[k], start[k]
            n += 2
        for t in terms:
            if n + 1 + 2 * len(t) > 256:
                raise ValueError
            buf[n] = len(t)
            n += 1
            for q, c in t:
                buf[n], buf[n + 1] = q, c
                n += 2
    except (TypeError, ValueError, OverflowError):
        return shape, layout.packed, tuple(start), tuple(map(tuple, terms))
    return PyBytes_FromStringAndSize(<char*>buf, n * sizeof(long long))
