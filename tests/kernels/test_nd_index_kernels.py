"""gather_nd / scatter_nd kernels: the shared index-row and buffer checks (index.pxd)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import elements, index

DIMS = np.array([3, 4], np.intp)  # a [3][4][2] table: slices of 2 values
TABLE = np.arange(24, dtype=np.int32)


def test_gather_and_scatter_nd_agree_with_numpy() -> None:
    idx = np.array([2, -1, 0, 1], np.int32)  # rows (2, 3) and (0, 1)
    dst = np.full(4, -7, np.int32)
    assert index.gather_nd(TABLE, idx, dst, DIMS, 2) == -1
    want = TABLE.reshape(3, 4, 2)[[2, 0], [3, 1]].ravel()
    np.testing.assert_array_equal(dst, want)
    table = TABLE.copy()
    assert elements.scatter_nd(table, idx, -want, DIMS, 2) == -1
    expect = TABLE.reshape(3, 4, 2).copy()
    expect[[2, 0], [3, 1]] *= -1
    np.testing.assert_array_equal(table, expect.ravel())


@pytest.mark.parametrize("bad", [[0, 4], [3, 0], [0, -5], [-4, 0]])
def test_out_of_range_index_is_reported_before_any_write(bad: list[int]) -> None:
    idx = np.array([1, 1, *bad], np.int32)
    sizes = [3, 4, 3, 4]
    position = next(i for i, (v, n) in enumerate(zip(idx, sizes, strict=True)) if not -n <= v < n)
    dst = np.full(4, -7, np.int32)
    assert index.gather_nd(TABLE, idx, dst, DIMS, 2) == position
    assert (dst == -7).all()
    table = TABLE.copy()
    assert elements.scatter_nd(table, idx, np.zeros(4, np.int32), DIMS, 2) == position
    np.testing.assert_array_equal(table, TABLE)


def test_bad_rows_and_small_buffers_raise() -> None:
    out = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match="bad index rows"):
        index.gather_nd(TABLE, np.zeros(3, np.int32), out, DIMS, 2)
    with pytest.raises(ValueError, match="bad index rows"):
        elements.scatter_nd(TABLE.copy(), np.zeros(3, np.int32), out, DIMS, 2)
    with pytest.raises(ValueError, match="gathered slices"):
        index.gather_nd(TABLE[:23], np.zeros(4, np.int32), out, DIMS, 2)
    with pytest.raises(ValueError, match="gathered slices"):
        index.gather_nd(TABLE, np.zeros(4, np.int32), out[:3], DIMS, 2)
    with pytest.raises(ValueError, match="scattered slices"):
        elements.scatter_nd(TABLE[:23].copy(), np.zeros(4, np.int32), out, DIMS, 2)
    with pytest.raises(ValueError, match="scattered slices"):
        elements.scatter_nd(TABLE.copy(), np.zeros(4, np.int32), out[:3], DIMS, 2)
