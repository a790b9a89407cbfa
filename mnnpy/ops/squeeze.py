"""Squeeze / Unsqueeze: drop or insert size-1 dims (``SqueezeParam.squeezeDims`` or input 1)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def _axes(op: OpDef, values: np.ndarray | None) -> list[int]:
    dims = getattr(op.param, "squeezeDims", None)
    if dims is not None:
        return list(map(int, dims))
    if values is not None:
        return list(map(int, np.asarray(values).ravel().tolist()))
    return []


def squeezed(axes: Sequence[int], shape: Sequence[int]) -> tuple[int, ...]:
    """``shape`` without the listed axes (each must be 1); without axes, without every 1."""
    rank = len(shape)
    drop = set()
    for axis in axes:
        a = axis + rank if axis < 0 else axis
        if not 0 <= a < rank or shape[a] != 1:
            raise ComputeSizeError(f"cannot squeeze axis {axis} of shape {tuple(shape)!r}")
        drop.add(a)
    if not axes:
        return tuple([d for d in shape if d != 1])
    return tuple([d for i, d in enumerate(shape) if i not in drop])


def unsqueezed(axes: Sequence[int], shape: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with a 1 at each listed axis of the output."""
    rank = len(shape) + len(axes)
    mask = set()
    for axis in axes:
        a = axis + rank if axis < 0 else axis
        if not 0 <= a < rank or a in mask:
            raise ComputeSizeError(f"cannot unsqueeze {list(axes)!r} into rank {rank}")
        mask.add(a)
    if len(mask) == 1:  # the common case (a scalar made 1-D), without a generator
        dims = tuple(shape)
        return (*dims[:a], 1, *dims[a:])
    rest = iter(shape)
    return tuple(1 if i in mask else next(rest) for i in range(rank))


def _values(inputs: Sequence[Tensor]) -> np.ndarray | None:
    if len(inputs) < 2:
        return None
    return content_of(inputs[1], "the axes")


@register_shape(OpType.Squeeze, OpType.Unsqueeze, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """New dims; dtype and format of input 0."""
    src, out = inputs[0], outputs[0]
    fn = squeezed if op.type == OpType.Squeeze else unsqueezed
    out.shape = fn(_axes(op, _values(inputs)), src.shape)
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.Squeeze, OpType.Unsqueeze)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The data with the new dims."""
    x = np.asarray(inputs[0])
    fn = squeezed if op.type == OpType.Squeeze else unsqueezed
    axes = _axes(op, np.asarray(inputs[1]) if len(inputs) > 1 else None)
    return [x.reshape(fn(axes, x.shape)).copy()]
