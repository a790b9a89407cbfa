"""BroadcastTo and Tile: repeat input 0 by a shape or by multiples.

The shape or multiples are input 1, known while resizing (MNN's ShapeBroadcastTo, ShapeTile).

BroadcastTo broadcasts the input and the shape against each other (ONNX Expand: a 1 in the shape
keeps the input's dim). With an ``Axis`` parameter whose axis is non-zero (TF Select's
broadcast), a 1-D input of length ``shape[0]`` fills the leading dim and the output is the shape
itself. Tile multiplies each dim by its multiple (one per dim). Output: input 0's dtype and
format.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def _known(inputs: Sequence[Tensor], what: str) -> np.ndarray:
    if len(inputs) != 2:
        raise ComputeSizeError(f"{what} needs 2 inputs, has {len(inputs)}")
    return content_of(inputs[1], f"{what}'s second input")


def forward(op: OpDef) -> bool:
    """Whether the input fills the leading dim (an Axis parameter with a non-zero axis)."""
    return op.param_type == OpParameter.Axis and op.param is not None and int(op.param.axis) != 0


def broadcast_shape(op: OpDef, shape: Sequence[int], values: np.ndarray) -> tuple[int, ...]:
    """The BroadcastTo output shape."""
    dims = tuple(int(v) for v in np.asarray(values).ravel())
    if forward(op):
        if len(shape) != 1 or not dims or dims[0] != shape[0]:
            raise ComputeSizeError(f"BroadcastTo of {tuple(shape)!r} along the front to {dims!r}")
        return dims
    try:
        return tuple(int(d) for d in np.broadcast_shapes(tuple(shape), dims))
    except ValueError:
        raise ComputeSizeError(f"cannot broadcast {tuple(shape)!r} to {dims!r}") from None


def multiples(shape: Sequence[int], values: np.ndarray) -> tuple[int, ...]:
    """Tile's multiples, one non-negative value per dim."""
    m = tuple(int(v) for v in np.asarray(values).ravel())
    if len(m) != len(shape) or any(v < 0 for v in m):
        raise ComputeSizeError(f"Tile multiples {m!r} for shape {tuple(shape)!r}")
    return m


@register_shape(OpType.BroadcastTo, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """The broadcast shape; dtype and format of input 0."""
    src, out = inputs[0], outputs[0]
    out.shape = broadcast_shape(op, src.shape, _known(inputs, "BroadcastTo"))
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_shape(OpType.Tile, content=(1,))
def shape_tile(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Each dim times its multiple; dtype and format of input 0."""
    src, out = inputs[0], outputs[0]
    m = multiples(src.shape, _known(inputs, "Tile"))
    out.shape = tuple(d * k for d, k in zip(src.shape, m, strict=True))
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.BroadcastTo)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.broadcast_to`` (the input as a column in the forward case)."""
    x = np.asarray(inputs[0])
    out = broadcast_shape(op, x.shape, inputs[1])
    if forward(op):
        x = x.reshape((-1,) + (1,) * (len(out) - 1))
    return [np.broadcast_to(x, out).copy()]


@register_reference(OpType.Tile)
def reference_tile(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.tile``."""
    x = np.asarray(inputs[0])
    return [
        np.tile(x, multiples(x.shape, inputs[1])).reshape(
            tuple(d * k for d, k in zip(x.shape, multiples(x.shape, inputs[1]), strict=True))
        )
    ]
