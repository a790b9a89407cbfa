"""The C region planner (``geometry/_regions.pyx``) against the Python one (``regions._plan``).

Random copies with NC4HW4 and plain sides, merged (reshape) and strided terms, lane moves that
need splitting, and small region budgets; every answer must equal the Python planner's (rows,
or None), or be declined (False) exactly where the Python planner cannot be matched.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.geometry import regions as R

C = pytest.importorskip("mnnpy.geometry._regions")


def _side(rng: np.random.Generator, space: list[int]) -> R.Side:
    rank = int(rng.integers(1, 6))
    shape = tuple(int(n) for n in rng.integers(1, 12, rank))
    packed = rank >= 2 and bool(rng.integers(0, 2))
    terms: list[list[tuple[int, int]]] = [[] for _ in shape]
    for j in range(len(space)):  # every iteration dim moves one or two tensor dims
        for k in rng.choice(rank, size=min(rank, int(rng.integers(1, 3))), replace=False):
            coef = int(rng.choice([1, 1, 2, 3, 4, 5, 6, 8, 12, -1]))
            terms[int(k)].append((j, coef))
    start = [int(rng.integers(0, n + 2)) for n in shape]
    return R.Side(R.Layout(shape, packed), start, terms)


def _same(space: list[int], src: R.Side, dst: R.Side) -> str:
    got = C.plan(space, src, dst, R.MAX_REGIONS)
    want = R._plan(space, src, dst)
    if got is False:
        return "declined"
    if want is None or got is None:
        assert got is None and want is None
        return "none"
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return "rows"


@pytest.mark.parametrize("budget", [4096, 24, 3])
def test_random_copies_plan_as_the_python_planner(
    budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(R, "MAX_REGIONS", budget)
    rng = np.random.default_rng(budget)
    seen: dict[str, int] = {}
    for _ in range(400):
        space = [int(n) for n in rng.integers(1, 7, int(rng.integers(1, 5)))]
        kind = _same(space, _side(rng, space), _side(rng, space))
        seen[kind] = seen.get(kind, 0) + 1
    assert seen.get("rows", 0) > 100 and seen.get("declined", 0) == 0
    if budget < 100:
        assert seen.get("none", 0) >= 5  # the budget paths were taken too


def test_box_and_reshape_copies_plan_as_the_python_planner() -> None:
    """The computers' shapes of copy: channel slices of NC4HW4 at every start, and reshapes."""
    for c0 in range(6):
        packed = R.Layout((2, 13, 3, 5), True)
        plain = R.Layout((2, 7, 3, 5), False)
        src = R.Side.box(packed, [0, c0, 0, 0], [0, 1, 2, 3])
        dst = R.Side.box(plain, [0, 0, 0, 0], [0, 1, 2, 3])
        assert _same([2, 7, 3, 5], src, dst) == "rows"
        assert _same([2, 7, 3, 5], dst, src) == "rows"
    a, b = R.Layout((2, 6, 4), False), R.Layout((2, 8, 3), True)
    space = R.refine(a.shape, (2, 3, 8))  # b in its flat order, NHWC
    assert space is not None
    src, dst = R.merged(a, [0, 1, 2], space), R.merged(b, [0, 2, 1], space)
    assert _same(space, src, dst) == "rows"


def test_what_the_c_planner_cannot_hold_goes_to_python() -> None:
    """Too many dims, values past 4e18, a negative extent, a dim out of range: declined."""
    packed = R.Layout((1, 8, 2, 2), True)
    box = R.Side.box(packed, [0, 0, 0, 0], [0, 1, 2, 3])
    assert C.plan([1, 8, 2, 2], box, box, 4096) is not False
    wide = R.Side(packed, [0, 0, 0, 0], [[], [(j, 1) for j in range(17)], [], []])
    assert C.plan([1] * 17, wide, wide, 4096) is False
    huge = R.Side(R.Layout((1, 1 << 40, 1 << 30), False), [0, 0, 0], [[(0, 1)], [], [(1, 1)]])
    assert C.plan([1, 1 << 30], huge, huge, 4096) is False
    assert C.plan([1, -2, 2, 2], box, box, 4096) is False
    stray = R.Side(packed, [0, 0, 0, 0], [[(5, 1)], [], [], []])
    assert C.plan([1, 8, 2, 2], stray, box, 4096) is False
    assert C.plan([1, 0, 2, 2], stray, box, 4096).shape == (0, 11)  # an empty copy first


def test_side_keys_tell_sides_apart_as_the_tuple_keys_do() -> None:
    """``side_key`` (the memos' key) is equal exactly where ``regions._key`` is."""
    rng = np.random.default_rng(7)
    sides = []
    for _ in range(300):
        space = [int(n) for n in rng.integers(1, 4, int(rng.integers(1, 4)))]
        sides.append(_side(rng, space))
    sides += [R.Side(s.layout, list(s.start), [list(t) for t in s.terms]) for s in sides[:50]]
    for a in sides[::7]:
        for b in sides:
            assert (C.side_key(a) == C.side_key(b)) == (R._key(a) == R._key(b))
    huge = R.Side(R.Layout((1 << 70,), False), [0], [[(0, 1)]])
    assert C.side_key(huge) == R._key(huge)  # past int64: the tuple form
