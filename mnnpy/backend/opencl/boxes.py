"""Index arithmetic shared by the OpenCL executions: storage descriptors and logical boxes.

Kernels address tensors by their *logical* flat index (C order over the logical shape) and map
it to storage with a descriptor ``(packed, C, area)`` (``cl/common.h``): plain storage is the
logical order itself, NC4HW4 is ``[N][C/4][area][4]``. A data-movement op is then a list of
boxes: an iteration space of up to six dims, each with a stride into the source's and the
destination's logical flat index (MNN's raster regions, on logical indexes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyopencl.cltypes as clt

from mnnpy import layout
from mnnpy.errors import NotSupportError
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = [
    "MAX_RANK",
    "contiguous",
    "desc",
    "int4",
    "int8",
    "nchw_ordered_map",
    "packed",
]

MAX_RANK = 6
NHWC = DimensionFormat.NHWC
_CLT: Any = clt  # its vector types are made at import time, out of mypy's sight


def int4(a: int, b: int, c: int, d: int) -> np.ndarray:
    """An OpenCL int4 kernel argument."""
    return _CLT.make_int4(int(a), int(b), int(c), int(d))


def packed(t: Tensor) -> bool:
    """Whether ``t`` is stored as NC4HW4 blocks (by whoever holds it)."""
    return layout.is_packed(t.shape, t.storage_format)


def desc(t: Tensor) -> np.ndarray:
    """The kernels' int4 storage descriptor of ``t``: (packed, C, area, 0)."""
    if packed(t):
        return int4(1, t.shape[1], math.prod(t.shape[2:]), 0)
    return int4(0, 1, 1, 0)


def same_bca(a: Tensor, b: Tensor) -> bool:
    """Whether two NC4HW4 tensors have the same batch, channels and area (the same storage)."""
    return (a.shape[0], a.shape[1], math.prod(a.shape[2:])) == (
        b.shape[0],
        b.shape[1],
        math.prod(b.shape[2:]),
    )


def contiguous(shape: Sequence[int]) -> list[int]:
    """C-order strides, in elements."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= int(d)
    return strides[::-1]


def int8(values: Sequence[int], fill: int) -> np.ndarray:
    """An OpenCL int8 of up to six values, right-aligned, the front filled with ``fill``."""
    v = [int(x) for x in values]
    if len(v) > MAX_RANK:
        raise NotSupportError(f"rank {len(v)} is more than the OpenCL kernels take ({MAX_RANK})")
    v = [fill] * (MAX_RANK - len(v)) + v
    return _CLT.make_int8(*v, 0, 0)


def nchw_ordered_map(src: Tensor, dst: Tensor) -> tuple[list[int], list[int], list[int]]:
    """(box, source strides, destination strides) copying ``src``'s data into ``dst``'s format.

    Both hold the same data; NHWC lists channels last, NCHW and NC4HW4 second (rank >= 3).
    """
    box = list(dst.shape)
    s_str, d_str = contiguous(src.shape), contiguous(dst.shape)
    s_nhwc, d_nhwc = src.dimension_format == NHWC, dst.dimension_format == NHWC
    if s_nhwc == d_nhwc or src.ndim < 3:
        return box, s_str, d_str
    if s_nhwc:  # dst (N, C, *S) reads src (N, *S, C)
        return box, [s_str[0], s_str[-1], *s_str[1:-1]], d_str
    return box, [s_str[0], *s_str[2:], s_str[1]], d_str  # dst (N, *S, C) reads (N, C, *S)
