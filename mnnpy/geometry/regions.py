"""Region plans: copies between logical views of CPU tensors as strided storage regions.

MNN expresses Concat, Slice, Permute and Reshape as raster regions (``Tensor::InsideDescribe::
Region``: a 3-D box with a stride per dim on each side). Here a copy is described in logical
coordinates over an *iteration space*: each tensor dim's index is ``start + sum(coef * i_j)`` of
iteration indexes ``i_j`` (a :class:`Side` per tensor). :func:`plan` turns that into rows for
``kernels.raster.copy_regions`` in storage elements, so NC4HW4 tensors are read and written in
place: a channel index is affine in storage only within one lane, so an NC4HW4 channel dim is
split into 4-channel blocks times 4 lanes when its start is a multiple of 4 (the lanes then merge
with the spatial dims into whole-block ``memcpy``), else into one region per lane (4-strided
copies). Dims that are contiguous on both sides are merged and the innermost dim is chosen by a
small cost model. Planning happens in ``on_resize``; ``on_execute`` only runs the rows.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mnnpy.geometry.walk import COLS, Dim, order, view_rows, walk_rows

try:  # C twins of _plan and _key (setup.py builds them); the Python ones: reference, fallback
    from mnnpy.geometry._regions import plan as _plan_c
    from mnnpy.geometry._regions import side_key as _key_c
except ImportError:  # not built (a source checkout without build_ext): the Python functions
    _plan_c = _key_c = None  # type: ignore[assignment]

__all__ = [
    "COLS",
    "Layout",
    "Side",
    "apply_reference",
    "count",
    "merged",
    "padding_regions",
    "padding_rows",
    "plan",
    "refine",
    "remembered",
    "view_rows",
]

MAX_REGIONS = 4096  # beyond this the caller falls back to a logical (unpacked) copy

Terms = list[tuple[int, int]]  # (iteration dim, coefficient)


@dataclass(frozen=True)
class Layout:
    """How a tensor's logical index maps to storage: row-major, or NC4HW4 when ``packed``."""

    shape: tuple[int, ...]
    packed: bool

    @cached_property
    def area4(self) -> int:
        """Elements of one 4-channel block (NC4HW4)."""
        return math.prod(self.shape[2:]) * 4

    @cached_property
    def _strides(self) -> tuple[int, ...]:
        """Every dim's storage stride, computed once (planning asks for them many times)."""
        shape = self.shape
        if not self.packed:
            return tuple(math.prod(shape[d + 1 :]) for d in range(len(shape)))
        rest = tuple(math.prod(shape[d + 1 :]) * 4 for d in range(2, len(shape)))
        return ((shape[1] + 3) // 4 * self.area4, 0, *rest)

    def stride(self, dim: int) -> int:
        """Storage stride of logical ``dim`` (for NC4HW4 not the channel dim)."""
        assert not (self.packed and dim == 1), "NC4HW4 channels have no single stride"
        return self._strides[dim]

    def offset(self, index: Sequence[int]) -> int:
        """Storage offset of a logical index."""
        if not self.packed:
            return sum(i * self.stride(d) for d, i in enumerate(index))
        c = index[1]
        rest = sum(i * self.stride(d) for d, i in enumerate(index) if d != 1)
        return rest + c // 4 * self.area4 + c % 4


@dataclass(slots=True)
class Side:
    """One tensor of a copy: per logical dim a start and the iteration dims that move it."""

    layout: Layout
    start: list[int]
    terms: list[Terms] = field(default_factory=list)

    @classmethod
    def box(cls, layout: Layout, start: Sequence[int], dims: Sequence[int | None]) -> Side:
        """Logical dim ``k`` follows iteration dim ``dims[k]`` (``None``: fixed at its start)."""
        terms = [[] if j is None else [(j, 1)] for j in dims]
        return cls(layout, list(start), terms)

    def index(self, point: Sequence[int]) -> list[int]:
        """The logical index this side addresses at iteration ``point``."""
        return [
            s + sum(c * point[j] for j, c in t) for s, t in zip(self.start, self.terms, strict=True)
        ]

    def fixed(self, j: int, value: int) -> Side:
        """This side with iteration dim ``j`` fixed at ``value`` (its terms folded into start)."""
        start = [
            s + sum(c * value for q, c in t if q == j)
            for s, t in zip(self.start, self.terms, strict=True)
        ]
        return Side(self.layout, start, [[(q, c) for q, c in t if q != j] for t in self.terms])

    def strided(self, j: int, p: int, r: int) -> Side:
        """The side with ``i_j = p * k + r``, ``k`` taking dim ``j``'s place."""
        pairs = zip(self.start, self.terms, strict=True)
        start = [s + sum(c * r for q, c in t if q == j) for s, t in pairs]
        terms = [[(q, c * p if q == j else c) for q, c in t] for t in self.terms]
        return Side(self.layout, start, terms)

    def lane_terms(self) -> Terms:
        """The terms of the NC4HW4 channel that move lanes (coefficient not a multiple of 4).

        The others move whole blocks, an affine storage step.
        """
        return [(q, c) for q, c in self.terms[1] if c % 4] if self.layout.packed else []

    def strides(self, j: int) -> int:
        """Storage stride of iteration dim ``j``, but for its lane moves of an NC4HW4 channel."""
        total = 0
        for k, t in enumerate(self.terms):
            if self.layout.packed and k == 1:
                total += sum(c // 4 for q, c in t if q == j and c % 4 == 0) * self.layout.area4
                continue
            total += sum(c for q, c in t if q == j) * self.layout.stride(k)
        return total


def refine(a: Sequence[int], b: Sequence[int]) -> list[int] | None:
    """The coarsest shape both ``a`` and ``b`` are merges of consecutive dims of, or None."""
    if math.prod(a) != math.prod(b):
        return None
    cuts = sorted(
        {math.prod(a[:k]) for k in range(len(a) + 1)}
        | {math.prod(b[:k]) for k in range(len(b) + 1)}
    )
    if 0 in cuts:
        return None
    if any(hi % lo for lo, hi in itertools.pairwise(cuts)):
        return None
    return [hi // lo for lo, hi in itertools.pairwise(cuts)]


def merged(layout: Layout, order: Sequence[int], space: Sequence[int]) -> Side:
    """The side of a tensor whose dims, taken in ``order``, merge consecutive dims of ``space``.

    That is a reshape; ``order`` lists logical dims in the flat order, e.g. NHWC for NC4HW4 data.
    """
    terms: list[Terms] = [[] for _ in layout.shape]
    j = 0
    for k in order:
        group, size = [], 1
        while size < layout.shape[k]:
            group.append(j)
            size *= space[j]
            j += 1
        coef = 1
        for q in reversed(group):
            terms[k].insert(0, (q, coef))
            coef *= space[q]
    return Side(layout, [0] * len(layout.shape), terms)


Problem = tuple[list[int], Side, Side]


def _expand(space: list[int], src: Side, dst: Side, budget: int) -> list[Problem] | None:
    """Split iteration dims until every NC4HW4 channel has at most one lane-moving term.

    The term kept is the one with the smallest coefficient (adjacent lanes), then the longest;
    another term ``g * i`` becomes ``i = p * k + r`` with ``p = 4 / gcd(g, 4)``: ``k`` moves
    whole blocks and each residue ``r`` is a problem of its own.
    """
    for side in (src, dst):
        terms = side.lane_terms()
        if len(terms) > 1:
            keep = min(terms, key=lambda t: (t[1], -space[t[0]]))
            j, g = next(t for t in terms if t != keep)
            p = 4 // math.gcd(g, 4)
            result: list[Problem] = []
            for r in range(min(p, space[j])):
                sub_space = list(space)
                sub_space[j] = (space[j] - r + p - 1) // p
                sub = _expand(sub_space, src.strided(j, p, r), dst.strided(j, p, r), budget // p)
                if sub is None:
                    return None
                result += sub
            return result if len(result) <= budget else None
    return [(space, src, dst)]


def _steps(side: Side, rank: int) -> list[int]:
    """:meth:`Side.strides` of every iteration dim ``0 .. rank - 1`` at once (one pass)."""
    out = [0] * rank
    layout = side.layout
    for k, t in enumerate(side.terms):
        if not t:
            continue
        if layout.packed and k == 1:
            for q, c in t:
                if c % 4 == 0:
                    out[q] += c // 4 * layout.area4
            continue
        stride = layout.stride(k)
        for q, c in t:
            out[q] += c * stride
    return out


Lane = tuple[int, int, int, int]  # (side, channel start, iteration dim, coefficient)


def _lanes(src: Side, dst: Side) -> list[Lane]:
    """Every lane-moving term of both sides (:meth:`Side.lane_terms`), with its side."""
    return [
        (x, side.start[1], q, g) for x, side in enumerate((src, dst)) for q, g in side.lane_terms()
    ]


def _options(
    j: int, n: int, src: Side, dst: Side, steps: Sequence[Sequence[int]], moves: Sequence[Lane]
) -> list[tuple[int, list[Dim]]]:
    """Ways to walk iteration dim ``j``: (first index, dims), one region each.

    ``steps`` are both sides' :func:`_steps`, ``moves`` their :func:`_lanes`. Where ``j`` moves
    NC4HW4 lanes, channel ``start + g * i``, ``i = p * k + r`` with the period ``p`` after which
    the channel is back in its lane: ``k`` walks blocks. The residues ``r`` are one more dim
    (lanes of one block) when no lane wraps into the next block, else one region each.
    """
    step = [steps[0][j], steps[1][j]]  # but for the lane moves
    lanes = [(x, s, g) for x, s, q, g in moves if q == j]
    if not lanes:
        return [(0, [(n, step[0], step[1])])]
    sides = (src, dst)
    p = math.lcm(*(4 // math.gcd(g, 4) for _, _, g in lanes))
    block, lane = [p * step[0], p * step[1]], list(step)
    for x, _, g in lanes:
        block[x] += g * p // 4 * sides[x].layout.area4
        lane[x] += g
    if all(s % 4 + g * (min(p, n) - 1) < 4 for _, s, g in lanes):  # residues in one block
        q, t = divmod(n, p)
        full = [(0, [(q, block[0], block[1]), (p, lane[0], lane[1])])] if q else []
        return full + ([(p * q, [(t, lane[0], lane[1])])] if t else [])
    return [(r, [((n - r + p - 1) // p, block[0], block[1])]) for r in range(min(p, n))]


def plan(space: Sequence[int], src: Side, dst: Side) -> np.ndarray | None:
    """Region rows copying ``src`` to ``dst`` over iteration ``space``; None when too many.

    Plans are remembered by their description (networks repeat the same copies block after
    block, and resizes repeat them), up to ``_MEMO_BYTES`` of rows; each call gets its own array.
    """
    rows = remembered(space, src, dst)
    return None if rows is None else rows.copy()


def count(space: Sequence[int], src: Side, dst: Side) -> int | None:
    """How many rows :func:`plan` gives (the same memo, no copy); None when too many."""
    rows = remembered(space, src, dst)
    return None if rows is None else len(rows)


def remembered(
    space: Sequence[int], src: Side, dst: Side, key: tuple | None = None
) -> np.ndarray | None:
    """The memo's rows for this copy, planned on a miss (shared: callers must not write them).

    ``key``: the copy's description ``(tuple(space), side_key(src), side_key(dst))`` when the
    caller knows it (``Piece.key``).
    """
    if key is None:
        key = (tuple(space), side_key(src), side_key(dst))
    h = hash(key)  # once: the table is keyed by it, the key kept with its rows and compared
    with _memo_lock:  # sessions may be created in several threads
        known = _memo.get(h)
        if known is not None and known[0] == key:
            _memo.move_to_end(h)
            return known[1]
    got = False if _plan_c is None else _plan_c(space, src, dst, MAX_REGIONS)
    rows = _plan(space, src, dst) if isinstance(got, bool) else got  # False: beyond C
    with _memo_lock:
        known = _memo.get(h)
        if known is not None and known[0] == key:
            return known[1]  # another thread planned it first
        if known is not None:  # a description of the same hash: this one replaces it
            _memo_bytes[0] -= 0 if known[1] is None else known[1].nbytes
        _memo[h] = (key, rows)
        _memo.move_to_end(h)
        _memo_bytes[0] += 0 if rows is None else rows.nbytes
        while _memo_bytes[0] > _MEMO_BYTES and len(_memo) > 1:
            old = _memo.popitem(last=False)[1][1]
            _memo_bytes[0] -= 0 if old is None else old.nbytes
    return rows


_MEMO_BYTES = 8 << 20
# by the description's hash: (description, rows)
_memo: collections.OrderedDict[int, tuple[tuple, np.ndarray | None]] = collections.OrderedDict()
_memo_bytes = [0]
_memo_lock = threading.Lock()


def _key(side: Side) -> tuple:
    """A side as a hashable value of plain tuples (compared in C, not by dataclass ``__eq__``)."""
    layout = side.layout
    return layout.shape, layout.packed, tuple(side.start), tuple(map(tuple, side.terms))


side_key: Callable[[Side], object] = _key if _key_c is None else _key_c  # what memos key by


def _plan(space: Sequence[int], src: Side, dst: Side) -> np.ndarray | None:
    """The Python planner: the reference for ``_regions.plan`` (same rows, or None)."""
    space = list(space)
    if 0 in space:
        return np.zeros((0, COLS), np.int64)
    problems = _expand(space, src, dst, MAX_REGIONS)
    if problems is None:
        return None
    rows: list[list[int]] = []
    for sub_space, s_side, d_side in problems:
        if 0 in sub_space:
            continue
        rank = len(sub_space)
        steps = (_steps(s_side, rank), _steps(d_side, rank))
        lanes = _lanes(s_side, d_side)
        moving = _moving(s_side, d_side)
        opts: list[list[tuple[int, list[Dim]]]] = [
            _options(j, sub_space[j], s_side, d_side, steps, lanes) if j in moving else [(0, [])]
            for j in range(rank)
        ]
        for combo in itertools.product(*opts):
            point = [first for first, _ in combo]
            dims = [x for _, ds in combo for x in ds]
            if any(n == 0 for n, _, _ in dims):
                continue
            walk = order(dims)
            if len(rows) + math.prod(n for n, _, _ in walk[:-3]) > MAX_REGIONS:
                return None
            s_off = s_side.layout.offset(s_side.index(point))
            d_off = d_side.layout.offset(d_side.index(point))
            rows += walk_rows(s_off, d_off, walk)
            if len(rows) > MAX_REGIONS:
                return None
    return np.array(rows, np.int64).reshape(-1, COLS)


def _moving(src: Side, dst: Side) -> set[int]:
    """The iteration dims that move either side."""
    return {q for side in (src, dst) for t in side.terms for q, _ in t}


def padding_regions(layout: Layout) -> np.ndarray:
    """Rows (destination side only) covering the padding lanes of an NC4HW4 tensor."""
    if not layout.packed or layout.shape[1] % 4 == 0:
        return np.zeros((0, COLS), np.int64)
    n, c = layout.shape[0], layout.shape[1]
    a4, blocks = layout.area4, (c + 3) // 4
    off = (blocks - 1) * a4 + c % 4
    return np.array([[0, off, n, 4 - c % 4, a4 // 4, 0, 0, 0, blocks * a4, 1, 4]], np.int64)


def padding_rows(shape: Sequence[int]) -> np.ndarray:
    """:func:`padding_regions` of an NC4HW4 tensor of ``shape``, remembered (shared: read only)."""
    key = tuple(shape)
    rows = _pads.get(key)
    if rows is None:
        if len(_pads) >= 1024:  # bounded: start again (a clear is atomic: thread-safe)
            _pads.clear()
        rows = _pads[key] = padding_regions(Layout(key, True))
    return rows


_pads: dict[tuple[int, ...], np.ndarray] = {}


def apply_reference(src: np.ndarray, dst: np.ndarray, rows: np.ndarray) -> None:
    """NumPy twin of ``kernels.raster.copy_regions`` (for tests)."""
    for r in rows.tolist():
        so, do, sizes, ss, ds = r[0], r[1], r[2:5], r[5:8], r[8:11]
        for i, j, k in itertools.product(*(range(n) for n in sizes)):
            dst[do + i * ds[0] + j * ds[1] + k * ds[2]] = src[
                so + i * ss[0] + j * ss[1] + k * ss[2]
            ]
