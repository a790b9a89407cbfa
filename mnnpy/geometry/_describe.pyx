# cython: language_level=3, boundscheck=True, wraparound=False
"""C twins of the geometry stage's per-unit loops: the same answers as the Python ones.

``within_budget``, ``sources`` and ``through`` are those of ``geometry/__init__.py``
(``within_budget``, ``_sources``, ``_through``: MNN's fuseRegion of a reader's pieces with the
writer's), ``pieces`` is what ``compose.compose`` builds from a remembered answer, and ``copies``
is ``CPURaster._plan`` (region rows per source and output), and ``describe`` is
``_Pass.describe`` (one unit's decisions, with ``aliases``; calling back into the ``_Pass`` for
``shared``). The Python functions stay the
reference and the fallback where this module is not built; the tests compare both over random
compositions and over whole networks. Every item is checked as it is read (a placed entry must be
an ``(output index, piece)`` tuple, a remembered answer a 6-tuple): a wrong one raises the
``TypeError`` / ``ValueError`` the Python code would, before anything is changed.
"""

from cpython.long cimport PyLong_FromVoidPtr

import numpy as np


cdef inline object _id(object o):
    """``id(o)``, without the call of the builtin."""
    return PyLong_FromVoidPtr(<void*>o)


include "../_slots.pxi"


cdef inline object _new(object cls):
    """``object.__new__(cls)`` (in C when ``cls``'s instances are made by ``object`` itself)."""
    o = _c_object_new(cls)
    return object.__new__(cls) if o is NotImplemented else o


# Tensor's, TensorDescribe's and Unit's slots read and written in place (see _slots.pxi); learnt
# on the first call (mnnpy.unit imports the geometry package)
cdef bint _learnt = False
cdef object _Tensor = None, _Describe = None, _Unit = None
cdef Py_ssize_t _T_DESCRIBE = -1, _D_REGIONS = -1, _D_VIRTUAL = -1, _D_BACKEND = -1
cdef Py_ssize_t _U_INPUTS = -1, _U_OUTPUTS = -1


cdef void _learn() except *:
    global _learnt, _Tensor, _Describe, _Unit, _T_DESCRIBE, _D_REGIONS, _D_VIRTUAL, _D_BACKEND
    global _U_INPUTS, _U_OUTPUTS
    from mnnpy.tensor import Tensor, TensorDescribe
    from mnnpy.unit import Unit

    _T_DESCRIBE = slot_offset(Tensor, "describe")
    _D_REGIONS = slot_offset(TensorDescribe, "regions")
    _D_VIRTUAL = slot_offset(TensorDescribe, "virtual")
    _D_BACKEND = slot_offset(TensorDescribe, "backend")
    _U_INPUTS, _U_OUTPUTS = slot_offset(Unit, "inputs"), slot_offset(Unit, "outputs")
    _Tensor, _Describe, _Unit = Tensor, TensorDescribe, Unit
    _learnt = True


cdef inline object _rows(object p):
    """``p.rows()``: its planned list's rows when planned already (no call)."""
    cdef object cell = p.planned
    if type(cell) is list and len(<list>cell):
        return (<list>cell)[0]
    return p.rows()


cdef inline tuple _pair(object item):
    """A placed entry ``(output index, piece)``, checked."""
    if type(item) is not tuple or len(<tuple>item) != 2:
        raise ValueError("a placed entry is an (output index, piece) pair")
    return <tuple>item


def within_budget(list placed, Py_ssize_t limit):
    """``geometry.within_budget``: every piece plans to rows, at most ``limit`` in all."""
    cdef Py_ssize_t total = 0
    for item in placed:
        rows = _rows(_pair(item)[1])
        if rows is None:
            return False
        total += len(rows)
        if total > limit:
            return False
    return True


def sources(list placed):
    """``geometry._sources``: the tensors the pieces read, by identity, in first-read order."""
    cdef dict out = {}
    for item in placed:
        source = _pair(item)[1].source
        out[_id(source)] = source
    return out


def through(list placed, object tensor, object writer, dict before, object compose,
            Py_ssize_t limit):
    """``geometry._through``: ``placed`` reading ``tensor`` through its ``writer``'s pieces.

    ``compose`` is ``compose.compose``. Returns ``(composed, their sources)`` or None.
    """
    cdef list composed = [], got
    cdef dict after, fan = {}
    cdef tuple pair
    cdef Py_ssize_t fan_in
    for item in placed:
        pair = _pair(item)
        p = pair[1]
        if p.source is not tensor:
            composed.append(pair)
            continue
        result = compose(p, writer)
        if result is None:
            return None
        got = result
        j = pair[0]
        for q in got:
            composed.append((j, q))
    for u in writer:
        fan[_id(u.source)] = None
    fan_in = max(len(before), len(fan))
    after = sources(composed)
    if len(after) > fan_in or not within_budget(composed, limit):
        return None
    return composed, after


cdef object _side(object side):
    """``compose._copy``: the side with its own start and terms lists (the layout shared)."""
    cdef object s = _new(type(side))
    cdef list terms = [list(t) for t in side.terms]
    s.layout = side.layout
    s.start = list(side.start)
    s.terms = terms
    return s


def pieces(list found, object producer, type piece):
    """``compose.compose``'s pieces (of class ``piece``) from its remembered answer ``found``.

    Each entry ``(producer piece, space, src, dst, description, planned)`` gives a new piece
    reading that producer piece's source, over copies of the remembered sides, which shares the
    description and the list its rows are planned into.
    """
    cdef list result = []
    cdef tuple entry
    cdef object p
    for item in found:
        if type(item) is not tuple or len(<tuple>item) != 6:
            raise ValueError("a remembered composition is a 6-tuple")
        entry = <tuple>item
        p = _new(piece)
        p.space = list(entry[1])
        p.source = producer[entry[0]].source
        p.src = _side(entry[2])
        p.dst = _side(entry[3])
        p.described = <tuple?>entry[4]
        p.planned = <list?>entry[5]
        result.append(p)
    return result


cdef list _described(object found, object side_key):
    """``compose._described``: each result with its description (``Piece.key``) and the list
    its rows are planned into."""
    cdef list result = []
    for k, sp, src, dst in found:
        result.append((k, sp, src, dst, (tuple(sp), side_key(src), side_key(dst)), []))
    return result


cdef class _Miss:
    """What ``compose`` computes on a memo miss: ``compose._found``'s answer, described.

    With ``compose_c`` (``_compose.compose``) its answer's sides are made here; where it
    declines, ``found`` (``compose._found``, which then runs ``_compose``) answers.
    """
    cdef object found, piece, producer, side_key, compose_c, side_t

    def __call__(self):
        cdef object piece = self.piece, producer = self.producer, rows = None, layout, s, d
        cdef list plain, got
        cdef bint declined = False
        if self.compose_c is not None:
            try:
                plain = [(u.space, u.src.start, u.src.terms, u.dst.start, u.dst.terms)
                         for u in producer]
                rows = self.compose_c((piece.space, piece.src.start, piece.src.terms,
                                       piece.dst.start, piece.dst.terms), plain)
            except (TypeError, ValueError, IndexError, ZeroDivisionError):
                rows, declined = None, True
            if rows is None and not declined:
                return None
            if rows is not None:
                layout = piece.dst.layout
                got = []
                for k, space, ss, st, ds, dt in rows:
                    s = _new(self.side_t)
                    s.layout, s.start, s.terms = producer[k].src.layout, ss, st
                    d = _new(self.side_t)
                    d.layout, d.start, d.terms = layout, ds, dt
                    got.append((k, space, s, d))
                return _described(got, self.side_key)
        found = self.found(piece, producer)
        return None if found is None else _described(found, self.side_key)


def compose(object piece, object producer, object memo, object found, type piece_t,
            object side_key, object compose_c=None, type side_t=None):
    """``compose.compose`` (its Python lines stay the reference): the remembered answer for
    the pieces' descriptions (``memo``, a ``Memo``), else ``found``'s (``compose._found``:
    ``compose_c``'s answer with sides of class ``side_t`` where given), described; new pieces
    of class ``piece_t`` built from it (:func:`pieces`), or None.
    """
    cdef object d = piece.described, k
    cdef list keys = []
    cdef _Miss miss
    if not d:
        d = piece.key()
    for u in producer:
        k = u.described
        if not k:
            k = u.key()
        keys.append(k)
    miss = _Miss.__new__(_Miss)
    miss.found, miss.piece, miss.producer, miss.side_key = found, piece, producer, side_key
    miss.compose_c, miss.side_t = compose_c, side_t
    known = memo.get((d, tuple(keys)), miss)
    if known is None:
        return None
    return pieces(known, producer, piece_t)


def copies(list pieces, Py_ssize_t limit):
    """``CPURaster._plan``: region rows per (source, output index), or None past ``limit``."""
    cdef dict grouped = {}
    cdef list out = [], group
    cdef tuple pair
    cdef Py_ssize_t total = 0
    if len(pieces) == 1:
        pair = _pair(pieces[0])
        p = pair[1]
        rows = _rows(p)
        if rows is None or len(rows) > limit:
            return None
        return [(p.source, pair[0], rows)]
    for item in pieces:
        pair = _pair(item)
        p = pair[1]
        rows = _rows(p)
        if rows is None:
            return None
        total += len(rows)
        if total > limit:
            return None
        src = p.source
        key = (_id(src), pair[0])
        group = grouped.get(key)
        if group is None:
            grouped[key] = [src, pair[0], rows]
        else:
            group.append(rows)
    for group in grouped.values():
        if len(group) == 3:
            out.append((group[0], group[1], group[2]))
        else:
            out.append((group[0], group[1], np.concatenate(group[2:])))
    return out


def decided(object outputs):
    """``CPURaster.on_resize``'s reading of the stage's plan (its outputs' ``regions``).

    Every output's pieces as ``(output index, piece)``, or None when an output has none (the op
    then computes its own).
    """
    cdef list pieces = []
    cdef Py_ssize_t j = 0
    for t in outputs:
        regions = t.describe.regions
        if regions is None:
            return None
        for p in regions:
            pieces.append((j, p))
        j += 1
    return pieces


def reads_other(list pieces, object inputs):
    """Whether a piece reads a tensor that is none of ``inputs`` (it reads through a writer)."""
    cdef set read = {_id(t) for t in inputs}
    for item in pieces:
        if _id(_pair(item)[1].source) not in read:
            return True
    return False


def fresh(object units, dict writer):
    """``_Pass``'s start of a resize: each output's writer in ``writer``, no decisions yet."""
    cdef object d
    if not _learnt:
        _learn()
    for u in units:
        for t in slot_get(u, _Unit, _U_OUTPUTS, "outputs"):
            writer[_id(t)] = u
            d = slot_get(t, _Tensor, _T_DESCRIBE, "describe")
            slot_set(d, _Describe, _D_REGIONS, "regions", None)
            slot_set(d, _Describe, _D_VIRTUAL, "virtual", False)


def moved(list known, object inputs, type piece):
    """``computers._movement``'s placed pieces (of class ``piece``) from its remembered boxes.

    Each entry ``(input, output, space, src, dst, description, planned)`` gives
    ``(output, piece)``: a new piece reading ``inputs[input]`` over the remembered sides (shared:
    pieces never change their sides), which shares the description and the list its rows are
    planned into.
    """
    cdef list result = []
    cdef tuple entry
    cdef object p
    for item in known:
        if type(item) is not tuple or len(<tuple>item) != 7:
            raise ValueError("a remembered box is a 7-tuple")
        entry = <tuple>item
        p = _new(piece)
        p.space = list(entry[2])
        p.source = inputs[entry[0]]
        p.src = entry[3]
        p.dst = entry[4]
        p.described = <tuple?>entry[5]
        p.planned = <list?>entry[6]
        result.append((entry[1], p))
    return result


def shared(type piece, object space, object source, object src, object dst, tuple described,
           list planned):
    """``Piece(list(space), source, src, dst).shares(described, planned)`` (of class ``piece``)."""
    cdef object p = _new(piece)
    p.space = list(space)
    p.source = source
    p.src = src
    p.dst = dst
    p.described = described
    p.planned = planned
    return p


def readers(object units, dict readers):
    """``_Pass``'s unfolded readers: each unit in ``readers[id(t)]`` once per distinct input."""
    cdef dict once
    cdef list known
    if not _learnt:
        _learn()
    for u in units:
        once = {}
        for t in slot_get(u, _Unit, _U_INPUTS, "inputs"):
            once[_id(t)] = t
        for k in once:
            known = readers.get(k)
            if known is None:
                readers[k] = [u]
            else:
                known.append(u)


def count(dict seen, object inputs, object extra):
    """``_Pass.count_reads``'s counting: one more read of each of ``inputs`` and ``extra``."""
    for t in inputs:
        k = _id(t)
        seen[k] = seen.get(k, 0) + 1
    for t in extra:
        k = _id(t)
        seen[k] = seen.get(k, 0) + 1


cdef bint _all_readable(object pas, object tensors, object backend) except -1:
    """``_Pass.all_readable``."""
    cdef set taken = pas.taken
    cdef dict writer = pas.writer, targets = pas.targets
    cdef object host = pas.host, unit, owner
    for t in tensors:
        k = _id(t)
        if k in taken:
            return False
        unit = writer.get(k)
        if unit is None:
            d = slot_get(t, _Tensor, _T_DESCRIBE, "describe")
            owner = slot_get(d, _Describe, _D_BACKEND, "backend")
        else:
            owner = targets.get(_id(unit))
            if not owner:
                owner = host
        if owner is not backend and (owner is None or not backend.can_share(t, owner)):
            return False
    return True


cdef bint _aliases(object pas, object unit, frozenset aliasing, tuple kit) except -1:
    """``_Pass.aliases``; ``kit`` is ``(OpType.ConvertTensor, same_bytes_convert, same_storage,
    the usages that are not DYNAMIC)``."""
    cdef object kind = unit.op.type, inputs = unit.inputs, outputs = unit.outputs
    cdef object backend, src, dst, d, owner, w
    if kind not in aliasing or not inputs:
        return False
    backend = pas.targets.get(_id(unit))
    if backend is None or not outputs:
        return False
    src, dst = inputs[0], outputs[0]
    if kind == kit[0]:
        if not kit[1](src, dst):
            return False
    elif not kit[2](src, dst):
        return False
    d = src.describe
    if d.use_count - d.shape_reads - (<dict>pas.seen).get(_id(src), 0) != 1:
        return False
    if inputs.count(src) != 1:
        return False
    for t in (src, dst):  # ``_dynamic``
        if t.describe.usage in kit[3] or t.describe.content is not None:
            return False
    w = (<dict>pas.writer).get(_id(src))  # ``owner``
    owner = d.backend if w is None else (pas.targets.get(_id(w)) or pas.host)
    return owner is backend and src.size == dst.size


cdef _record(object unit, list placed, object backend, dict written, type written_t):
    """``_Pass._record``: the outputs' pieces, and their writer."""
    cdef list got
    cdef tuple pair, pieces
    cdef Py_ssize_t j = 0
    for t in unit.outputs:
        got = []
        for item in placed:
            pair = _pair(item)
            if pair[0] == j:
                got.append(pair[1])
        pieces = tuple(got)
        t.describe.regions = pieces
        written[_id(t)] = written_t(unit, j, pieces, backend)
        j += 1


def describe(object pas, object unit, frozenset aliasing, tuple kit, object regions_of,
             object compose, Py_ssize_t limit, type written_t, type through_t, type geometry_t):
    """``_Pass.describe`` (the same decisions, in the same order); ``pas`` is the ``_Pass``.

    ``aliasing`` is ``_ALIASING``, ``kit`` what ``aliases`` asks (see ``_aliases``),
    ``regions_of`` and ``compose`` the computers' and
    ``compose.compose``, ``limit`` the region budget; ``written_t``, ``through_t`` and
    ``geometry_t`` are ``_Written``, ``ReadThrough`` and ``UnitGeometry``.
    """
    return _describe(pas, unit, aliasing, kit, regions_of, compose, limit, written_t, through_t,
                     geometry_t)


def plan(object pas, list real, object computers, frozenset aliasing, tuple kit,
         object regions_of, object compose, Py_ssize_t limit, type written_t, type through_t,
         type geometry_t):
    """``plan_geometry``'s loop over the unfolded units ``real``: per unit described, its
    decisions (by the unit's identity), and each unit's reads counted (``_Pass.count_reads``).

    ``computers`` is ``_COMPUTERS``; the rest as for :func:`describe`.
    """
    cdef dict result = {}, seen = pas.seen
    cdef set taken = pas.taken, in_place = pas.in_place
    cdef object g, known
    for u in real:
        kind = u.op.type
        g = None
        if kind in computers:
            g = _describe(pas, u, aliasing, kit, regions_of, compose, limit, written_t,
                          through_t, geometry_t)
            if g is not None:
                result[_id(u)] = g
        if kind in aliasing:  # the input a reshape takes over in place (``count_reads``)
            known = pas.aliased
            if known[1] if known is not None and known[0] is u else _aliases(pas, u, aliasing,
                                                                             kit):
                taken.add(_id(u.inputs[0]))
                in_place.add(_id(u))
        count(seen, u.inputs, () if g is None else g.sources)
    return result


cdef object _describe(object pas, object unit, frozenset aliasing, tuple kit,
                      object regions_of, object compose, Py_ssize_t limit, type written_t,
                      type through_t, type geometry_t):
    cdef dict placed_by = pas.placed, written = pas.written, composed_by = pas.composed
    cdef dict expected = pas.expected, counted = pas.through
    cdef object backend = pas.targets.get(_id(unit))
    cdef object placed, own, before, w, d, got, found
    cdef list decisions = [], new_list, inputs
    cdef tuple key, new
    cdef bint aliases
    cdef Py_ssize_t readers
    if backend is None or not backend.supports_regions:
        return None
    k = _id(unit)
    if k in placed_by:
        placed = placed_by[k]
    else:
        placed = placed_by[k] = regions_of(unit.op, unit.inputs, unit.outputs)
    own = placed
    if placed is None or not within_budget(placed, limit):
        return None
    before = sources(placed)
    if not _all_readable(pas, (<dict>before).values(), backend):
        return None
    inputs = list(unit.inputs)
    aliases = unit.op.type in aliasing and _aliases(pas, unit, aliasing, kit)
    pas.aliased = (unit, aliases)
    for t in dict.fromkeys(inputs):
        w = written.get(_id(t))
        if w is None or w.backend is not backend:
            continue
        if aliases and t is inputs[0] and _id(w.unit) in pas.in_place:
            continue
        d = t.describe
        readers = expected.setdefault(_id(t), d.use_count - d.shape_reads)
        if readers < 1 or inputs.count(t) != 1:
            continue
        if readers > 1 and not pas.shared(t, backend, readers):
            continue
        key = (k, _id(t))
        if placed is own and key in composed_by:
            got = composed_by.pop(key)
        else:
            got = through(placed, t, w.pieces, before, compose, limit)
        if got is None:
            continue
        found, after = got
        new_list = [s for j, s in (<dict>after).items() if j not in before]
        new = tuple(new_list)
        if new and not _all_readable(pas, new, backend):
            continue
        placed, before = found, after
        n = counted.get(_id(t), 0) + 1
        counted[_id(t)] = n
        d.virtual = n == readers
        decisions.append(through_t(t, w.unit, w.index, new))
    _record(unit, placed, backend, written, written_t)
    if not decisions:
        return geometry_t(backend)
    srcs = tuple(dict.fromkeys([s for r in decisions for s in r.sources]))
    for s in srcs:
        s.describe.use_count += 1
    return geometry_t(backend, tuple(decisions), srcs)


def resize(object ex, object inputs, object outputs, Py_ssize_t limit, object padding_rows):
    """``CPURaster.on_resize`` (its Python lines stay the reference): ``ex``'s plan for these
    tensors, the geometry stage's pieces else ``ex.pieces``, or its ``resize_plain``.

    ``padding_rows`` is ``regions.padding_rows``.
    """
    cdef list skip = [t.describe.virtual for t in outputs], pads
    cdef object pieces, planned, shape
    cdef bint read
    cdef Py_ssize_t j = 0
    ex._skip = skip
    ex._seen = None
    ex._in_place = False  # set by ``idle`` once the buffers exist
    ex._write_all = [False] * len(skip)
    ex._copies = None
    ex._gathers = {}
    ex._pieces = []
    pieces = decided(outputs)
    if pieces is None:
        pieces = ex.pieces(inputs, outputs)
    if pieces is not None and type(pieces) is not list:
        pieces = list(pieces)
    read = pieces is not None and reads_other(pieces, inputs)
    ex.read_through = read
    planned = None if pieces is None else copies(pieces, limit)
    if pieces is None or planned is None:
        assert not read, "the geometry stage planned within the region budget"
        ex.resize_plain(inputs, outputs)
        return
    ex._pieces = pieces
    ex._copies = planned
    ex._gathers = None  # planned by the first ``_runs``: an idle raster never runs
    pads = []
    for t in outputs:
        shape = t.shape
        if shape[1:] and shape[1] % 4 and t.is_packed:
            pads.append((j, padding_rows(shape)))
        j += 1
    ex._pads = pads


def idle(object ex, object outputs, object itself):
    """``CPURaster.idle`` (its Python lines stay the reference); ``itself`` is
    ``lane_gather.itself``.

    Where ``bind`` follows (not idle), the flags found are left for it in ``ex._seen``.
    """
    cdef list skip = [t.describe.virtual for t in outputs], seen = [], onto = []
    cdef object planned = ex._copies, flags
    ex._skip = skip
    ex._seen = None
    if planned is None:
        return False
    if all(skip):
        ex._in_place = None
        return True
    for src, j, rows in planned:
        flags = itself(src, outputs[j], rows)
        seen.append((src.buffer, outputs[j].buffer, rows, flags))
        onto.append(np.count_nonzero(flags) == len(rows))
    ex._in_place = all(onto) and not ex._pads
    for entry, same in zip(planned, onto):
        if not skip[entry[1]] and not same:
            ex._seen = seen  # ``bind`` follows: it takes these flags over
            return False
    if all([skip[j] for j, _ in ex._pads]):
        return True
    ex._seen = seen
    return False


def bind(object ex, object outputs, object itself, object per_output, object bind_regions):
    """``CPURaster.bind`` with its ``_runs`` (its Python lines stay the reference).

    ``itself`` and ``per_output`` are ``lane_gather``'s, ``bind_regions`` the kernel binding the
    jobs. The rows onto the same bytes that ``idle`` just found (``ex._seen``, per copy with the
    buffers it read) are taken over where the buffers are still the same, not asked again.
    """
    cdef list skip = [t.describe.virtual for t in outputs], jobs = [], seen
    cdef object planned = ex._copies, gathers, src, rows, flags, known, ob
    cdef Py_ssize_t i = 0, j, same
    ex._skip = skip
    seen = ex._seen
    ex._seen = None  # (used once: it holds the buffers)
    if planned is None:
        return None
    if seen is not None and len(seen) != len(planned):
        seen = None
    gathers = ex._gathers
    if gathers is None:
        gathers = ex._gathers = per_output(planned, outputs)
    for src, j, rows in planned:
        if j not in gathers:
            known = None if seen is None else seen[i]
            ob = outputs[j]
            if (known is not None and known[0] is src.buffer and known[1] is ob.buffer
                    and known[2] is rows):
                flags = known[3]
            else:
                flags = itself(src, ob, rows)
            same = np.count_nonzero(flags)  # rows onto the same bytes are left out
            if same < len(rows) and not skip[j]:
                jobs.append((src.buffer, ob.buffer, rows[~flags] if same else rows, False))
        i += 1
    for j, (srcs, grows, rest) in gathers.items():
        if skip[j]:
            continue
        ob = outputs[j].buffer
        jobs.append((tuple([t.buffer for t in srcs]), ob, grows, False))
        for k, rows in rest:
            jobs.append((srcs[k].buffer, ob, rows, False))
    for j, rows in ex._pads:
        if not skip[j]:
            ob = outputs[j].buffer
            jobs.append((ob, ob, rows, True))
    return bind_regions(jobs, ex.backend.num_thread)


def refine(object a, object b):
    """``regions.refine``: the coarsest shape ``a`` and ``b`` are both merges of consecutive
    dims of, or None. Their values must be ints (a ``TypeError`` else)."""
    cdef set cuts = {1}
    cdef list ordered, result = []
    cdef object pa = 1, pb = 1, lo, hi
    cdef Py_ssize_t i
    for v in a:
        if type(v) is not int:
            raise TypeError(f"a shape holds ints, not {type(v).__name__}")
        pa = pa * v
        cuts.add(pa)
    for v in b:
        if type(v) is not int:
            raise TypeError(f"a shape holds ints, not {type(v).__name__}")
        pb = pb * v
        cuts.add(pb)
    if pa != pb or 0 in cuts:
        return None
    ordered = sorted(cuts)
    for i in range(1, len(ordered)):
        lo, hi = ordered[i - 1], ordered[i]
        if hi % lo:
            return None
        result.append(hi // lo)
    return result


def merged(object layout, object order, object space, type side_t):
    """``regions.merged``: the side (of class ``side_t``) of a tensor of ``layout`` whose dims,
    taken in ``order``, merge consecutive dims of ``space``."""
    cdef tuple shape = layout.shape
    cdef list terms = [[] for _ in shape], group, mine
    cdef Py_ssize_t j = 0, q
    cdef object size, coef
    for k in order:
        group, size = [], 1
        while size < shape[k]:
            group.append(j)
            size = size * space[j]
            j += 1
        coef = 1
        mine = terms[k]
        for q in reversed(group):
            mine.insert(0, (q, coef))
            coef = coef * space[q]
    side = _new(side_t)
    side.layout = layout
    side.start = [0] * len(shape)
    side.terms = terms
    return side


def move_key(list found, object tensors):
    """``computers._movement``'s memo key: its boxes (``computers.boxes``) with the starts and
    dims as tuples, and the shape and packing of each of ``tensors``."""
    cdef list boxes = [], shapes = []
    for item in found:
        i, j, space, s, d, k = item
        boxes.append((i, j, space, tuple(s), tuple(d), tuple(k)))
    for t in tensors:
        shapes.append((tuple(t.shape), t.is_packed))
    return tuple(boxes), tuple(shapes)
