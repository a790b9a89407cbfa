"""Interp (resize): MNN's output size, coordinate transform and sampling rules, NumPy reference.

The output size follows ``ShapeInterp.cpp``: with a second input as long as the input's rank
(what MNN's converter makes of ONNX Resize) it holds int32 sizes or float scales per dim (size =
``int(scale * dim)`` in float32); otherwise ``outputWidth/Height`` or ``widthScale/heightScale``
with one input, or (h, w) in a 2-value second input. The source coordinate of output ``x`` is
``x * scale + offset`` in float32, with scale and offset from ``GeometryImageOp`` /
``_ConverterInterp``: only ``ctm``, ``alignCorners``, ``halfPixelCenters``, the sizes and float
scales count (the op's own scale and offset fields are not used). Sampling follows
``CPUResize.hpp``: 1 nearest (floor), 2 bilinear, 3 cubic, 4 nearest (``floor(x + 0.499)``);
indices are clamped into the input. Cubic takes the integer part of the coordinate by
truncation (so negative coordinates use the window one to the right, as MNN does) and honours
``cubicCoeffA`` (MNN always uses -0.75, the ONNX default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy._schema.MNN.CoordinateTransformationMode import CoordinateTransformationMode as CTM
from mnnpy.errors import ComputeSizeError, InvalidModelError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

F32 = np.float32
NEAREST, BILINEAR, CUBIC, NEAREST_ROUND = 1, 2, 3, 4


def interp_param(op: OpDef) -> Any:
    """The Interp table; a model without one is invalid."""
    if op.param is None or not hasattr(op.param, "resizeType"):
        raise InvalidModelError("Interp has no Interp parameter")
    return op.param


def out_shape(op: OpDef, shape: Sequence[int], nhwc: bool, sizes: Any) -> tuple[int, ...]:
    """The output shape of an input ``shape`` (format order); ``sizes`` is input 1's content."""
    p, shape = interp_param(op), tuple(int(d) for d in shape)
    if sizes is not None and np.asarray(sizes).size == len(shape):
        v = np.asarray(sizes).ravel()
        if v.dtype.kind == "f":  # C float -> int conversion truncates
            out = tuple(int(F32(s) * F32(d)) for s, d in zip(v, shape, strict=True))
        else:
            out = tuple(int(s) for s in v)
        if min(out) < 0:
            raise ComputeSizeError(f"Interp output shape {out!r} is negative")
        return out
    if len(shape) != 4:
        raise NotSupportError(f"Interp needs a 4-D input, got shape {shape!r}")
    ih, iw = shape[1:3] if nhwc else shape[2:4]
    if sizes is None:
        h, w = p.outputHeight, p.outputWidth
        if h == 0 or w == 0:
            h, w = int(F32(ih) * F32(p.heightScale)), int(F32(iw) * F32(p.widthScale))
    elif np.asarray(sizes).size == 2:
        h, w = (int(F32(v)) for v in np.asarray(sizes).ravel())
    else:
        raise ComputeSizeError(f"Interp's size input must have 2 values, has {np.size(sizes)}")
    if h <= 0 or w <= 0:
        raise ComputeSizeError(f"Interp output size {h}x{w} must be positive")
    return (shape[0], h, w, shape[3]) if nhwc else (*shape[:2], h, w)


def transform(
    op: OpDef, in_hw: Sequence[int], out_hw: Sequence[int], scales: Any
) -> tuple[tuple[F32, F32], tuple[F32, F32]]:
    """``((scale_y, scale_x), (offset_y, offset_x))`` as MNN resolves them for 2-D sampling.

    ``scales`` is input 1's content when it is a float tensor as long as the rank (its last two
    values are used as given), else None.

    Raises:
        NotSupportError: for TensorflowCropAndResize or an unknown transformation mode.
    """
    p = interp_param(op)
    given = scales is not None
    scale = [F32(1) / F32(s) for s in np.asarray(scales).ravel()[-2:]] if given else [F32(0)] * 2
    offset = [F32(0), F32(0)]
    ratio = [F32(i) / F32(o) for i, o in zip(in_hw, out_hw, strict=True)]
    corners = [
        F32(0) if o == 1 else F32(i - 1) / F32(o - 1) for i, o in zip(in_hw, out_hw, strict=True)
    ]
    ctm = p.ctm
    if ctm == CTM.NotSet:
        if p.halfPixelCenters and p.resizeType != NEAREST:
            ctm = CTM.HalfPixels
        elif p.alignCorners:
            ctm = CTM.AlignCorners if not given else CTM.Asymmetric
        else:
            ctm = CTM.Asymmetric
    if ctm == CTM.AlignCorners:
        scale = corners
    elif ctm in (CTM.HalfPixels, CTM.Asymmetric, CTM.TensorflowHalfPixels):
        scale = scale if given else ratio
        if ctm == CTM.HalfPixels:
            offset = [F32(0.5) * s - F32(0.5) for s in scale]
        elif ctm == CTM.TensorflowHalfPixels:
            offset = [F32(0.5) * s for s in scale]
    elif ctm == CTM.PytorchHalfPixels:
        for a in range(2):
            if out_hw[a] > 1:
                scale[a] = scale[a] if given else ratio[a]
                offset[a] = F32(0.5) * scale[a] - F32(0.5)
            elif not given:
                scale[a] = F32(0)
    else:
        raise NotSupportError(f"Interp coordinate transformation mode {ctm} is not supported")
    return (scale[0], scale[1]), (offset[0], offset[1])


def float_scales(inputs: Sequence[Any], rank: int) -> Any:
    """Input 1's content when it holds float scales per dim (MNN then keeps them), else None."""
    if len(inputs) < 2:
        return None
    v = inputs[1].describe.content if isinstance(inputs[1], Tensor) else inputs[1]
    if v is None or np.asarray(v).dtype.kind != "f":
        return None
    if np.asarray(v).size != rank:
        raise NotSupportError("Interp with 2 float sizes (h, w) is not supported")
    return v


def source_coords(n_out: int, scale: F32, offset: F32) -> np.ndarray:
    """Float32 source coordinates ``x * scale + offset`` of every output position."""
    return np.arange(n_out).astype(F32) * F32(scale) + F32(offset)


@register_shape(OpType.Interp, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input shape with new sizes; same dtype and format."""
    x = inputs[0]
    sizes = content_of(inputs[1], "Interp's sizes") if len(inputs) > 1 else None
    nhwc = x.dimension_format == DimensionFormat.NHWC
    outputs[0].shape = out_shape(op, x.shape, nhwc, sizes)
    outputs[0].dtype = x.dtype
    outputs[0].dimension_format = x.dimension_format


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' weights of the taps at distances 1 + t, t, 1 - t, 2 - t; shape (4, len(t))."""
    d = np.abs(np.stack([1 + t, t, 1 - t, 2 - t]).astype(np.float64))
    near = (a + 2) * d**3 - (a + 3) * d**2 + 1
    far = a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
    return np.where(d <= 1, near, far)


def _axis_taps(mode: int, coords: np.ndarray, n: int, a: float) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights) per output position along one axis; shape (taps, n_out)."""
    if mode == NEAREST:
        return np.clip(np.floor(coords), 0, n - 1)[None].astype(int), np.ones((1, coords.size))
    if mode == NEAREST_ROUND:
        idx = np.floor(coords + F32(0.499))
        return np.clip(idx, 0, n - 1)[None].astype(int), np.ones((1, coords.size))
    if mode == BILINEAR:
        x0 = np.floor(coords)
        f = (coords - x0).astype(F32)
        idx = np.clip(np.stack([x0, x0 + 1]), 0, n - 1).astype(int)
        return idx, np.stack([F32(1) - f, f])
    base = np.trunc(coords).astype(int)  # MNN: (int)x, not floor
    idx = np.clip(base[None] + np.arange(-1, 3)[:, None], 0, n - 1)
    return idx, _cubic_weights((coords - np.floor(coords)).astype(F32), a)


@register_reference(OpType.Interp)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Separable sampling on NCHW: rows first, then columns (MNN's order)."""
    x, p = np.asarray(inputs[0]), interp_param(op)
    if x.ndim != 4 or p.resizeType not in (NEAREST, BILINEAR, CUBIC, NEAREST_ROUND):
        raise NotSupportError(f"Interp resizeType {p.resizeType} on shape {x.shape!r}")
    sizes = inputs[1] if len(inputs) > 1 else None
    n, c, oh, ow = out_shape(op, x.shape, False, sizes)
    if (n, c) != x.shape[:2]:
        raise NotSupportError("Interp over batch or channels is not supported")
    (sy, sx), (oy, ox) = transform(op, x.shape[2:], (oh, ow), float_scales(inputs, 4))
    a = float(p.cubicCoeffA)
    iy, wy = _axis_taps(p.resizeType, source_coords(oh, sy, oy), x.shape[2], a)
    ix, wx = _axis_taps(p.resizeType, source_coords(ow, sx, ox), x.shape[3], a)
    calc = F32 if p.resizeType == BILINEAR else np.float64  # bilinear: MNN's float32 rounding
    wx, wy = wx.astype(calc), wy.astype(calc)
    rows = [
        sum(x[:, :, iy[j]][..., ix[i]].astype(calc) * wx[i] for i in range(len(ix)))
        for j in range(len(iy))
    ]
    out = sum(rows[j] * wy[j][:, None] for j in range(len(iy)))
    return [np.asarray(out, dtype=x.dtype)]
