"""Softmax along ``Axis.axis`` (negative counts from the end), numerically stable."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def resolve_axis(op: OpDef, ndim: int) -> int:
    """The softmax axis in ``0..ndim-1``, or ComputeSizeError."""
    axis = int(getattr(op.param, "axis", 0) or 0) if op.param is not None else 0
    resolved = axis + ndim if axis < 0 else axis
    if not 0 <= resolved < ndim:
        raise ComputeSizeError(f"Softmax axis {axis} is out of range for rank {ndim}")
    return resolved


@register_shape(OpType.Softmax)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Like input 0, after checking the axis."""
    src, out = inputs[0], outputs[0]
    resolve_axis(op, src.ndim)
    out.shape, out.dtype, out.dimension_format = src.shape, src.dtype, src.dimension_format


@register_reference(OpType.Softmax)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``exp(x - max) / sum(exp(x - max))`` along the axis."""
    x = np.asarray(inputs[0], dtype=np.float32)
    axis = resolve_axis(op, x.ndim)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [(e / e.sum(axis=axis, keepdims=True)).astype(np.float32)]
