"""The C twins of the raster's resize planning (kernels/raster_plan.pyx) vs their Python references.

``lane_plan`` must give ``lane_gather._plan``'s gather rows and rows left, value for value, and
``itself`` the flags of ``lane_gather.itself_reference``, on random rows (channel shuffles, lane
strips that overlap or repeat, rows of other shapes); rows they cannot take they decline (None).
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu import lane_gather as LG

C = pytest.importorskip("mnnpy.backend.cpu.kernels.raster_plan")


def _python_plan(jobs: list[tuple[int, np.ndarray]]) -> tuple:
    """What ``LG.plan`` gives without the C twin (``_plan`` behind the candidate check)."""
    if not any(LG._candidates(rows) for _, rows in jobs):
        return np.zeros((0, LG.GCOLS), np.int64), jobs
    return LG._plan(jobs)


def _assert_same(got: tuple, want: tuple) -> None:
    assert got[0].dtype == want[0].dtype == np.int64
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0].shape == want[0].shape
    assert [s for s, _ in got[1]] == [s for s, _ in want[1]]
    for (_, a), (_, b) in zip(got[1], want[1], strict=True):
        assert a.dtype == b.dtype == np.int64 and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _random_jobs(rng: np.random.Generator) -> list[tuple[int, np.ndarray]]:
    jobs = []
    for s in range(int(rng.integers(1, 4))):
        rows = []
        for _ in range(int(rng.integers(0, 6))):
            if rng.random() < 0.7:  # a lane strip: steps 4, some blocks of lanes
                n = int(rng.choice([8, 15, 16, 17, 40]))
                n0, n1 = int(rng.integers(0, 3)), int(rng.integers(1, 5))
                so, do = int(rng.integers(0, 64)), int(rng.integers(0, 64))
                ss0, ss1 = int(rng.choice([0, 1, 4 * n, 64])), int(rng.choice([1, 2, 4 * n]))
                ds0, ds1 = int(rng.choice([0, 1, 4 * n, 64])), int(rng.choice([1, 2, 3]))
                rows.append([so, do, n0, n1, n, ss0, ss1, 4, ds0, ds1, 4])
            else:  # any other row
                rows.append([int(v) for v in rng.integers(0, 20, 11)])
        jobs.append((int(rng.integers(0, 3)) if rng.random() < 0.3 else s, np.array(
            rows, np.int64).reshape(-1, 11)))  # fmt: skip
    return jobs


@pytest.mark.parametrize("seed", range(400))
def test_lane_plan_matches_python(seed: int) -> None:
    jobs = _random_jobs(np.random.default_rng(seed))
    got = C.lane_plan(jobs)
    assert got is not None
    _assert_same(got, _python_plan(jobs))


def test_lane_plan_of_a_channel_shuffle_gathers() -> None:
    from tests.kernels.test_lane_gather import shuffle_rows

    for c, area, half in [(58, 20, 0), (116, 49, 1), (12, 33, 0), (16, 3, 1)]:
        jobs = shuffle_rows(c, area, half)
        got = C.lane_plan(jobs)
        _assert_same(got, _python_plan(jobs))
        assert (len(got[0]) > 0) == (area >= LG.MIN_RUN)


def test_lane_plan_declines_what_it_cannot_take() -> None:
    good = np.array([[0, 0, 1, 4, 16, 0, 1, 4, 0, 1, 4]], np.int64)
    assert C.lane_plan([(0, good.astype(np.int32))]) is None  # not int64 rows
    assert C.lane_plan([(0, good[:, :10].copy())]) is None  # not rows of 11
    assert C.lane_plan([(0, np.repeat(good, 2, 0).T)]) is None  # not C-contiguous
    assert C.lane_plan([(0, good.T.copy())]) is None  # not rows of 11
    assert C.lane_plan([(0, good.astype(np.float64))]) is None  # not integers
    assert C.lane_plan([(-1, good)]) is None  # a negative source index
    bad = good.copy()
    bad[0, 0] = -4
    assert C.lane_plan([(0, bad)]) is None  # a negative value
    bad[0, 0] = 1 << 41
    assert C.lane_plan([(0, bad)]) is None  # past the arithmetic bound
    many = np.array([[0, 0, 128, 129, 16, 64, 1, 4, 64, 1, 4]], np.int64)  # > 2**14 strips
    got = C.lane_plan([(0, many)])
    assert len(got[0]) == 0 and got[1][0][1] is many


@pytest.mark.parametrize("seed", range(100))
def test_itself_matches_python(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = np.zeros(64, rng.choice([np.float32, np.int8, np.int32]))
    a = base[int(rng.integers(0, 8)) :] if rng.random() < 0.5 else base
    b = base[int(rng.integers(0, 8)) :] if rng.random() < 0.7 else np.zeros(64, base.dtype)
    if rng.random() < 0.2:
        b = b.view(np.int8)  # another item size: never onto itself
    rows = rng.integers(0, 6, (int(rng.integers(0, 9)), 11)).astype(np.int64)
    rows[:, 8:11] = np.where(rng.random((len(rows), 3)) < 0.8, rows[:, 5:8], rows[:, 8:11])
    rows[:, 1] = np.where(rng.random(len(rows)) < 0.7, rows[:, 0] + int(rng.integers(-4, 5)),
                          rows[:, 1])  # fmt: skip
    rows[:, :2] = np.abs(rows[:, :2])
    got = C.itself(a, b, rows)
    want = LG.itself_reference(a, b, rows)
    assert got.dtype == want.dtype == np.bool_
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(C.itself(None, b, rows), LG.itself_reference(None, b, rows))


def test_itself_declines_what_it_cannot_take() -> None:
    buf = np.zeros(16, np.float32)
    rows = np.zeros((2, 11), np.int64)
    assert C.itself(buf, buf, rows).all()
    assert C.itself(buf[::2], buf, rows) is None  # not contiguous
    assert C.itself(buf, buf, rows.astype(np.int32)) is None
    assert C.itself(buf, buf, rows.astype(np.float64)) is None
    assert C.itself(buf, buf, rows.T.copy()) is None
    rows[1, 0] = 1 << 41
    assert C.itself(buf, buf, rows) is None
