"""The C twin of the composition (geometry/_compose.pyx) vs ``compose._compose``, its reference.

Random readers (boxes, permutations, a few fixed or strided terms) over random producers
(boxes, reshapes over a common refinement, interleaves, slices): both must answer the same
pieces, term for term in the same order, or both None; rows the C twin cannot read it declines.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.geometry import compose as CO
from mnnpy.geometry import regions as R

C = pytest.importorskip("mnnpy.geometry._compose")


def _python(piece: CO.Piece, producer: list[CO.Piece]) -> list | None:
    tagged = [CO.Piece(u.space, k, u.src, u.dst) for k, u in enumerate(producer)]
    result = CO._compose(piece, tagged)
    if result is None:
        return None
    return [(CO._index(p), p.space, R.side_key(p.src), R.side_key(p.dst)) for p in result]


def _plain(p: CO.Piece) -> tuple:
    return p.space, p.src.start, p.src.terms, p.dst.start, p.dst.terms


def _c(piece: CO.Piece, producer: list[CO.Piece]) -> list | None:
    """The C twin's answer, as ``_python`` gives it (it raises where it declines)."""
    got = C.compose(_plain(piece), [_plain(u) for u in producer])
    if got is None:
        return None
    return [
        (k, space, R.side_key(R.Side(producer[k].src.layout, ss, st)),
         R.side_key(R.Side(piece.dst.layout, ds, dt)))
        for k, space, ss, st, ds, dt in got
    ]  # fmt: skip


def _side(rng: np.random.Generator, shape: tuple[int, ...], space: list[int]) -> R.Side:
    """A side over ``space``: a permutation box, or a reshape, with some odd terms."""
    rank = len(shape)
    kind = rng.integers(0, 3)
    if kind == 0 and rank == len(space):
        perm = list(rng.permutation(rank))
        side = R.Side.box(R.Layout(shape, False), [0] * rank, perm)
    else:
        side = R.Side(R.Layout(shape, False), [0] * rank, [[] for _ in range(rank)])
        for j in range(len(space)):
            k = int(rng.integers(0, rank))
            c = int(rng.choice([1, 1, 1, 2, 3, 4, int(np.prod(space[j + 1 :]) or 1)]))
            side.terms[k].append((j, c))
    for k in range(rank):
        if rng.random() < 0.3:
            side.start[k] = int(rng.integers(0, 4))
    return side


def _case(seed: int) -> tuple[CO.Piece, list[CO.Piece]]:
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    mid = tuple(int(v) for v in rng.integers(1, 7, rank))  # the tensor between them
    producer = []
    for _ in range(int(rng.integers(1, 4))):
        space = [int(v) for v in rng.integers(1, 6, int(rng.integers(1, 4)))]
        if rng.random() < 0.5 and len(space) == rank:
            space = list(mid)
        src = _side(rng, tuple(int(v) for v in rng.integers(1, 7, len(space))), space)
        dst = _side(rng, mid, space)
        producer.append(CO.Piece(space, len(producer), src, dst))
    space = list(mid) if rng.random() < 0.6 else [int(v) for v in rng.integers(1, 6, rank)]
    src = _side(rng, mid, space)
    dst = _side(rng, tuple(int(v) for v in rng.integers(1, 7, len(space))), space)
    return CO.Piece(space, "x", src, dst), producer


@pytest.mark.parametrize("seed", range(3000))
def test_compose_matches_python(seed: int) -> None:
    piece, producer = _case(seed)
    try:
        want = _python(piece, producer)
    except (IndexError, ValueError, ZeroDivisionError):
        with pytest.raises((IndexError, ValueError, ZeroDivisionError)):
            _c(piece, producer)  # declined, and the Python one raises the same
        return
    assert _c(piece, producer) == want


def test_compose_of_a_channel_shuffle_reshape() -> None:
    """A reshape [1, 116, 7, 7] -> [1, 2, 58, 49] read by a transpose box: the same pieces."""
    space = [1, 2, 58, 7, 7]
    src = R.merged(R.Layout((1, 116, 7, 7), True), [0, 1, 2, 3], space)
    dst = R.merged(R.Layout((1, 2, 58, 49), False), [0, 1, 2, 3], space)
    producer = [CO.Piece(space, 0, src, dst)]
    reader_src = R.Side.box(R.Layout((1, 2, 58, 49), False), [0, 0, 0, 0], [0, 2, 1, 3])
    reader_dst = R.Side.box(R.Layout((1, 58, 2, 49), False), [0, 0, 0, 0], [0, 1, 2, 3])
    piece = CO.Piece([1, 58, 2, 49], "x", reader_src, reader_dst)
    want = _python(piece, producer)
    assert want is not None and _c(piece, producer) == want


def test_compose_declines_what_it_cannot_read() -> None:
    side = R.Side(R.Layout((4,), False), [0], [[(0, 1)]])
    short = R.Side(R.Layout((4,), False), [0, 0], [[(0, 1)]])  # start and terms differ
    with pytest.raises(ValueError):
        C.compose(([4], short.start, short.terms, side.start, side.terms), [])
    with pytest.raises(TypeError):
        C.compose(((4,), side.start, side.terms, side.start, side.terms), [])  # not a list
    piece = CO.Piece([4], "x", short, side)
    with pytest.raises(ValueError):
        CO._compose(piece, [CO.Piece([4], 0, side, side)])  # the reference raises the same
    piece = CO.Piece((4,), "x", side, side)  # a tuple: the C twin declines, Python answers
    assert CO._found(piece, [CO.Piece([4], 0, side, side)]) == [(0, [4], side, side)]
