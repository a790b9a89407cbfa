"""Pooling and Pooling3D (global, 4-D): MNN's size, padding and count rules, NumPy reference.

Output sizes follow MNN's ``ShapePool.cpp``; padding and the average's divisor follow
``CPUPool.cpp`` / ``CPUPool.hpp``: with a ``pads`` vector and CAFFE padding the pads are taken
from it and the pool counts as VALID, so DEFAULT counts exclude padding; CAFFE without ``pads``
counts include it (up to the input plus the *top/left* padding, as MNN does). Max pooling clamps
window coordinates into the input (MNN replicates edges), which equals ignoring the padding
whenever a window overlaps the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy._schema.MNN.AvgPoolCountType import AvgPoolCountType
from mnnpy._schema.MNN.Pool import PoolT
from mnnpy._schema.MNN.PoolPadType import PoolPadType
from mnnpy._schema.MNN.PoolType import PoolType
from mnnpy.errors import ComputeSizeError, InvalidModelError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


@dataclass(frozen=True)
class PoolGeometry:
    """A 2-D pool with shapes known; ``pad`` is (top, left), ``window`` what the kernels take."""

    is_max: bool
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int]
    out_hw: tuple[int, int]
    include_pad: bool

    @property
    def window(self) -> tuple[int, ...]:
        """``(ky, kx, sy, sx, pad_top, pad_left)``."""
        return (*self.kernel, *self.stride, *self.pad)


def pool_param(op: OpDef) -> Any:
    """The op's Pool table; a global Pool3D becomes the equivalent global 2-D Pool (as MNN)."""
    p = op.param
    if p is None:
        raise InvalidModelError(f"{op.type_name} has no parameter")
    if op.type == OpType.Pooling3D and p.isGlobal:
        return PoolT(isGlobal=True, type=p.type, padType=p.padType)
    return p


def pool3d_stages(p: Any) -> tuple[PoolT, PoolT]:
    """A non-global Pool3D as MNN's GeometryPooling3D runs it.

    A 2-D pool over (H, W) of every depth slice, then a pool over depth (a (kD, 1) window on
    (D, OH * OW) planes; averages there exclude padding). Absent strides / pads are ONNX's
    defaults, 1 / 0 (MNN crashes).
    """
    k = [int(v) for v in p.kernels] if p.kernels is not None else []
    s = [int(v) for v in p.strides] if p.strides is not None else [1, 1, 1]
    pad = [int(v) for v in p.pads] if p.pads is not None else [0, 0, 0]
    if len(k) != 3 or len(s) != 3 or len(pad) != 3:
        raise ComputeSizeError(f"Pool3D needs 3 kernels, strides, pads; got {k}, {s}, {pad}")
    common = dict(type=p.type, padType=p.padType, ceilModel=False)
    hw = PoolT(kernelY=k[1], kernelX=k[2], strideY=s[1], strideX=s[2], padY=pad[1],
               padX=pad[2], **common)  # fmt: skip
    exclude = AvgPoolCountType.EXCLUDE_PADDING
    depth = PoolT(kernelY=k[0], kernelX=1, strideY=s[0], strideX=1, padY=pad[0], padX=0,
                  countType=exclude, **common)  # fmt: skip
    return hw, depth


def pool_planes(op: OpDef, shape: Sequence[int]) -> list[tuple[PoolT, int, int]]:
    """The 2-D pools an NCHW-ordered ``shape`` runs, each as (table, plane H, plane W).

    3-D inputs (N, C, L) pool L as H with W = 1; 5-D global pools run over (D, H * W).
    """
    p, nd = pool_param(op), len(shape)
    if op.type == OpType.Pooling3D and not p.isGlobal:
        if nd != 5:
            raise ComputeSizeError(f"Pooling3D needs a 5-D input, got shape {tuple(shape)!r}")
        hw, depth = pool3d_stages(p)
        d, h, w = shape[2:]
        oh, ow = pool_geometry(hw, h, w).out_hw
        return [(hw, h, w), (depth, d, oh * ow)]
    if nd not in (3, 4) and not (nd == 5 and p.isGlobal):
        raise ComputeSizeError(f"needs a 3-D or 4-D input, got shape {tuple(shape)!r}")
    w = 1 if nd == 3 else shape[3] * (shape[4] if nd == 5 else 1)  # no NumPy reduction: cheaper
    return [(p, shape[2], int(w))]


def pooled_shape(op: OpDef, shape: Sequence[int]) -> tuple[int, ...]:
    """The output shape, NCHW order."""
    stages = pool_planes(op, shape)
    n, c = shape[0], shape[1]
    if len(shape) == 5:
        if len(stages) == 1:
            return (n, c, 1, 1, 1)
        oh, ow = pool_geometry(stages[0][0], *stages[0][1:]).out_hw
        return (n, c, pool_geometry(stages[1][0], *stages[1][1:]).out_hw[0], oh, ow)
    oh, ow = pool_geometry(stages[0][0], *stages[0][1:]).out_hw
    return (n, c, oh) if len(shape) == 3 else (n, c, oh, ow)


def _out(total: int, k: int, s: int, pad_type: int, ceil: bool) -> int:
    if pad_type == PoolPadType.SAME:
        return -(-total // s)
    if pad_type == PoolPadType.VALID:
        return -(-(total - k + 1) // s)
    return (-(-(total - k) // s) if ceil else (total - k) // s) + 1


def pool_geometry(p: Any, h: int, w: int) -> PoolGeometry:
    """Resolve a Pool table for an H x W input.

    Raises:
        ComputeSizeError: on non-positive kernel / stride, TF-style padding with padX/padY, or
            an empty output.
    """
    is_max = p.type == PoolType.MAXPOOL
    if p.isGlobal:
        return PoolGeometry(is_max, (h, w), (h, w), (0, 0), (1, 1), True)
    # MNN's converter writes 0 for ONNX's absent strides (default 1); MNN divides by it
    ky, kx, sy, sx = p.kernelY, p.kernelX, p.strideY or 1, p.strideX or 1
    if min(ky, kx, sy, sx) < 1:
        raise ComputeSizeError(f"kernel {ky}x{kx} and stride {sy}x{sx} must be positive")
    pad_type, pads = p.padType, p.pads
    if pad_type in (PoolPadType.VALID, PoolPadType.SAME) and (p.padX or p.padY):
        raise ComputeSizeError("VALID / SAME pooling must not have padX / padY")
    th, tw = h, w
    if pads is None:
        th, tw = h + 2 * p.padY, w + 2 * p.padX
    elif len(pads) == 2:  # MNN: two pads are (top, bottom)
        th = h + pads[0] + pads[1]
    elif len(pads) == 4:
        th, tw = h + pads[0] + pads[2], w + pads[1] + pads[3]
    if th < 1 or tw < 1:
        raise ComputeSizeError(f"padded input {th}x{tw} is empty")
    oh = _out(th, min(ky, th), sy, pad_type, p.ceilModel)
    ow = _out(tw, min(kx, tw), sx, pad_type, p.ceilModel)
    if oh < 1 or ow < 1:
        raise ComputeSizeError(f"output size {oh}x{ow} for input {h}x{w} is empty")
    top, left = p.padY, p.padX
    if pad_type == PoolPadType.SAME:
        top = max((oh - 1) * sy + ky - h, 0) // 2
        left = max((ow - 1) * sx + kx - w, 0) // 2
    elif pad_type == PoolPadType.VALID:
        top = left = 0
    if pads is not None and pad_type == PoolPadType.CAFFE:
        if len(pads) == 4:
            top, left = int(pads[0]), int(pads[1])
        pad_type = PoolPadType.VALID
    count = p.countType
    include = count == AvgPoolCountType.INCLUDE_PADDING or (
        count == AvgPoolCountType.DEFAULT and pad_type == PoolPadType.CAFFE
    )
    return PoolGeometry(is_max, (ky, kx), (sy, sx), (int(top), int(left)), (oh, ow), include)


@register_shape(OpType.Pooling, OpType.Pooling3D)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Spatial sizes replaced by the pooled ones; same dtype and format.

    A second output (max indices) is int32 and shaped the same.
    """
    x = inputs[0]
    nhwc = x.dimension_format == DimensionFormat.NHWC
    nchw = (x.shape[0], x.shape[-1], *x.shape[1:-1]) if nhwc else tuple(x.shape)
    out = pooled_shape(op, nchw)
    for i, t in enumerate(outputs):
        t.shape = (out[0], *out[2:], out[1]) if nhwc else out
        t.dtype = x.dtype if i == 0 else np.dtype(np.int32)
        t.dimension_format = x.dimension_format


def _pool2d(x: np.ndarray, geo: PoolGeometry, at: np.ndarray | None = None) -> np.ndarray:
    """Window by window over (N, C, H, W), vectorized over batch and channels, in float64.

    For max pooling, ``at`` (if given) receives each maximum's first ``y * W + x``.
    """
    _, _, h, w = x.shape
    (ky, kx), (sy, sx), (top, left), (oh, ow) = geo.kernel, geo.stride, geo.pad, geo.out_hw
    out = np.zeros((*x.shape[:2], oh, ow))
    for oy in range(oh):
        for ox in range(ow):
            iy, ix = oy * sy - top, ox * sx - left
            if geo.is_max:  # clamp the window into the input: MNN replicates edges
                ys, ye = np.clip([iy, iy + ky - 1], 0, h - 1)
                xs, xe = np.clip([ix, ix + kx - 1], 0, w - 1)
                win = x[:, :, ys : ye + 1, xs : xe + 1]
                out[:, :, oy, ox] = win.max(axis=(2, 3))
                if at is not None:
                    yx = np.unravel_index(win.reshape(*x.shape[:2], -1).argmax(-1), win.shape[2:])
                    at[:, :, oy, ox] = (yx[0] + ys) * w + yx[1] + xs
                continue
            ys, ye, xs, xe = max(iy, 0), min(iy + ky, h), max(ix, 0), min(ix + kx, w)
            total = x[:, :, ys:ye, xs:xe].sum(axis=(2, 3)) if ye > ys and xe > xs else 0.0
            if geo.include_pad:
                count = (min(iy + ky, h + top) - iy) * (min(ix + kx, w + left) - ix)
            else:
                count = (ye - ys) * (xe - xs)
            out[:, :, oy, ox] = total / count if count > 0 else 0.0
    return out


@register_reference(OpType.Pooling, OpType.Pooling3D)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """NCHW (3-D, 4-D or 5-D) through the same 2-D pools as the CPU execution, in float64."""
    x = np.asarray(inputs[0], dtype=np.float64)
    n, c = x.shape[:2]
    stages = pool_planes(op, x.shape)
    if len(stages) == 2:  # (N, C, D, H, W): pool every depth slice, then over depth
        y = x.reshape(n, c * x.shape[2], *x.shape[3:])
    else:
        y = x.reshape(n, c, stages[0][1], stages[0][2])
    geo = pool_geometry(stages[0][0], *y.shape[2:])
    if len(op.outputs) == 2 and len(stages) == 1 and geo.is_max:  # max indices (MNN: int32)
        at = np.zeros((n, c, *geo.out_hw), np.int32)
        y = _pool2d(y, geo, at)
        shape = pooled_shape(op, x.shape)
        return [y.reshape(shape).astype(np.float32), at.reshape(shape)]
    y = _pool2d(y, geo)
    if len(stages) == 2:
        y = y.reshape(n, c, x.shape[2], -1)
        y = _pool2d(y, pool_geometry(stages[1][0], *y.shape[2:]))
    return [y.reshape(pooled_shape(op, x.shape)).astype(np.float32)]
