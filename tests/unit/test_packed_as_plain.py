"""NC4HW4 storage of ``[N, C, 1, ..., 1]`` with ``C % 4 == 0`` is the plain (NCHW) order.

Regression for the per-iteration cost of GRU / LSTM While bodies: their hidden state is such a
tensor, packed on one side of a BinaryOp and plain on the other, and copied between iterations.
Binaries then run on raw storage (``lane_compatible``) and carried values copy storage to storage
(``copy_value``); other shapes keep the logical (unpack / pack) paths.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.binary_plan import lane_compatible
from mnnpy.subgraph import copy_value
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def tensor(shape: tuple[int, ...], fmt: DimensionFormat, value: np.ndarray | None = None) -> Tensor:
    t = Tensor(shape, np.float32, fmt)
    t.host = np.zeros(t.storage_elements, np.float32)
    if value is not None:
        t.copy_from(value)
    return t


@pytest.mark.parametrize(
    ("shape", "plain"),
    [((1, 256, 1, 1), True), ((2, 8, 1), True), ((3, 4), True), ((1, 6, 1, 1), False),
     ((1, 8, 2, 1), False), ((1, 1, 256), False)],
)  # fmt: skip
def test_packed_as_plain(shape: tuple[int, ...], plain: bool) -> None:
    assert layout.packed_as_plain(shape) == plain
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    packed = layout.pack_nc4hw4(x)
    same = packed.size == x.size and np.array_equal(packed, x.ravel())
    assert same == plain


@pytest.mark.parametrize(
    ("shape", "fmt", "compatible"),
    [((1, 16, 1, 1), NCHW, True), ((2, 16, 1, 1), NCHW, True), ((1, 6, 1, 1), NCHW, False),
     ((1, 16, 2, 1), NCHW, False), ((1, 16, 1, 1), NHWC, False)],
)  # fmt: skip
def test_lane_compatible_packed_with_plain(
    shape: tuple[int, ...], fmt: DimensionFormat, compatible: bool
) -> None:
    packed, plain = tensor(shape, NC4HW4), tensor(shape, fmt)
    assert lane_compatible(packed, plain) == compatible
    assert lane_compatible(plain, packed) == compatible
    assert lane_compatible(packed, tensor(shape, NC4HW4))


@pytest.mark.parametrize("shape", [(1, 16, 1, 1), (1, 6, 1, 1), (1, 8, 2, 3), (1, 1, 12)])
def test_copy_value_between_packed_and_plain(shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    for src_fmt, dst_fmt in ((NC4HW4, NCHW), (NCHW, NC4HW4), (NC4HW4, NC4HW4)):
        dst = tensor(shape, dst_fmt)
        copy_value(dst, tensor(shape, src_fmt, x))
        np.testing.assert_array_equal(dst.numpy(), x)
    rows = tensor((3, *shape[1:]), NCHW)  # a scan output's row
    copy_value(rows, tensor(shape, NC4HW4, x), x.size)
    np.testing.assert_array_equal(rows.numpy()[1:2], x)


@pytest.mark.parametrize(
    "shape", [(1, 1, 256), (2, 5, 3, 2), (1, 16, 1, 1), (3, 4), (2, 7), (1, 9, 4)]
)
def test_unpack_into_matches_unpack(shape: tuple[int, ...]) -> None:
    """NC4HW4 -> plain without a temporary (an LSTM's packed ``[1, 1, 256]`` state): the values
    of ``unpack_nc4hw4``, nothing written past the tensor."""
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    buf = layout.pack_nc4hw4(x)
    out = np.full(x.size + 5, 7, np.float32)
    layout.unpack_into(buf, shape, out)
    np.testing.assert_array_equal(out[: x.size], layout.unpack_nc4hw4(buf, shape).ravel())
    assert (out[x.size :] == 7).all()
