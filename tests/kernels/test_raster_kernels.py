"""Raster region kernel (kernels/raster.pyx) and the region planner (geometry/regions.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.geometry import regions as R
from mnnpy.tensor_format import DimensionFormat

DTYPES = [np.float32, np.int32, np.int8, np.uint8, np.int16, np.float64]


def row(so: int, do: int, n: tuple, ss: tuple, ds: tuple) -> list[int]:
    return [so, do, *n, *ss, *ds]


# memcpy rows, 4-strided rows, lanes walked inside the inner dim (n1 <= 4), a zero-size region,
# and a big one that the 2-thread run splits
ROWS = [
    row(0, 0, (2, 3, 10), (40, 10, 1), (30, 10, 1)),
    row(1, 3, (2, 4, 7), (40, 1, 4), (35, 7, 1)),
    row(2, 1, (3, 2, 6), (30, 3, 5), (24, 1, 4)),
    row(0, 5, (1, 3, 9), (0, 1, 4), (0, 27, 3)),
    row(5, 5, (0, 3, 9), (0, 1, 4), (0, 27, 3)),
    row(0, 0, (2, 4, 9), (50, 10, 1), (40, 1, 4)),  # lanes: 4 plain rows to a block row
    row(3, 1, (2, 2, 9), (50, 10, 1), (40, 2, 4)),  # lanes 2 apart, both sides strided
    row(0, 1, (2, 2, 11), (60, 20, 1), (48, 1, 4)),  # 2 plain rows to 2 adjacent lanes
    row(2, 0, (2, 2, 11), (48, 1, 4), (60, 20, 1)),  # and back
    row(0, 0, (2, 5, 20000), (100000, 1, 5), (100000, 20000, 1)),
    row(0, 0, (3, 4, 9000), (40000, 1, 4), (36000, 9000, 1)),  # big, lanes
    row(7, 2, (1, 3, 30000), (0, 1, 4), (0, 30000, 1)),  # big, lanes, one block: inner split
    row(0, 0, (1, 1, 150000), (0, 0, 1), (0, 0, 1)),  # one long memcpy, split
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", range(len(ROWS)))
def test_copy_regions_matches_numpy_twin(dtype: type, k: int) -> None:
    rows = np.array([ROWS[k]], np.int64)
    src = (np.arange(200000) % 101).astype(dtype)
    want = np.full(200000, 7, dtype)
    R.apply_reference(src, want, rows) if k < 9 else _fast_reference(src, want, rows)
    for t in (1, 2):
        dst = np.full(200000, 7, dtype)
        K.copy_regions(src, dst, rows, t)
        np.testing.assert_array_equal(dst, want)
        K.zero_regions(dst, rows, t)
        touched = np.full(200000, 7, dtype)
        R.apply_reference(np.zeros_like(src), touched, rows) if k < 9 else _fast_reference(
            np.zeros_like(src), touched, rows
        )
        np.testing.assert_array_equal(dst, touched)


def _fast_reference(src: np.ndarray, dst: np.ndarray, rows: np.ndarray) -> None:
    for so, do, n0, n1, n2, s0, s1, s2, d0, d1, d2 in rows.tolist():
        i, j, k = np.meshgrid(np.arange(n0), np.arange(n1), np.arange(n2), indexing="ij")
        dst[do + i * d0 + j * d1 + k * d2] = src[so + i * s0 + j * s1 + k * s2]


@pytest.mark.parametrize(
    "bad",
    [
        row(0, 0, (1, 1, 11), (0, 0, 1), (0, 0, 1)),  # reads past the source
        row(0, 0, (2, 1, 6), (0, 0, 1), (6, 0, 1)),  # writes past the destination
        row(0, 0, (1, 1, 2), (0, 0, -1), (0, 0, 1)),  # negative stride
        row(-1, 0, (1, 1, 2), (0, 0, 1), (0, 0, 1)),  # negative offset
    ],
)
def test_bad_regions_raise_before_copying(bad: list[int]) -> None:
    src, dst = np.ones(10, np.float32), np.zeros(10, np.float32)
    with pytest.raises(ValueError):
        K.copy_regions(src, dst, np.array([bad], np.int64))
    assert not dst.any()
    with pytest.raises(ValueError):
        K.copy_regions(src, dst, np.zeros((1, 10), np.int64))  # wrong column count


def test_buffers_must_be_contiguous_and_alike() -> None:
    rows = np.array([row(0, 0, (1, 1, 4), (0, 0, 1), (0, 0, 1))], np.int64)
    with pytest.raises(ValueError):
        K.copy_regions(np.zeros(8, np.float32), np.zeros(8, np.int8), rows)
    with pytest.raises(ValueError):
        K.copy_regions(np.zeros(16, np.float32)[::2], np.zeros(8, np.float32), rows)
    with pytest.raises(ValueError):
        K.copy_regions(np.zeros(8, np.float32), np.zeros(8, np.float32), rows.astype(np.int32))


def test_a_copy_onto_itself_is_skipped_and_a_shifted_one_is_not() -> None:
    buf = np.arange(10, dtype=np.int32)
    K.copy_regions(buf, buf, np.array([row(0, 0, (1, 1, 10), (0, 0, 1), (0, 0, 1))], np.int64))
    np.testing.assert_array_equal(buf, np.arange(10))
    K.copy_regions(buf, buf, np.array([row(5, 0, (1, 1, 5), (0, 0, 1), (0, 0, 1))], np.int64))
    np.testing.assert_array_equal(buf, [5, 6, 7, 8, 9, 5, 6, 7, 8, 9])


# -- the planner ------------------------------------------------------------------------------
def storage(x: np.ndarray, packed: bool) -> np.ndarray:
    return layout.pack_nc4hw4(x) if packed else x.ravel().copy()


def logical(buf: np.ndarray, shape: tuple, packed: bool) -> np.ndarray:
    return layout.unpack_nc4hw4(buf, shape) if packed else buf.reshape(shape)


def run_plan(space, src_side, dst_side, x, out_shape, dtype, fill=-3):
    s_packed, d_packed = src_side.layout.packed, dst_side.layout.packed
    buf = storage(x, s_packed)
    results = []
    for t in (1, 2):
        rows = R.plan(space, src_side, dst_side)
        assert rows is not None
        n = layout.storage_elements(out_shape, DimensionFormat.NC4HW4 if d_packed else 0)
        out = np.full(n, fill, dtype)
        K.copy_regions(buf, out, rows, t)
        K.zero_regions(out, R.padding_regions(dst_side.layout), t)
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    if d_packed:  # padding lanes are zero, not left over
        full = results[0].reshape(out_shape[0], -1, int(np.prod(out_shape[2:])), 4)
        c = out_shape[1]
        np.testing.assert_array_equal(full[:, -1, :, c % 4 :] if c % 4 else full[:, :0], 0)
    return logical(results[0], out_shape, d_packed)


PACKINGS = list(itertools.product([False, True], repeat=2))


@pytest.mark.parametrize(("sp", "dp"), PACKINGS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("channels", [(1, 3), (4, 5, 17), (58, 58), (3, 4)])
def test_channel_concat(channels: tuple, sp: bool, dp: bool, dtype: type) -> None:
    rng = np.random.default_rng(sum(channels))
    xs = [(rng.standard_normal((2, c, 3, 5)) * 100).astype(dtype) for c in channels]
    want = np.concatenate(xs, axis=1)
    got_buf = None
    out_layout = R.Layout(want.shape, dp)
    start = 0
    pieces = []
    for x in xs:
        src = R.Side.box(R.Layout(x.shape, sp), [0] * 4, range(4))
        dst = R.Side.box(out_layout, [0, start, 0, 0], range(4))
        pieces.append((x, src, dst))
        start += x.shape[1]
    n = layout.storage_elements(want.shape, DimensionFormat.NC4HW4 if dp else 0)
    got_buf = np.full(n, -3, dtype)
    for x, src, dst in pieces:
        rows = R.plan(x.shape, src, dst)
        K.copy_regions(storage(x, sp), got_buf, rows, 2)
    K.zero_regions(got_buf, R.padding_regions(out_layout), 2)
    np.testing.assert_array_equal(logical(got_buf, want.shape, dp), want)


@pytest.mark.parametrize(("sp", "dp"), PACKINGS)
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17, 116])
def test_channel_slices(c: int, sp: bool, dp: bool) -> None:
    x = np.arange(2 * c * 3 * 5, dtype=np.int32).reshape(2, c, 3, 5)
    for a in sorted({0, c // 2, c - 1}):
        b = min(c, a + max(1, (c + 1) // 2))
        space = (2, b - a, 3, 5)
        src = R.Side.box(R.Layout(x.shape, sp), [0, a, 0, 0], range(4))
        dst = R.Side.box(R.Layout(space, dp), [0] * 4, range(4))
        np.testing.assert_array_equal(run_plan(space, src, dst, x, space, np.int32), x[:, a:b])


@pytest.mark.parametrize(("sp", "dp"), PACKINGS)
@pytest.mark.parametrize(
    ("shape", "perm"),
    [
        ((2, 5, 3, 4), (0, 2, 3, 1)),
        ((2, 5, 3, 4), (0, 3, 1, 2)),
        ((2, 17, 3, 1), (1, 0, 3, 2)),
        ((1, 2, 58, 3, 4), (0, 2, 1, 3, 4)),
        ((2, 3, 6, 2, 5), (4, 3, 2, 1, 0)),
    ],
)
def test_permute(shape: tuple, perm: tuple, sp: bool, dp: bool) -> None:
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    out = x.transpose(perm)
    src_dims: list[int | None] = [None] * len(shape)
    for d, k in enumerate(perm):
        src_dims[k] = d
    src = R.Side.box(R.Layout(shape, sp), [0] * len(shape), src_dims)
    dst = R.Side.box(R.Layout(out.shape, dp), [0] * len(shape), range(len(shape)))
    np.testing.assert_array_equal(run_plan(out.shape, src, dst, x, out.shape, np.float32), out)


@pytest.mark.parametrize(("sp", "dp"), PACKINGS)
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((1, 116, 3, 4), (1, 2, 58, 3, 4)),
        ((1, 58, 2, 3, 4), (1, 116, 3, 4)),
        ((2, 6, 5), (2, 3, 2, 5)),
        ((2, 17, 1, 1), (2, 17)),
        ((3, 4, 5), (3, 20)),
        ((2, 5, 3, 4), (2, 60)),
    ],
)
def test_reshape(a: tuple, b: tuple, sp: bool, dp: bool) -> None:
    x = np.arange(np.prod(a), dtype=np.int32).reshape(a)
    space = R.refine(a, b)
    assert space is not None
    src = R.merged(R.Layout(a, sp and len(a) >= 2), range(len(a)), space)
    dst = R.merged(R.Layout(b, dp and len(b) >= 2), range(len(b)), space)
    got = run_plan(space, src, dst, x, b, np.int32)
    np.testing.assert_array_equal(got, x.reshape(b))


def test_refine() -> None:
    assert R.refine((1, 116, 28, 28), (1, 2, 58, 28, 28)) == [2, 58, 28, 28]
    assert R.refine((4, 6), (6, 4)) is None
    assert R.refine((2, 3), (7,)) is None
    assert R.refine((), (1, 1)) == []


def test_aligned_channel_concat_is_whole_block_copies() -> None:
    out = R.Layout((1, 128, 55, 55), True)
    src = R.Side.box(R.Layout((1, 64, 55, 55), True), [0] * 4, range(4))
    rows = R.plan((1, 64, 55, 55), src, R.Side.box(out, [0, 64, 0, 0], range(4)))
    assert rows is not None and len(rows) == 1
    assert rows[0, 4] == 64 * 55 * 55 and rows[0, 7] == rows[0, 10] == 1  # one memcpy


@pytest.mark.parametrize("seed", range(12))
def test_random_boxes(seed: int) -> None:
    """A random sub-box of a random tensor, permuted, into a random place of a bigger one."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(2, 6))
    shape = tuple(int(v) for v in rng.integers(1, 7, rank))
    shape = (shape[0], int(rng.integers(1, 19)), *shape[2:])
    perm = tuple(int(v) for v in rng.permutation(rank))
    x = rng.integers(-100, 100, shape).astype(np.int32)
    a = [int(rng.integers(0, n)) for n in shape]
    b = [int(rng.integers(a_ + 1, n + 1)) for a_, n in zip(a, shape, strict=True)]
    box = x[tuple(slice(p, q) for p, q in zip(a, b, strict=True))].transpose(perm)
    pad = [int(rng.integers(0, 6)) for _ in range(rank)]
    out_shape = tuple(n + p for n, p in zip(box.shape, pad, strict=True))
    at = [int(rng.integers(0, p + 1)) for p in pad]
    src_dims: list[int | None] = [None] * rank
    for d, k in enumerate(perm):
        src_dims[k] = d
    for sp, dp in PACKINGS:
        src = R.Side.box(R.Layout(shape, sp), a, src_dims)
        dst = R.Side.box(R.Layout(out_shape, dp), at, range(rank))
        got = run_plan(box.shape, src, dst, x, out_shape, np.int32, fill=0)
        want = np.zeros(out_shape, np.int32)
        want[tuple(slice(p, p + n) for p, n in zip(at, box.shape, strict=True))] = box
        np.testing.assert_array_equal(got, want)


def test_remembered_plans_are_the_plans_and_each_call_owns_its_rows() -> None:
    """``plan`` remembers plans by description: a repeat gives equal rows in a new array, a
    changed side (same objects, other start) a new plan, and the memo stays bounded."""
    packed = R.Layout((1, 10, 3, 5), True)
    plain = R.Layout((1, 10, 3, 5), False)
    src = R.Side.box(packed, [0, 1, 0, 0], [0, 1, 2, 3])
    dst = R.Side.box(plain, [0, 0, 0, 0], [0, 1, 2, 3])
    space = [1, 9, 3, 5]
    first = R.plan(space, src, dst)
    again = R.plan(space, src, dst)
    assert first is not None and again is not None and first is not again
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, R._plan(space, src, dst))
    first[:] = -1  # the caller's copy: the memo keeps its own
    np.testing.assert_array_equal(R.plan(space, src, dst), again)
    src.start[1] = 0  # the same Side object, another copy
    moved = R.plan(space, src, dst)
    np.testing.assert_array_equal(moved, R._plan(space, src, dst))
    assert not np.array_equal(moved, again)
    got = np.zeros(30 * 5, np.float32)
    data = np.arange(4 * 3 * 5 * 4, dtype=np.float32)  # 3 blocks of 4 lanes hold 10 channels
    R.apply_reference(data, got, moved)
    want = layout.unpack_nc4hw4(data, (1, 10, 3, 5))[:, :9].ravel()
    np.testing.assert_array_equal(got[: want.size], want)
    assert R._memo_bytes[0] <= R._MEMO_BYTES


def test_bind_regions_runs_the_jobs_in_order_as_the_plain_calls() -> None:
    """``bind_regions``: copies then a zeroing, bound once, run twice on changed contents."""
    rng = np.random.default_rng(3)
    src = rng.standard_normal(64).astype(np.float32)
    copy = np.array([row(1, 0, (2, 3, 4), (16, 4, 1), (12, 4, 1))], np.int64)
    zero = np.array([row(0, 5, (1, 1, 3), (0, 0, 1), (0, 0, 1))], np.int64)
    got = np.full(40, 7.0, np.float32)
    call = K.bind_regions([(src, got, copy, False), (got, got, zero, True)], 2)
    for _ in range(2):
        src += 1
        want = np.full(40, 7.0, np.float32)
        K.copy_regions(src, want, copy)
        K.zero_regions(want, zero)
        got[:] = 7.0
        call()
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError):  # checked when bound
        K.bind_regions([(src, np.zeros(4, np.float32), copy, False)])


@pytest.mark.parametrize("seed", range(6))
def test_view_rows_copy_a_strided_view(seed: int) -> None:
    """``regions.view_rows`` (a StridedSlice's bound copy) against NumPy's copy of the view."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 6, size=int(rng.integers(1, 6))))
    base = rng.standard_normal(int(np.prod(shape))).astype(np.float32)
    index = tuple(slice(int(rng.integers(0, n)), n, int(rng.integers(1, 3))) for n in shape)
    view = base.reshape(shape)[index]
    rows = R.view_rows(base, view)
    assert rows is not None
    got = np.full(view.size, 7.0, np.float32)
    K.copy_regions(base, got, rows)
    np.testing.assert_array_equal(got, view.reshape(-1))
    assert R.view_rows(base, base.reshape(shape)[..., ::-1]) is None or shape[-1] == 1
