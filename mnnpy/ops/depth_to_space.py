"""DepthToSpace and SpaceToDepth: move ``blockSize x blockSize`` channel groups into space and back.

As MNN's ``GeometryDepthToSpace``: the deep tensor's channel ``(hb * b + wb) * C' + c`` (DCR) or
``c * b * b + hb * b + wb`` (CRD) is pixel ``(y * b + hb, x * b + wb)`` of channel ``c`` in the
shallow tensor; SpaceToDepth is the exact inverse with the same ``mode`` (so ONNX's SpaceToDepth
is DCR). 4-D NCHW or NHWC; shapes follow ``ShapeDepthToSpace.cpp`` / ``ShapeSpaceToDepth.cpp``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidModelError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

DCR, CRD = 0, 1


def block_and_mode(op: OpDef) -> tuple[int, int]:
    """``(blockSize, mode)``; raises InvalidModelError without a parameter or a bad block."""
    p = op.param
    if p is None or op.param_type != OpParameter.DepthSpaceParam:
        raise InvalidModelError(f"{op.type_name} has no DepthSpaceParam")
    if p.blockSize < 1 or p.mode not in (DCR, CRD):
        raise InvalidModelError(f"{op.type_name} blockSize {p.blockSize}, mode {p.mode}")
    return int(p.blockSize), int(p.mode)


def out_shape(op: OpDef, shape: Sequence[int], nhwc: bool) -> tuple[int, ...]:
    """The output shape (format order) of a 4-D input ``shape``."""
    b, _ = block_and_mode(op)
    if len(shape) != 4:
        raise ComputeSizeError(f"{op.type_name} needs a 4-D input, got {tuple(shape)!r}")
    n, c, h, w = (shape[0], shape[3], shape[1], shape[2]) if nhwc else tuple(shape)
    if op.type == OpType.DepthToSpace:
        if c % (b * b):
            raise ComputeSizeError(f"DepthToSpace: {c} channels, block {b}")
        c, h, w = c // (b * b), h * b, w * b
    else:
        if h % b or w % b:
            raise ComputeSizeError(f"SpaceToDepth: H {h} and W {w} must be divisible by {b}")
        c, h, w = c * b * b, h // b, w // b
    return (n, h, w, c) if nhwc else (n, c, h, w)


@register_shape(OpType.DepthToSpace, OpType.SpaceToDepth)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's dtype and format."""
    x = inputs[0]
    outputs[0].shape = out_shape(op, x.shape, x.dimension_format == DimensionFormat.NHWC)
    outputs[0].dtype = x.dtype
    outputs[0].dimension_format = x.dimension_format


def block_views(
    deep: np.ndarray, shallow: np.ndarray, b: int, mode: int, nhwc: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Views of both 4-D arrays with axes ``(N, H, hb, W, wb, C')`` (H, W of the deep one)."""
    if nhwc:
        n, h, w, c = deep.shape
        d = deep.reshape(n, h, w, *((b, b, c // (b * b)) if mode == DCR else (c // (b * b), b, b)))
        d = d.transpose(0, 1, 3, 2, 4, 5) if mode == DCR else d.transpose(0, 1, 4, 2, 5, 3)
        return d, shallow.reshape(n, h, b, w, b, c // (b * b))
    n, c, h, w = deep.shape
    if mode == DCR:
        d = deep.reshape(n, b, b, c // (b * b), h, w).transpose(0, 4, 1, 5, 2, 3)
    else:
        d = deep.reshape(n, c // (b * b), b, b, h, w).transpose(0, 4, 2, 5, 3, 1)
    s = shallow.reshape(n, c // (b * b), h, b, w, b).transpose(0, 2, 3, 4, 5, 1)
    return d, s


@register_reference(OpType.DepthToSpace, OpType.SpaceToDepth)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A copy between the two views, on NCHW."""
    x = np.asarray(inputs[0])
    b, mode = block_and_mode(op)
    y = np.empty(out_shape(op, x.shape, False), x.dtype)
    if op.type == OpType.DepthToSpace:
        src, dst = block_views(x, y, b, mode, False)
    else:
        dst, src = block_views(y, x, b, mode, False)
    np.copyto(dst, src)
    return [y]
