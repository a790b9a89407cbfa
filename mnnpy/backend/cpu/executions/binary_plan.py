"""Index spaces of the CPU BinaryOp / Eltwise (``eltwise.binary``).

Which storages map lane by lane, and broadcasting as one stride per operand over merged dims.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend.cpu.kernels import eltwise as K
from mnnpy.errors import NotSupportError
from mnnpy.layout import packed_as_plain
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = ["broadcast_plan", "channel_broadcast", "lane_compatible"]

_COMMUTATIVE = (0, 2, 8, 9)  # ADD, MUL, MINIMUM, MAXIMUM


def lane_compatible(t: Tensor, out: Tensor) -> bool:
    """Whether ``t``'s storage maps element by element onto ``out``'s (same data order)."""
    if t.element_size != out.element_size:
        return False
    packed, out_packed = t.is_packed, out.is_packed  # each asked once (it asks the backend)
    if packed and out_packed:
        return t.shape == out.shape
    if packed or out_packed:  # one packed: its storage must be the other's plain order
        plain = out if packed else t
        return (
            t.shape == out.shape
            and plain.dimension_format != DimensionFormat.NHWC
            and packed_as_plain(t.shape)
        )
    return True  # plain storage is the C order of the logical array; extra 1-dims do not move it


def broadcast_plan(
    a: Sequence[int], b: Sequence[int], out: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index space and element strides of ``a`` and ``b`` over ``out``, adjacent dims merged."""
    rank = len(out)
    dims = []
    for shape in (a, b):
        shape = (1,) * (rank - len(shape)) + tuple(shape)
        strides, step = [0] * rank, 1
        for d in range(rank - 1, -1, -1):
            strides[d] = step if shape[d] != 1 else 0
            step *= shape[d]
        dims.append(strides)
    space: list[list[int]] = []  # [extent, a_stride, b_stride]
    for d in range(rank):
        extent, sa, sb = out[d], dims[0][d], dims[1][d]
        if extent == 1:
            continue
        if space and space[-1][1] == sa * extent and space[-1][2] == sb * extent:
            space[-1] = [space[-1][0] * extent, sa, sb]
        else:
            space.append([extent, sa, sb])
    space = space or [[1, 0, 0]]
    if len(space) > K.MAX_DIMS:
        raise NotSupportError(f"broadcasting {tuple(a)!r} with {tuple(b)!r} needs too many dims")
    extents, a_strides, b_strides = zip(*space, strict=True)  # one array per column
    return np.array(extents, np.intp), np.array(a_strides, np.intp), np.array(b_strides, np.intp)


def channel_broadcast(
    a: Tensor, b: Tensor, out: Tensor, code: int | None
) -> tuple[bool, int, int, int] | None:
    """The NC4HW4 per-channel broadcast of ``a`` with ``b`` (a squeeze-excitation multiply).

    One input is stored like ``out``, the other is packed ``[1 or N, C, 1, ..., 1]``: then
    ``eltwise.bind_channel_binary`` runs on raw storage instead of logical copies.

    Returns:
        ``(swap, rows, area, b_rows)``: whether the vector is ``a`` (a commutative op then runs
        with the inputs swapped), the output's planes, pixels per plane and the vector's planes;
        None when this is not such a broadcast.
    """
    if code not in K.CHANNEL_OPS or not out.is_packed or out.ndim < 3:
        return None
    if not a.dtype == b.dtype == out.dtype == np.float32:
        return None
    n, c, *spatial = out.shape
    if a.shape == b.shape:  # no broadcast (a token's [1, C, 1, 1]): one flat row is faster
        return None
    for swap, full, vec in ((False, a, b), (True, b, a)):
        if swap and code not in _COMMUTATIVE:
            continue
        if not (full.is_packed and vec.is_packed and full.shape == out.shape):
            continue
        if vec.ndim == out.ndim and vec.shape[1] == c and vec.shape[0] in (1, n):
            if all(d == 1 for d in vec.shape[2:]):
                blocks = -(-c // 4)
                return swap, n * blocks, int(np.prod(spatial)), vec.shape[0] * blocks
    return None
