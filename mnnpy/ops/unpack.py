"""Unpack (TF unstack) and Pack (TF stack) along an axis (MNN's ShapeUnpack, ShapePack).

Unpack: output ``i`` is input 0 at index ``i`` of ``Axis.axis`` (that dim removed); with fewer
outputs than the dim's extent the rest is dropped, as MNN. Pack: the inputs, of one shape, stacked
along ``PackParam.axis`` (negative counts from the end of the output). Outputs keep input 0's
dtype and format.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def axis_of(op: OpDef, rank: int) -> int:
    """The axis in ``0..rank-1`` (``rank`` is the input's for Unpack, the output's for Pack)."""
    axis = int(getattr(op.param, "axis", 0)) if op.param is not None else 0
    resolved = axis + rank if axis < 0 else axis
    if not 0 <= resolved < rank:
        raise ComputeSizeError(f"{op.type_name} axis {axis} is out of range for rank {rank}")
    return resolved


@register_shape(OpType.Unpack)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's dims without the axis, for every output."""
    src = inputs[0]
    axis = axis_of(op, src.ndim)
    if len(outputs) > src.shape[axis]:
        raise ComputeSizeError(f"Unpack of {src.shape[axis]} into {len(outputs)} outputs")
    for out in outputs:
        out.shape = (*src.shape[:axis], *src.shape[axis + 1 :])
        out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.Unpack)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The slices along the axis, one per output."""
    x = np.asarray(inputs[0])
    axis = axis_of(op, x.ndim)
    return [np.take(x, i, axis=axis) for i in range(len(op.outputs))]


@register_shape(OpType.Pack)
def shape_pack(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """The common input shape with the input count inserted at the axis."""
    src, out = inputs[0], outputs[0]
    if any(t.shape != src.shape or t.dtype != src.dtype for t in inputs):
        raise ComputeSizeError(f"Pack inputs differ: {[t.shape for t in inputs]!r}")
    axis = axis_of(op, src.ndim + 1)
    out.shape = (*src.shape[:axis], len(inputs), *src.shape[axis:])
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.Pack)
def reference_pack(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.stack``."""
    x = [np.asarray(v) for v in inputs]
    return [np.stack(x, axis=axis_of(op, x[0].ndim + 1))]
