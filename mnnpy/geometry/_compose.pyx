# cython: language_level=3, boundscheck=True, wraparound=True
"""C twin of ``compose._compose`` (MNN's fuseRegion): the same pieces, from plain lists.

A side is ``(start, terms)``: per logical dim a start and its ``(iteration dim, coefficient)``
terms; layouts are never looked at here, only passed through by the caller. Values stay Python
integers (Python's floor division, no overflow); only the positions and counts are C integers,
each checked against its list before it is used. :func:`compose` answers what ``_compose``
answers, as ``(producer index, space, src start, src terms, dst start, dst terms)`` rows, or None;
anything it cannot read (a rank or term that does not match) raises, and the caller then runs
the Python ``_compose``, which stays the reference (the tests compare both).
"""

from itertools import product


def _by_coefficient(term):
    return -term[1]


cdef void _same_length(list start, list terms) except *:
    if len(start) != len(terms):
        raise ValueError("a side's start and terms differ in length")


cdef tuple _fixed(list start, list terms, Py_ssize_t j, object value):
    """``Side.fixed``: iteration dim ``j`` fixed at ``value``."""
    cdef list new_start = [], new_terms = []
    cdef Py_ssize_t k
    _same_length(start, terms)
    for k in range(len(start)):
        s = start[k]
        kept = []
        for q, c in terms[k]:
            if q == j:
                s += c * value
            else:
                kept.append((q, c))
        new_start.append(s)
        new_terms.append(kept)
    return new_start, new_terms


cdef list _boxes(list space, list s_start, list s_terms, list d_start, list d_terms):
    """``compose._boxes`` (limit 16): ``[(space, src start, src terms, dst start, dst terms)]``."""
    cdef list fix = [], new, result
    cdef Py_ssize_t ones
    for terms in s_terms:
        if len(terms) > 1 or (terms and terms[0][1] != 1):
            ones = 0
            for _, c in terms:
                if c == 1:
                    ones += 1
            if ones != 1:
                return None
            new = [j for j, c in terms if c != 1 and j not in fix]
            fix += new
    if not fix:
        return [(space, s_start, s_terms, d_start, d_terms)]
    total = 1
    for j in fix:
        total *= space[j]
    if total > 16:
        return None
    result = []
    for values in product(*[range(space[j]) for j in fix]):
        ss, st, ds, dt, sp = s_start, s_terms, d_start, d_terms, list(space)
        for j, v in zip(fix, values):
            ss, st = _fixed(ss, st, j, v)
            ds, dt = _fixed(ds, dt, j, v)
            sp[j] = 1
        result.append((sp, ss, st, ds, dt))
    return result


cdef class _Walk:
    """``compose._Walk``: the iteration space of a piece being composed."""

    cdef list space, offset, split, q_const, q_terms, seen

    def __init__(self, list space, Py_ssize_t q_dims):
        cdef Py_ssize_t n = len(space)
        self.space = list(space)
        self.offset = [0] * n
        self.split = [[(d, 1)] for d in range(n)]
        self.q_const = [0] * q_dims
        self.q_terms = [[] for _ in range(q_dims)]
        self.seen = [False] * q_dims

    cdef tuple side(self, list start, list terms):
        cdef list new_start = [], new_terms = []
        cdef dict coefs
        _same_length(start, terms)
        for s, t in zip(start, terms):
            coefs = {}
            for j, c in t:
                s += c * self.q_const[j]
                for d, f in self.q_terms[j]:
                    coefs[d] = coefs.get(d, 0) + c * f
            new_start.append(s)
            new_terms.append([(d, c) for d, c in coefs.items() if c])
        return new_start, new_terms

    cdef tuple moved(self, list start, list terms):
        cdef list new_start = [], new_terms = []
        _same_length(start, terms)
        for s, t in zip(start, terms):
            for d, c in t:
                s += c * self.offset[d]
            new_start.append(s)
            new_terms.append([(n, c * f) for d, c in t for n, f in self.split[d]])
        return new_start, new_terms


cdef tuple _digits(list u_space, list terms):
    """``compose._digits``: the dims and place values of a merged dim, or None."""
    cdef list order = sorted(terms, key=_by_coefficient)
    cdef list js = [j for j, _ in order], cs = [c for _, c in order]
    cdef Py_ssize_t i, n = len(js)
    for i in range(n):
        inner = cs[i + 1] * u_space[js[i + 1]] if i + 1 < n else 1
        if cs[i] != inner:
            return None
    return js, cs


cdef bint _strided(_Walk walk, list u_space, object d, object a, object n, object start,
                   object j, object c) except -1:
    """``compose._strided``."""
    q0 = max(0, -(-(a - start) // c))
    q1 = min(u_space[j], -(-(a + n - start) // c))
    if q1 <= q0:
        return False
    walk.q_const[j] += q0
    walk.seen[j] = True
    if d is not None:
        walk.offset[d], walk.space[d] = start + c * q0 - a, q1 - q0
        walk.split[d] = [(d, c)]
        walk.q_terms[j].append((d, 1))
    return True


cdef bint _invert(_Walk walk, list u_space, object d, object r0, object n, list js,
                  list cs) except -1:
    """``compose._invert``."""
    cdef Py_ssize_t i, o, m = len(js)
    if not m:
        return True
    cdef list g = [u_space[j] for j in js]
    if d is None or n == 1:
        for i in range(m):
            walk.q_const[js[i]] += r0 // cs[i] % g[i]
            walk.seen[js[i]] = True
        return True
    i = m - 1
    while i > 0 and r0 % (cs[i] * g[i]) == 0 and n % (cs[i] * g[i]) == 0:
        i -= 1
    first, count = r0 // cs[i] % g[i], n // cs[i]
    if r0 % cs[i] or n % cs[i] or first + count > g[i]:
        return False
    walk.space[d] = count
    walk.split[d] = [(d, cs[i])]
    for o in range(i):
        walk.q_const[js[o]] += r0 // cs[o] % g[o]
    walk.q_const[js[i]] += first
    walk.q_terms[js[i]].append((d, 1))
    for o in range(i + 1, m):
        walk.space.append(g[o])
        nd = len(walk.space) - 1
        walk.split[d].append((nd, cs[o]))
        walk.q_terms[js[o]].append((nd, 1))
    for j in js:
        walk.seen[j] = True
    return True


cdef object _through(tuple box, list access, Py_ssize_t k_u, tuple u):
    """``compose._through``: a list of 0 or 1 rows, or None."""
    cdef list v_space = box[0]
    cdef list u_space = u[0], u_ds = u[3], u_dt = u[4], terms
    cdef _Walk walk = _Walk(v_space, len(u_space))
    cdef Py_ssize_t k
    cdef tuple radix
    if len(u_ds) < len(access) or len(u_dt) < len(access):
        raise IndexError("the producer's destination has fewer dims than the piece reads")
    for k in range(len(access)):
        d, a = access[k]
        start = u_ds[k]
        terms = [(j, c) for j, c in u_dt[k] if u_space[j] > 1]  # a dim of 1 moves nothing
        if len(terms) == 1 and terms[0][1] > 1:  # a strided write (an interleave)
            n = 1 if d is None else v_space[d]
            if not _strided(walk, u_space, d, a, n, start, terms[0][0], terms[0][1]):
                return []
            continue
        radix = _digits(u_space, terms) if terms else ([], [])
        if radix is None:
            return None
        js, cs = radix
        extent = cs[0] * u_space[js[0]] if js else 1
        n = 1 if d is None else v_space[d]
        lo, hi = max(a, start), min(a + n, start + extent)
        if hi <= lo:
            return []
        if d is not None:
            walk.offset[d], walk.space[d] = lo - a, hi - lo
        if not _invert(walk, u_space, d, lo - start, hi - lo, js, cs):
            return None
    for seen, n in zip(walk.seen, u_space):
        if not seen and n > 1:
            return None
    src = walk.side(u[1], u[2])
    dst = walk.moved(box[3], box[4])
    return [(k_u, walk.space, src[0], src[1], dst[0], dst[1])]


cdef object _compose_box(tuple box, list producer):
    """``compose._compose_box``."""
    cdef list access = [], dims, result = []
    cdef list s_start = box[1], s_terms = box[2]
    cdef Py_ssize_t k
    _same_length(s_start, s_terms)
    for k in range(len(s_start)):
        terms = s_terms[k]
        if len(terms) > 1 or (terms and terms[0][1] != 1):
            return None
        access.append((terms[0][0] if terms else None, s_start[k]))
    dims = [d for d, _ in access if d is not None]
    if len(set(dims)) != len(dims):
        return None
    for k in range(len(producer)):
        sub = _through(box, access, k, producer[k])
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
    boxes = _boxes(piece[0], piece[1], piece[2], piece[3], piece[4])
    if boxes is None:
        return None
    result = []
    for box in boxes:
        sub = _compose_box(box, producer)
        if sub is None:
            return None
        result += sub
    return result
