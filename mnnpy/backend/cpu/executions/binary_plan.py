"""Index spaces of the CPU BinaryOp / Eltwise (``eltwise.binary``).

Which storages map lane by lane, and broadcasting as one stride per operand over merged dims.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend.cpu.kernels import eltwise as K
from mnnpy.errors import NotSupportError
from mnnpy.tensor import Tensor

__all__ = ["broadcast_plan", "lane_compatible"]


def lane_compatible(t: Tensor, out: Tensor) -> bool:
    """Whether ``t``'s storage maps element by element onto ``out``'s (same data order)."""
    if t.element_size != out.element_size:
        return False
    if t.is_packed or out.is_packed:
        return t.is_packed and out.is_packed and t.shape == out.shape
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
    cols = np.array(space, dtype=np.intp).T
    return (
        np.ascontiguousarray(cols[0]),
        np.ascontiguousarray(cols[1]),
        np.ascontiguousarray(cols[2]),
    )
