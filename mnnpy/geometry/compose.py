"""Composition of box copies (MNN's fuseRegion).

A copy reading a tensor that other copies write is rewritten to read their sources.

A :class:`Piece` is one box copy in logical coordinates (see :mod:`regions`). :func:`compose`
inverts the writer's destination side over the reader's box: a writer dim read by a reader dim
with coefficient 1 is a shift; a merged writer dim (a reshape) is split by its digits where the
reader's range is a box of them. Anything else is refused (None) and the tensor is written.
``_compose.pyx`` is its C twin (the same pieces from plain lists); ``_compose`` here stays the
reference and the fallback where the twin declines.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mnnpy.geometry.regions import Layout, Side, Terms, remembered, side_key
from mnnpy.memo import Memo

try:  # C twin of _compose (setup.py builds it); the Python one: reference and fallback
    from mnnpy.geometry._compose import compose as _compose_c
except ImportError:  # not built: the Python function
    _compose_c = None  # type: ignore[assignment]
try:  # C twins of the piece building in compose, and of compose
    from mnnpy.geometry._describe import compose as _compose_fast
    from mnnpy.geometry._describe import pieces as _pieces_c
except ImportError:  # not built: the Python lines
    _pieces_c = _compose_fast = None  # type: ignore[assignment]

__all__ = ["Piece", "compose"]


@dataclass(slots=True)
class Piece:
    """One box copy: over ``space``, ``source[src.index(p)]`` goes to ``out[dst.index(p)]``.

    ``source`` is opaque here (the executions put the tensor read).
    """

    space: list[int]
    source: object
    src: Side
    dst: Side
    planned: list[np.ndarray | None] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    described: tuple = field(default=(), init=False, repr=False, compare=False)

    def key(self) -> tuple:
        """This copy's description, hashable: space and both sides (made once per piece).

        What the memos key by: ``compose``'s and the region planner's (``regions.remembered``).
        """
        if not self.described:
            self.described = (tuple(self.space), side_key(self.src), side_key(self.dst))
        return self.described

    def rows(self) -> np.ndarray | None:
        """The region rows of this copy (``regions.plan``), planned once per piece.

        Shared with the planner's memo: callers must not write them. Pieces are not changed once
        made (composition makes new ones), so the rows and the description stay this piece's.
        ``planned`` holds them once asked; pieces made from one remembered description share
        that list (:func:`shares`), so the rows are planned once for all of them.
        """
        cell = self.planned
        if not cell:
            cell.append(remembered(self.space, self.src, self.dst, self.key()))
        return cell[0]

    def shares(self, described: tuple, planned: list) -> Piece:
        """This piece, described by ``described`` and planned into ``planned`` (a memo's)."""
        self.described, self.planned = described, planned
        return self


def compose(piece: Piece, producer: Sequence[Piece]) -> list[Piece] | None:
    """``piece`` reading the sources of the ``producer`` pieces that write all it reads.

    The same copy reading the producer's sources instead (MNN's fuseRegion), or None when that is
    not affine (``piece`` must read a box; a merged dim is split only where the box follows its
    digits). A piece reading a dim as a few boxes (a reshape splitting the channels into groups,
    ``c = 58 * g + i``) is first cut into one box per value of the outer terms (:func:`_boxes`).

    Answers are remembered by description (networks repeat the same blocks, and resizes repeat
    them), with the index of the producer piece each result reads; each call gets new pieces.
    """
    if _compose_fast is not None:  # the C twin of the lines below
        return _compose_fast(piece, producer, _memo, _found, Piece, side_key, _compose_c, Side)
    key = (piece.described or piece.key(), tuple([u.described or u.key() for u in producer]))
    found = _memo.get(key, lambda: _described(_found(piece, producer)))
    if found is None:
        return None
    if _pieces_c is not None:  # the C twin of the loop below
        return _pieces_c(found, producer, Piece)
    result = []
    for k, space, src, dst, described, planned in found:
        p = Piece(list(space), producer[k].source, _copy(src), _copy(dst))
        result.append(p.shares(described, planned))  # the copies describe the same
    return result


Found = list[tuple[int, list[int], Side, Side]] | None  # per result: producer piece, space, sides
# what the memo keeps: each result with its description (``Piece.key``) and rows (``planned``)
Described = list[tuple[int, list[int], Side, Side, tuple, list]] | None
_memo: Memo[Described] = Memo(4096)


def _described(found: Found) -> Described:
    """``found`` with each result's description, made once when it is remembered.

    And the list its rows are planned into (once, by the first piece asked: ``Piece.rows``).
    """
    if found is None:
        return None
    return [(k, sp, s, d, Piece(sp, None, s, d).key(), []) for k, sp, s, d in found]


def _found(piece: Piece, producer: Sequence[Piece]) -> Found:
    """:func:`compose`'s answer on a memo miss: the C twin's, else (declined) ``_compose``'s."""
    if _compose_c is not None:
        try:
            plain = [
                (u.space, u.src.start, u.src.terms, u.dst.start, u.dst.terms) for u in producer
            ]
            rows = _compose_c(
                (piece.space, piece.src.start, piece.src.terms, piece.dst.start, piece.dst.terms),
                plain,
            )
            declined = False
        except (TypeError, ValueError, IndexError, ZeroDivisionError):
            rows, declined = None, True  # not plain lists, or what _compose raises on: it says
        if rows is None and not declined:
            return None
        if rows is not None:
            layout = piece.dst.layout
            return [
                (k, space, Side(producer[k].src.layout, ss, st), Side(layout, ds, dt))
                for k, space, ss, st, ds, dt in rows
            ]
    tagged = [Piece(u.space, k, u.src, u.dst) for k, u in enumerate(producer)]
    result = _compose(piece, tagged)
    return None if result is None else [(_index(p), p.space, p.src, p.dst) for p in result]


def _index(p: Piece) -> int:
    """The producer piece a result reads (:func:`compose` tags the producer with indexes)."""
    assert isinstance(p.source, int)
    return p.source


def _copy(side: Side) -> Side:
    return Side(side.layout, list(side.start), [list(t) for t in side.terms])


def _compose(piece: Piece, producer: Sequence[Piece]) -> list[Piece] | None:
    """:func:`compose` without the memo."""
    boxes = _boxes(piece)
    if boxes is None:
        return None
    result: list[Piece] = []
    for box in boxes:
        sub = _compose_box(box, producer)
        if sub is None:
            return None
        result += sub
    return result


def _boxes(piece: Piece, limit: int = 16) -> list[Piece] | None:
    """``piece`` as pieces that each read a box, or None.

    The iteration dims of every term but a dim's one coefficient-1 term are fixed at each of
    their values (at most ``limit`` pieces).
    """
    fix: list[int] = []
    for terms in piece.src.terms:
        if len(terms) > 1 or (terms and terms[0][1] != 1):
            if sum(c == 1 for _, c in terms) != 1:
                return None
            fix += [j for j, c in terms if c != 1 and j not in fix]
    if not fix:
        return [piece]
    if math.prod(piece.space[j] for j in fix) > limit:
        return None
    result = []
    for values in itertools.product(*(range(piece.space[j]) for j in fix)):
        src, dst, space = piece.src, piece.dst, list(piece.space)
        for j, v in zip(fix, values, strict=True):
            src, dst, space[j] = src.fixed(j, v), dst.fixed(j, v), 1
        result.append(Piece(space, piece.source, src, dst))
    return result


def _compose_box(piece: Piece, producer: Sequence[Piece]) -> list[Piece] | None:
    access = []
    for start, terms in zip(piece.src.start, piece.src.terms, strict=True):
        if len(terms) > 1 or (terms and terms[0][1] != 1):
            return None
        access.append((terms[0][0] if terms else None, start))
    dims = [d for d, _ in access if d is not None]
    if len(set(dims)) != len(dims):
        return None
    result = []
    for u in producer:
        sub = _through(piece, access, u)
        if sub is None:
            return None
        result += sub
    return result


class _Walk:
    """The iteration space of a piece being composed.

    Its restricted and split dims, and the producer's iteration indexes
    ``q_j = const + sum(coef * p_d)`` over it.
    """

    def __init__(self, space: Sequence[int], q_dims: int) -> None:
        self.space = list(space)
        self.offset = [0] * len(space)  # p_d = offset + sum(factor * i_new)
        self.split: list[Terms] = [[(d, 1)] for d in range(len(space))]
        self.q_const = [0] * q_dims
        self.q_terms: list[Terms] = [[] for _ in range(q_dims)]
        self.seen = [False] * q_dims

    def add(self, size: int) -> int:
        self.space.append(size)
        return len(self.space) - 1

    def side(self, layout: Layout, start: Sequence[int], terms: Sequence[Terms]) -> Side:
        """A side over the producer's iteration space, rewritten over this walk."""
        new_start, new_terms = [], []
        for s, t in zip(start, terms, strict=True):
            coefs: dict[int, int] = {}
            for j, c in t:
                s += c * self.q_const[j]
                for d, f in self.q_terms[j]:
                    coefs[d] = coefs.get(d, 0) + c * f
            new_start.append(s)
            new_terms.append([(d, c) for d, c in coefs.items() if c])
        return Side(layout, new_start, new_terms)

    def moved(self, side: Side) -> Side:
        """A side over the original space, rewritten over the restricted and split dims."""
        new_start, new_terms = [], []
        for s, t in zip(side.start, side.terms, strict=True):
            s += sum(c * self.offset[d] for d, c in t)
            new_start.append(s)
            new_terms.append([(n, c * f) for d, c in t for n, f in self.split[d]])
        return Side(side.layout, new_start, new_terms)


def _digits(u: Piece, terms: Terms) -> tuple[list[int], list[int]] | None:
    """The dims and place values of a merged dim, outer to inner (a mixed radix), or None."""
    order = sorted(terms, key=lambda t: -t[1])
    js, cs = [j for j, _ in order], [c for _, c in order]
    for i in range(len(js)):
        inner = cs[i + 1] * u.space[js[i + 1]] if i + 1 < len(js) else 1
        if cs[i] != inner:
            return None
    return js, cs


def _through(v: Piece, access: list[tuple[int | None, int]], u: Piece) -> list[Piece] | None:
    walk = _Walk(v.space, len(u.space))
    for k, (d, a) in enumerate(access):
        terms, start = u.dst.terms[k], u.dst.start[k]
        terms = [(j, c) for j, c in terms if u.space[j] > 1]  # a dim of 1 moves nothing
        if len(terms) == 1 and terms[0][1] > 1:  # a strided write (an interleave)
            if not _strided(walk, u, d, a, 1 if d is None else v.space[d], start, terms[0]):
                return []  # this producer piece writes nothing this piece reads
            continue
        radix = _digits(u, terms) if terms else ([], [])
        if radix is None:
            return None
        js, cs = radix
        extent = cs[0] * u.space[js[0]] if js else 1
        n = 1 if d is None else v.space[d]
        lo, hi = max(a, start), min(a + n, start + extent)
        if hi <= lo:
            return []  # this producer piece writes nothing this piece reads
        if d is not None:
            walk.offset[d], walk.space[d] = lo - a, hi - lo
        if not _invert(walk, u, d, lo - start, hi - lo, js, cs):
            return None
    if any(not seen and n > 1 for seen, n in zip(walk.seen, u.space, strict=True)):
        return None
    src = walk.side(u.src.layout, u.src.start, u.src.terms)
    return [Piece(walk.space, u.source, src, walk.moved(v.dst))]


def _strided(
    walk: _Walk, u: Piece, d: int | None, a: int, n: int, start: int, term: tuple[int, int]
) -> bool:
    """Walk dim ``d`` over the producer's positions ``start + c * q`` (producer dim ``j``).

    ``d`` reads ``[a, a + n)`` (``a`` alone without ``d``); False when none of them is read.
    """
    j, c = term
    q0 = max(0, -(-(a - start) // c))  # the first position at or after a
    q1 = min(u.space[j], -(-(a + n - start) // c))
    if q1 <= q0:
        return False
    walk.q_const[j] += q0
    walk.seen[j] = True
    if d is not None:
        walk.offset[d], walk.space[d] = start + c * q0 - a, q1 - q0
        walk.split[d] = [(d, c)]
        walk.q_terms[j].append((d, 1))
    return True


def _invert(
    walk: _Walk, u: Piece, d: int | None, r0: int, n: int, js: list[int], cs: list[int]
) -> bool:
    """Express the producer's dims ``js`` (place values ``cs``) over walk dim ``d``.

    ``d`` covers ``[r0, r0 + n)`` of their merged range (a fixed value without ``d``).
    """
    if not js:
        return True
    g = [u.space[j] for j in js]
    if d is None or n == 1:
        for j, c, size in zip(js, cs, g, strict=True):
            walk.q_const[j] += r0 // c % size
            walk.seen[j] = True
        return True
    i = len(js) - 1  # the digits inside the partial one must be whole
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
    for o in range(i + 1, len(js)):
        nd = walk.add(g[o])
        walk.split[d].append((nd, cs[o]))
        walk.q_terms[js[o]].append((nd, 1))
    for j in js:
        walk.seen[j] = True
    return True
