"""Flatten: ``axis..endAxis`` into one dim, or with ``endAxis`` 0 into 2-D (MNN's ShapeFlatten)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def flat_shape(op: OpDef, shape: Sequence[int]) -> tuple[int, ...]:
    """The output shape.

    ``[prod(:axis), prod(axis:)]`` when ``endAxis`` is 0 (after wrapping negatives), else
    ``shape[:axis] + [prod(axis:endAxis+1)] + shape[endAxis+1:]``.
    """
    if op.param is None:
        raise ComputeSizeError("Flatten needs a Flatten parameter")
    dim = len(shape)
    axis, end = int(op.param.axis), int(op.param.endAxis)
    axis = axis + dim if axis < 0 else axis
    end = end + dim if end < 0 else end
    if end == 0:
        if not 0 <= axis <= dim:
            raise ComputeSizeError(f"Flatten axis {op.param.axis} is out of range for rank {dim}")
        return (math.prod(shape[:axis]), math.prod(shape[axis:]))
    if not 0 <= axis <= end < dim:
        raise ComputeSizeError(
            f"Flatten axis {op.param.axis}, endAxis {op.param.endAxis} out of range for rank {dim}"
        )
    return (*shape[:axis], math.prod(shape[axis : end + 1]), *shape[end + 1 :])


@register_shape(OpType.Flatten)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Merged dims; dtype and format of input 0."""
    src, out = inputs[0], outputs[0]
    out.shape = flat_shape(op, src.shape)
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.Flatten)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The data in logical order with the merged dims."""
    x = np.asarray(inputs[0])
    return [x.reshape(flat_shape(op, x.shape)).copy()]
