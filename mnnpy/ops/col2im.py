"""Col2Im: the inverse scatter of Im2Col, summing every patch column back into an image.

MNN's ONNX converter lowers a 3-D transposed convolution to 2-D Deconvolutions of the depth
slices, then a ``Col2Im`` over the depth axis (``kernelY`` = the depth kernel, ``kernelX`` = 1).
Input 0 is ``[n, c * kh * kw, oh * ow]`` (or ``[c * kh * kw, oh * ow]`` for one image), input 1
the image size ``[ih, iw]`` (int32 content, needed to shape); the output ``[n, c, ih, iw]`` holds
at every pixel the sum of the columns that Im2Col with the same parameters would have read it into
(``ShapeConvolution.cpp`` ``Col2ImSizeComputer``, ``GeometryCol2Im``: a loop over the images of
raster regions with ``fuse = ADD``). ``oh, ow`` follow the Im2Col of the image, with the dilated
kernel (see ``mnnpy/ops/im2col.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidModelError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.ops.im2col import Im2ColGeometry, geometry
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


def image_geometry(
    op: OpDef, col_shape: Sequence[int], size: np.ndarray | Sequence[int]
) -> Im2ColGeometry:
    """The Im2Col of the output image: checks that ``col_shape`` is its patch matrix.

    Raises:
        ComputeSizeError: a column rank other than 2 or 3, an image size that is not 2 positive
            values, rows not a multiple of the kernel area, or columns not ``oh * ow``.
    """
    common = getattr(op.param, "common", None)
    if common is None:
        raise InvalidModelError("Col2Im has no Convolution2DCommon parameter")
    hw = [int(v) for v in np.asarray(size).reshape(-1)]
    if len(hw) != 2 or min(hw) < 1:
        raise ComputeSizeError(f"Col2Im image size must be 2 positive values, got {hw!r}")
    if len(col_shape) not in (2, 3):
        raise ComputeSizeError(f"Col2Im needs a 2-D or 3-D input, got {tuple(col_shape)!r}")
    n, rows, cols = (1, *col_shape) if len(col_shape) == 2 else tuple(col_shape)
    area = max(common.kernelY, 1) * max(common.kernelX, 1)
    if rows % area or rows == 0:
        raise ComputeSizeError(f"Col2Im: {rows} rows are not channels x a {area}-tap kernel")
    g = geometry(op, (n, rows // area, *hw))
    if g.out_shape[1] != n * cols:
        raise ComputeSizeError(
            f"Col2Im: {cols} columns per image, but a {hw[0]}x{hw[1]} image has "
            f"{g.out_hw[0]}x{g.out_hw[1]} patches"
        )
    return g


@register_shape(OpType.Col2Im, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """``[n, c, ih, iw]``, input 0's dtype, NCHW."""
    if len(inputs) != 2 or len(outputs) != 1:
        raise InvalidModelError(
            f"Col2Im takes 2 inputs and 1 output, got {len(inputs)} and {len(outputs)}"
        )
    g = image_geometry(op, inputs[0].shape, content_of(inputs[1], "Col2Im's image size"))
    outputs[0].shape = (g.n, g.c, *g.in_hw)
    outputs[0].dtype = inputs[0].dtype
    outputs[0].dimension_format = DimensionFormat.NCHW


def accumulate(g: Im2ColGeometry, cols: np.ndarray, image: np.ndarray) -> None:
    """``image`` += every patch of ``cols``, one strided add per kernel tap, in place.

    ``image`` is ``[n, c, ih, iw]``, zeroed by the caller; ``cols`` is ``[n, c, kh, kw, oh, ow]``.
    """
    (kh, kw), (sh, sw), (dh, dw), (pt, pl) = g.kernel, g.stride, g.dilate, g.pad
    for ky in range(kh):
        y0, y1 = g.valid(0, ky)
        for kx in range(kw):
            x0, x1 = g.valid(1, kx)
            if y0 == y1 or x0 == x1:
                continue
            iy, ix = y0 * sh + ky * dh - pt, x0 * sw + kx * dw - pl
            dst = image[:, :, iy : iy + (y1 - y0 - 1) * sh + 1 : sh,
                        ix : ix + (x1 - x0 - 1) * sw + 1 : sw]  # fmt: skip
            np.add(dst, cols[:, :, ky, kx, y0:y1, x0:x1], out=dst)


@register_reference(OpType.Col2Im)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Pixel by pixel sums over the padded image, on NCHW."""
    x = np.asarray(inputs[0])
    g = image_geometry(op, x.shape, inputs[1])
    (kh, kw), (sh, sw), (dh, dw), (pt, pl), (oh, ow) = (
        g.kernel, g.stride, g.dilate, g.pad, g.out_hw
    )  # fmt: skip
    cols = x.reshape(g.n, g.c, kh, kw, oh, ow)
    ih, iw = g.in_hw
    span = (ih + pt + (oh - 1) * sh + kh * dh, iw + pl + (ow - 1) * sw + kw * dw)
    padded = np.zeros((g.n, g.c, *span), np.float64)
    for ky, kx, oy, ox in np.ndindex(kh, kw, oh, ow):
        padded[:, :, oy * sh + ky * dh, ox * sw + kx * dw] += cols[:, :, ky, kx, oy, ox]
    return [padded[:, :, pt : pt + ih, pl : pl + iw].astype(x.dtype)]
