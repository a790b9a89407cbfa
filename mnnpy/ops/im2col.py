"""Im2Col: the patches of a 4-D NCHW image as the columns of a 2-D matrix.

MNN's ONNX converter lowers a 3-D convolution to an ``Im2Col`` over the depth axis (the input
reshaped to ``[1, N*C, D, H*W]``, ``kernelY`` = the depth kernel, ``kernelX`` = 1) followed by
2-D convolutions of the depth slices. The op (``Convolution2D`` parameter, only its ``common``)
turns ``[n, c, ih, iw]`` into ``[c * kh * kw, n * oh * ow]``: row ``(c * kh + ky) * kw + kx``,
column ``(b * oh + oy) * ow + ox`` holds input pixel ``(b, c, oy * sh + ky * dh - pad_top,
ox * sw + kx * dw - pad_left)``, zero where that lies in the padding (``ShapeConvolution.cpp``
``Im2ColSizeComputer``; ``GeometryConvUtils::im2Col`` lays the same matrix out as raster
regions). Output sizes use the dilated kernel as the shape computer does (MNN 3.6.1's geometry
forgets the dilation, so its own runs of a depth-dilated Conv3d write a wrong matrix; this follows
the shape, i.e. the real convolution).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mnnpy._schema.MNN.PadMode import PadMode
from mnnpy.errors import ComputeSizeError, InvalidModelError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.ops.convolution import conv_common
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

MAX_TAPS = 1 << 16


@dataclass(frozen=True)
class Im2ColGeometry:
    """One Im2Col with shapes known.

    Input ``(n, c, ih, iw)``; per axis (y, x) the kernel, stride, dilation, padding before and
    output size.
    """

    n: int
    c: int
    in_hw: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilate: tuple[int, int]
    pad: tuple[int, int]
    out_hw: tuple[int, int]

    @property
    def out_shape(self) -> tuple[int, int]:
        """``(c * kh * kw, n * oh * ow)``."""
        (kh, kw), (oh, ow) = self.kernel, self.out_hw
        return self.c * kh * kw, self.n * oh * ow

    def taps(self, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per tap ``k`` along ``axis``: ``(lo, hi, first)``.

        The output positions ``[lo, hi)`` read inside the input (``lo == hi`` when none does);
        ``first`` is the input position of output 0.
        """
        size, s, d, p, o = (
            self.in_hw[axis],
            self.stride[axis],
            self.dilate[axis],
            self.pad[axis],
            self.out_hw[axis],
        )
        first = np.arange(self.kernel[axis], dtype=np.int64) * d - p
        lo = np.clip(-(first // s), 0, o)  # ceil(-first / s) when first < 0, else 0
        hi = np.clip((size - 1 - first) // s + 1, 0, o)
        return lo, np.maximum(lo, hi), first

    def valid(self, axis: int, k: int) -> tuple[int, int]:
        """``[lo, hi)`` of :meth:`taps` for tap ``k``."""
        lo, hi, _ = self.taps(axis)
        return int(lo[k]), int(hi[k])


def geometry(op: OpDef, shape: Sequence[int]) -> Im2ColGeometry:
    """Resolve the op for an NCHW input ``shape``.

    Raises:
        InvalidModelError: kernel, stride or dilation not positive, negative or short pads.
        NotSupportError: ``padMode`` SAME (MNN's geometry ignores it, so no MNN run to follow).
        ComputeSizeError: a rank other than 4, or an empty output (kernel past the input).
    """
    common = conv_common(op)
    if len(shape) != 4:
        raise ComputeSizeError(f"Im2Col needs a 4-D NCHW input, got shape {tuple(shape)!r}")
    n, c, ih, iw = (int(v) for v in shape)
    kh, kw, sh, sw = common.kernelY, common.kernelX, common.strideY, common.strideX
    dh, dw = common.dilateY, common.dilateX
    if min(kh, kw, sh, sw, dh, dw) < 1:
        raise InvalidModelError(
            f"Im2Col kernel {kh}x{kw}, stride {sh}x{sw} and dilation {dh}x{dw} must be positive"
        )
    if kh * kw > MAX_TAPS:  # one region set per tap; real kernels have a few dozen
        raise NotSupportError(f"Im2Col kernel {kh}x{kw} has more than {MAX_TAPS} taps")
    if common.padMode == PadMode.SAME:
        raise NotSupportError("Im2Col with padMode SAME")
    if common.padMode == PadMode.VALID:
        pads = [0, 0, 0, 0]
    elif common.pads is not None:
        pads = [int(p) for p in common.pads]
        if len(pads) < 4:
            raise InvalidModelError(f"Im2Col pads needs [top, left, bottom, right], got {pads!r}")
    else:
        pads = [common.padY, common.padX, common.padY, common.padX]
    if min(pads[:4]) < 0:
        raise InvalidModelError(f"Im2Col pads must not be negative, got {pads[:4]!r}")
    out = []
    for size, k, s, d, before, after in ((ih, kh, sh, dh, pads[0], pads[2]),
                                         (iw, kw, sw, dw, pads[1], pads[3])):  # fmt: skip
        total, k_eff = size + before + after, d * (k - 1) + 1
        out.append((total - k_eff) // s + 1 if total >= k_eff else 0)
    if min(out) < 1 or min(n, c) < 1:
        raise ComputeSizeError(
            f"Im2Col of a {n}x{c}x{ih}x{iw} input with kernel {kh}x{kw}, dilation {dh}x{dw}, "
            f"pads {pads[:4]!r} gives an empty output ({out[0]}x{out[1]})"
        )
    return Im2ColGeometry(
        n, c, (ih, iw), (kh, kw), (sh, sw), (dh, dw), (pads[0], pads[1]), (out[0], out[1])
    )


@register_shape(OpType.Im2Col)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """``[c * kh * kw, n * oh * ow]``, input 0's dtype, NCHW."""
    if len(inputs) != 1 or len(outputs) != 1:
        raise InvalidModelError(
            f"Im2Col takes 1 input and 1 output, got {len(inputs)} and {len(outputs)}"
        )
    x = inputs[0]
    if x.dimension_format == DimensionFormat.NHWC:
        raise NotSupportError("Im2Col of an NHWC tensor (MNN's geometry reads NCHW)")
    outputs[0].shape = geometry(op, x.shape).out_shape
    outputs[0].dtype = x.dtype
    outputs[0].dimension_format = DimensionFormat.NCHW


@register_reference(OpType.Im2Col)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Zero-pad, then one strided slice per kernel tap, on NCHW."""
    x = np.asarray(inputs[0])
    g = geometry(op, x.shape)
    (kh, kw), (sh, sw), (dh, dw) = g.kernel, g.stride, g.dilate
    (pt, pl), (oh, ow) = g.pad, g.out_hw
    span_h, span_w = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    padded = np.zeros((g.n, g.c, max(span_h, pt + g.in_hw[0]), max(span_w, pl + g.in_hw[1])),
                      x.dtype)  # fmt: skip
    padded[:, :, pt : pt + g.in_hw[0], pl : pl + g.in_hw[1]] = x
    cols = np.empty((g.c, kh, kw, g.n, oh, ow), x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dh, kx * dw
            taps = padded[:, :, y0 : y0 + (oh - 1) * sh + 1 : sh, x0 : x0 + (ow - 1) * sw + 1 : sw]
            cols[:, ky, kx] = taps.transpose(1, 0, 2, 3)
    return [cols.reshape(g.out_shape)]
