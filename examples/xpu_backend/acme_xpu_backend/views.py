"""Views of 4-D tensor storage that let one NumPy kernel serve every layout.

An execution sees its tensors in the layout the backend stores them in: plain NCHW or NHWC on
the device, or the CPU's NC4HW4 when the backend shares host memory. :func:`blocked` presents any
of them, without copying, as ``(N, CB, B, H, W)`` where logical channel ``c = cb * B + b``:
``B`` is 4 for NC4HW4 (whose padding lanes are zero) and 1 otherwise. Kernels then work on
``CB * B`` channels and never care which layout they got.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = ["block_of", "blocked", "nchw_shape", "padded_channels", "stage"]


def nchw_shape(t: Tensor) -> tuple[int, int, int, int]:
    """A 4-D tensor's shape in NCHW order, whatever its format."""
    n, a, b, c = t.shape
    return (n, c, a, b) if t.dimension_format == DimensionFormat.NHWC else (n, a, b, c)


def block_of(fmt: DimensionFormat) -> int:
    """Channels per block in storage of format ``fmt``."""
    return 4 if fmt == DimensionFormat.NC4HW4 else 1


def padded_channels(channels: int, fmt: DimensionFormat) -> int:
    """Channels the storage holds, padding included."""
    b = block_of(fmt)
    return (channels + b - 1) // b * b


def blocked(flat: np.ndarray, shape: Sequence[int], fmt: DimensionFormat) -> np.ndarray:
    """A ``(N, CB, B, H, W)`` view of the flat storage of a 4-D tensor of logical ``shape``."""
    if fmt == DimensionFormat.NC4HW4:
        n, c, h, w = shape
        cb = (c + 3) // 4
        return flat[: n * cb * h * w * 4].reshape(n, cb, h, w, 4).transpose(0, 1, 4, 2, 3)
    if fmt == DimensionFormat.NHWC:
        n, h, w, c = shape
        return flat[: n * h * w * c].reshape(n, h, w, c).transpose(0, 3, 1, 2)[:, :, None]
    n, c, h, w = shape
    return flat[: n * c * h * w].reshape(n, c, 1, h, w)


def stage(src: np.ndarray, dst: np.ndarray, top: int, left: int, edge: bool) -> None:
    """Copy ``src`` (..., H, W) into ``dst`` (..., Hp, Wp) at (top, left) and fill the border.

    The border is zeros, or with ``edge`` the nearest input value (MNN's max pooling clamps its
    window into the input, which is the same as replicating the edges). Rows or columns of the
    input beyond ``dst`` are dropped: the windows never read them. Allocates nothing.
    """
    h, w = src.shape[-2:]
    hp, wp = dst.shape[-2:]
    y0, y1, x0, x1 = max(top, 0), min(hp, top + h), max(left, 0), min(wp, left + w)
    assert y1 > y0 and x1 > x0, "every window overlaps the input"
    dst[..., y0:y1, x0:x1] = src[..., y0 - top : y1 - top, x0 - left : x1 - left]
    if edge:
        dst[..., :y0, x0:x1] = dst[..., y0 : y0 + 1, x0:x1]
        dst[..., y1:, x0:x1] = dst[..., y1 - 1 : y1, x0:x1]
        dst[..., :x0] = dst[..., x0 : x0 + 1]
        dst[..., x1:] = dst[..., x1 - 1 : x1]
    else:
        dst[..., :y0, :] = 0
        dst[..., y1:, :] = 0
        dst[..., y0:y1, :x0] = 0
        dst[..., y0:y1, x1:] = 0
