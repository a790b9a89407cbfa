"""Concat: join inputs along ``Axis.axis`` (negative counts from the end); format of input 0.

As MNN's ShapeConcat, input 0 sets the rank and an input of lower rank is accepted when its dims
other than the axis match the output's leading dims; GeometryConcat then copies it as if it had
the output's trailing dims, so mnnpy requires those to be 1 (the same elements; MNN would read
past the input otherwise). The ONNX loss functions concatenate ``[[C]]`` with ``[1, 1]`` so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def resolve_axis(op: OpDef, rank: int) -> int:
    """The concat axis in ``0..rank-1`` (0 without a parameter, as MNN)."""
    axis = int(getattr(op.param, "axis", 0) or 0)
    resolved = axis + rank if axis < 0 else axis
    if not 0 <= resolved < rank:
        raise ComputeSizeError(f"Concat axis {axis} is out of range for rank {rank}")
    return resolved


def concat_shape(op: OpDef, shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The joined shape, or ComputeSizeError when ranks or the other dims differ."""
    if not shapes:
        raise ComputeSizeError("Concat needs at least one input")
    first = tuple(shapes[0])
    axis = resolve_axis(op, len(first))
    total = 0
    for s in shapes:
        rank = len(s)
        if (
            not axis < rank <= len(first)
            or any(s[i] != first[i] for i in range(rank) if i != axis)
            or any(n != 1 for n in first[rank:])
        ):
            raise ComputeSizeError(f"Concat inputs {[tuple(x) for x in shapes]!r} do not match")
        total += s[axis]
    return (*first[:axis], total, *first[axis + 1 :])


@register_shape(OpType.Concat)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Joined shape; every input must share input 0's dtype."""
    if any(t.dtype != inputs[0].dtype for t in inputs):
        raise ComputeSizeError(f"Concat inputs differ in dtype: {[t.dtype.name for t in inputs]}")
    out = outputs[0]
    out.shape = concat_shape(op, [t.shape for t in inputs])
    out.dtype, out.dimension_format = inputs[0].dtype, inputs[0].dimension_format


@register_reference(OpType.Concat)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.concatenate`` along the axis."""
    arrays = [np.asarray(x) for x in inputs]
    concat_shape(op, [a.shape for a in arrays])
    rank = arrays[0].ndim
    full = [a.reshape(a.shape + (1,) * (rank - a.ndim)) for a in arrays]
    return [np.concatenate(full, axis=resolve_axis(op, rank))]
