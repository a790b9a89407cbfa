"""NCHW <-> NC4HW4 ``pack`` / ``unpack`` of 4-byte elements against ``mnnpy.layout``'s NumPy
reference, with more threads than channel blocks: the blocks' planes are then cut into pieces
(``pack._blocks4``), which must give the same bytes as one thread."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import pack as P
from mnnpy.layout import pack_nc4hw4, unpack_nc4hw4

# (batch, channel, area): one block of 1-3 lanes (an input image), a plane cut at odd
# positions (not a multiple of the SSE step of 4), a few blocks, more blocks than threads
SHAPES = [
    (1, 3, 224 * 224),
    (1, 1, 12347),
    (1, 2, 9001),
    (1, 4, 8191),
    (2, 3, 5003),
    (1, 7, 4099),
    (3, 9, 2053),
]


def _values(shape: tuple[int, int, int], dtype: type) -> np.ndarray:
    rng = np.random.default_rng(sum(shape))
    if dtype is np.int32:
        return rng.integers(-(2**31), 2**31 - 1, size=shape, dtype=np.int32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_pack_matches_numpy(shape: tuple[int, int, int], threads: int, dtype: type) -> None:
    n, c, area = shape
    x = _values(shape, dtype)
    want = pack_nc4hw4(x)
    got = np.full(want.size, 7, dtype)  # padding lanes must be written as zero
    P.pack(x.ravel(), got, n, c, area, threads)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_unpack_matches_numpy(shape: tuple[int, int, int], threads: int, dtype: type) -> None:
    n, c, area = shape
    packed = pack_nc4hw4(_values(shape, dtype))
    want = unpack_nc4hw4(packed, shape).ravel()
    got = np.full(want.size, 7, dtype)
    P.unpack(packed, got, n, c, area, threads)
    np.testing.assert_array_equal(got, want)
