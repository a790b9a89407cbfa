"""Lane gathers (backend/cpu/lane_gather.py, kernels/raster.pyx ``gather_regions``) vs NumPy.

Rows writing single NC4HW4 lanes (a channel shuffle) are regrouped into 4-lane gathers; the
kernel must match its NumPy twin, and a regrouped plan must write exactly what the region rows
wrote (``regions.apply_reference``), with 1 and 2 threads.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu import lane_gather as LG
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.geometry import regions as R


def test_gather_kernel_matches_reference() -> None:
    rng = np.random.default_rng(0)
    srcs = tuple(rng.standard_normal(400).astype(np.float32) for _ in range(3))
    rows = np.array(
        [[0, 20, 0, 0, 1, 1, 2, 3, 0, 2], [80, 17, 2, 5, 2, 6, 1, 0, 0, 7], [160] + [0] * 9],
        np.int64,
    )
    want = np.full(300, -1, np.float32)
    LG.reference(srcs, want, rows)
    for threads in (1, 2):
        got = np.full(300, -1, np.float32)
        K.gather_regions(srcs, got, rows, threads)
        np.testing.assert_array_equal(got, want)
        bound = np.full(300, -1, np.float32)
        K.bind_regions([(srcs, bound, rows, False)], threads)()
        np.testing.assert_array_equal(bound, want)
    ints = tuple(s.view(np.int32) for s in srcs)  # raw bits of any 4-byte type
    out = np.full(300, -1, np.float32).view(np.int32)
    K.gather_regions(ints, out, rows)
    np.testing.assert_array_equal(out, want.view(np.int32))


@pytest.mark.parametrize(
    "row",
    [
        [0, 76, 0, 0, 0, 0, 0, 0, 0, 0],  # destination overrun (4 * 75 + 3 >= 300)
        [0, 10, 0, 380, 0, 0, 0, 0, 0, 0],  # source overrun
        [0, 10, 3, 0, 0, 0, 0, 0, 0, 0],  # no source 3
        [-4, 1, 0, 0, 0, 0, 0, 0, 0, 0],
    ],
)
def test_gather_kernel_checks_bounds(row: list[int]) -> None:
    srcs = (np.zeros(400, np.float32),)
    with pytest.raises(ValueError, match="gather row 0"):
        K.gather_regions(srcs, np.zeros(300, np.float32), np.array([row], np.int64))
    with pytest.raises(ValueError):
        K.gather_regions((np.zeros(8, np.float64),), np.zeros(8, np.float32), np.zeros((0, 10)))


def shuffle_rows(c: int, area: int, half: int) -> list[tuple[int, np.ndarray]]:
    """Region rows of one half of a 2-group channel shuffle of NC4HW4 ``a`` and ``b``."""
    lay = R.Layout((1, c, area), True)
    out = R.Layout((1, c, area), True)
    jobs = []
    for s in range(2):  # out channel 2 * i + s <- source s channel i + half * c // 2
        n = (c - s + 1) // 2
        start = half * (c // 2)
        src = R.Side(lay, [0, start, 0], [[], [(0, 1)], [(1, 1)]])
        dst = R.Side(out, [0, s, 0], [[], [(0, 2)], [(1, 1)]])
        rows = R.plan([n, area], src, dst)
        assert rows is not None
        jobs.append((s, rows))
    return jobs


@pytest.mark.parametrize(("c", "area"), [(58, 20), (8, 16), (12, 33), (6, 16), (116, 49), (16, 3)])
@pytest.mark.parametrize("half", [0, 1])
def test_plan_writes_what_the_rows_wrote(c: int, area: int, half: int) -> None:
    rng = np.random.default_rng(c + area)
    size = (c + 3) // 4 * 4 * area
    srcs = tuple(rng.standard_normal(2 * size).astype(np.float32) for _ in range(2))
    jobs = shuffle_rows(c, area, half)
    want = np.full(size, np.nan, np.float32)
    for s, rows in jobs:
        R.apply_reference(srcs[s], want, rows)
    grows, rest = LG.plan(jobs)
    if area >= LG.MIN_RUN and c >= 8:
        assert len(grows) > 0
    for threads in (1, 2):
        got = np.full(size, np.nan, np.float32)
        K.gather_regions(srcs, got, grows, threads)
        for s, rows in rest:
            K.copy_regions(srcs[s], got, rows, threads)
        np.testing.assert_array_equal(got, want)  # NaN where neither wrote, in both
    ref = np.full(size, np.nan, np.float32)
    LG.reference(srcs, ref, grows)
    for s, rows in rest:
        R.apply_reference(srcs[s], ref, rows)
    np.testing.assert_array_equal(ref, want)


def test_plan_leaves_rows_without_whole_blocks() -> None:
    rows = np.array([[0, 0, 1, 2, 40, 0, 1, 4, 0, 1, 4]], np.int64)  # lanes 0, 1 only
    grows, rest = LG.plan([(0, rows)])
    assert len(grows) == 0 and len(rest) == 1 and np.array_equal(rest[0][1], rows)


def test_plan_shared_is_plan_remembered_by_the_arrays_themselves() -> None:
    """``plan_shared`` answers as ``plan``; the same arrays again get the remembered answer, and
    other arrays (even equal ones, even where an old array's id is reused) get their own."""
    jobs = shuffle_rows(16, 20, 0)
    want = LG.plan(jobs)
    assert len(want[0])  # lanes regroup: there is an answer to remember
    got = LG.plan_shared(jobs)
    np.testing.assert_array_equal(got[0], want[0])
    assert [(s, r.tolist()) for s, r in got[1]] == [(s, r.tolist()) for s, r in want[1]]
    assert LG.plan_shared(list(jobs)) is got  # the same arrays: remembered
    other = [(s, rows.copy()) for s, rows in jobs]
    assert LG.plan_shared(other) is not got  # equal, but other arrays: planned for them
    changed = [(s, rows.copy()) for s, rows in shuffle_rows(16, 20, 1)]
    np.testing.assert_array_equal(LG.plan_shared(changed)[0], LG.plan(changed)[0])


@pytest.mark.parametrize("itemsize", [4, 2])
def test_per_output_of_one_copy_is_the_general_answer(itemsize: int) -> None:
    """One copy onto one output (the common case, taken first) answers as the general loop does
    (reached here through a second output without copies)."""

    class _T:  # what ``per_output`` reads of an output
        def __init__(self) -> None:
            self.dtype = np.dtype(np.float32 if itemsize == 4 else np.float16)

    rows = np.concatenate([r for _, r in shuffle_rows(16, 20, 0)])  # one source, every lane
    out, src = _T(), "x"
    one = LG.per_output([(src, 0, rows)], [out])
    general = LG.per_output([(src, 0, rows)], [out, _T()])
    assert (len(one) == 1) == (itemsize == 4)  # 4-byte lanes regroup; others are left
    assert one.keys() == general.keys()
    for j, (srcs, grows, rest) in one.items():
        want = general[j]
        assert srcs == want[0] == (src,)
        np.testing.assert_array_equal(grows, want[1])
        assert [(s, r.tolist()) for s, r in rest] == [(s, r.tolist()) for s, r in want[2]]
    assert LG.per_output([(src, 1, rows)], [out]) == {}  # no copy onto output 0
