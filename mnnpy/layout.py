"""NC4HW4 packing and format conversion in NumPy.

This module is the reference for ``mnnpy/backend/cpu/kernels/pack.pyx``. A tensor's logical
shape lists its dimensions in the order of its format: ``(N, C, H, W)`` for NCHW and NC4HW4,
``(N, H, W, C)`` for NHWC. NC4HW4 stores channels in blocks of four, ``[N][C/4][H][W][4]``, padding
the last block with zeros; any number of trailing spatial dims is allowed (``area`` is their
product). Tensors with fewer than two dims are never packed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.tensor_format import DimensionFormat

__all__ = [
    "c4",
    "is_packed",
    "storage_elements",
    "pack_nc4hw4",
    "unpack_nc4hw4",
    "unpack_mnn_const",
    "to_format",
    "logical_shape_in",
]


def c4(channels: int) -> int:
    """Number of 4-channel blocks that hold ``channels``."""
    return (channels + 3) // 4


def is_packed(shape: Sequence[int], fmt: DimensionFormat) -> bool:
    """Whether a tensor of this shape and format is stored as NC4HW4 blocks."""
    return fmt == DimensionFormat.NC4HW4 and len(shape) >= 2


def packed_as_plain(shape: Sequence[int]) -> bool:
    """Whether NC4HW4 storage of this NCHW shape holds its values in plain (C) order.

    True for ``[N, C, 1, ..., 1]`` with ``C`` a multiple of 4 (a token's or an RNN state's
    ``[1, C, 1, 1]``): each block's 4 lanes are 4 consecutive channels, with no padding.
    """
    return len(shape) >= 2 and shape[1] % 4 == 0 and math.prod(shape[2:]) == 1


def storage_elements(shape: Sequence[int], fmt: DimensionFormat) -> int:
    """Number of elements the storage of a tensor needs (NC4HW4 pads channels to 4)."""
    if is_packed(shape, fmt):
        return shape[0] * c4(shape[1]) * 4 * math.prod(shape[2:])
    return math.prod(shape)


def pack_nc4hw4(x: np.ndarray) -> np.ndarray:
    """Pack a logical ``(N, C, *spatial)`` array into flat NC4HW4 storage."""
    n, c = x.shape[0], x.shape[1]
    area = math.prod(x.shape[2:])
    blocks = c4(c)
    padded = np.zeros((n, blocks * 4, area), dtype=x.dtype)
    padded[:, :c, :] = x.reshape(n, c, area)
    # [N][C4][4][area] -> [N][C4][area][4]: the 4 channels of a block sit next to each other.
    return np.ascontiguousarray(padded.reshape(n, blocks, 4, area).transpose(0, 1, 3, 2)).ravel()


def unpack_nc4hw4(buf: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Unpack flat NC4HW4 storage into a new logical ``(N, C, *spatial)`` array."""
    out = np.empty(math.prod(shape), dtype=buf.dtype)
    unpack_into(buf, shape, out)
    return out.reshape(tuple(shape))


def unpack_into(buf: np.ndarray, shape: Sequence[int], out: np.ndarray) -> None:
    """Unpack flat NC4HW4 storage into ``out``, the flat plain storage of ``(N, C, *spatial)``.

    No temporary: strided copies of the full 4-channel blocks, then of the last partial one.
    """
    n, c = shape[0], shape[1]
    area, full = math.prod(shape[2:]), c // 4
    packed = buf[: n * c4(c) * area * 4].reshape(n, c4(c), area, 4)
    dst = out[: n * c * area].reshape(n, c, area)
    if full:  # splitting dim 1 of a C-ordered view is always a view
        blocks = dst[:, : full * 4].reshape(n, full, 4, area)
        np.copyto(blocks, packed[:, :full].transpose(0, 1, 3, 2))
    if c > full * 4:
        np.copyto(dst[:, full * 4 :], packed[:, full, :, : c - full * 4].transpose(0, 2, 1))


def unpack_mnn_const(values: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """The logical (NCHW-ordered) array of a model constant stored in NC4HW4 (rank >= 2).

    MNN copies ``Tensor::size()`` elements into such a constant (``InitNet.cpp``,
    ``OpCommonUtils::loadBlobData``): channels rounded up to 4, in MNN's CPU NC4HW4 order
    ``[C/4][N][spatial...][4]``, the batch inside each channel block as ``CPUTensorConverter``
    reads it (not mnnpy's own ``[N][C/4]`` storage order). The padding lanes are dropped.

    Raises:
        ValueError: when ``values`` is not that padded size (MNN would over-read it).
    """
    n, c, rest = int(dims[0]), int(dims[1]), tuple(int(d) for d in dims[2:])
    blocks = c4(c)
    padded = n * blocks * 4 * math.prod(rest)
    if values.size != padded:
        raise ValueError(
            f"NC4HW4 with dims {tuple(dims)!r}: {values.size} values, expected {padded} "
            "(channels padded to a multiple of 4)"
        )
    split = values.reshape(blocks, n, *rest, 4)
    logical = np.moveaxis(split, -1, 1).reshape(blocks * 4, n, *rest)[:c].swapaxes(0, 1)
    return np.ascontiguousarray(logical)


def logical_shape_in(shape: Sequence[int], src: DimensionFormat, dst: DimensionFormat) -> tuple:
    """The logical shape of the same data seen in format ``dst`` (4-D and up move C)."""
    src_nhwc = src == DimensionFormat.NHWC
    dst_nhwc = dst == DimensionFormat.NHWC
    shape = tuple(shape)
    if len(shape) < 3 or src_nhwc == dst_nhwc:
        return shape
    if src_nhwc:  # (N, *spatial, C) -> (N, C, *spatial)
        return (shape[0], shape[-1], *shape[1:-1])
    return (shape[0], *shape[2:], shape[1])


def to_format(x: np.ndarray, src: DimensionFormat, dst: DimensionFormat) -> np.ndarray:
    """Reorder a logical array from format ``src`` to format ``dst`` (a view when possible)."""
    src_nhwc = src == DimensionFormat.NHWC
    dst_nhwc = dst == DimensionFormat.NHWC
    if x.ndim < 3 or src_nhwc == dst_nhwc:
        return x
    if src_nhwc:
        return np.moveaxis(x, -1, 1)
    return np.moveaxis(x, 1, -1)


def pack_depthwise_weight(weight: np.ndarray, empty: Any = np.zeros) -> np.ndarray:
    """A depthwise weight ``(C, 1, KH, KW)`` as ``[C/4][KH][KW][4]``, zero-padded, flat.

    The order the CPU depthwise (de)convolution kernels read, one 4-channel lane per tap (dtype
    kept); written into ``empty(size, dtype)`` (zeroed, flat) with one strided copy.
    """
    c, _, kh, kw = weight.shape
    out = empty(c4(c) * 4 * kh * kw, weight.dtype)
    full, rest = divmod(c, 4)
    lanes = out.reshape(c4(c), kh, kw, 4).transpose(0, 3, 1, 2)  # [C/4][4][KH][KW]
    lanes[:full] = weight[: full * 4, 0].reshape(full, 4, kh, kw)
    if rest:
        lanes[full, :rest] = weight[full * 4 :, 0]
    return out
