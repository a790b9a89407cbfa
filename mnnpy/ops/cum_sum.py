"""CumSum: running sums along an axis (MNN's GeometryCumSum).

Inputs: data and the axis (int32, known while resizing; negative counting from the end). The
``CumSum`` table's ``exclusive`` starts each sum at 0 (every output excludes its own element),
``reverse`` sums from the end. The output is shaped like data, with its dtype and format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.ops._content import axis_in_values
from mnnpy.tensor import Tensor


def flags(op: OpDef) -> tuple[bool, bool]:
    """``(exclusive, reverse)``, False without a parameter."""
    p = op.param
    return bool(getattr(p, "exclusive", False)), bool(getattr(p, "reverse", False))


def axis_of(rank: int, axis_value: np.ndarray) -> int:
    """The axis in ``0..rank-1``: the first value, as MNN reads it (``axis_in_values``'s errors)."""
    return axis_in_values(rank, axis_value, "CumSum")


def dims(shape: Sequence[int], axis_value: np.ndarray) -> tuple[int, int, int]:
    """``(outer, n, inner)`` around the axis."""
    axis = axis_of(len(shape), axis_value)
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


@register_shape(OpType.CumSum, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Data's shape, dtype and format (the axis must be known)."""
    if len(inputs) != 2:
        raise ComputeSizeError(f"CumSum needs 2 inputs, has {len(inputs)}")
    x, out = inputs[0], outputs[0]
    axis_of(x.ndim, content_of(inputs[1], "CumSum's axis"))
    out.shape, out.dtype, out.dimension_format = x.shape, x.dtype, x.dimension_format


@register_reference(OpType.CumSum)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.cumsum`` with flips and a shift."""
    x = np.asarray(inputs[0])
    axis = axis_of(x.ndim, inputs[1])
    exclusive, reverse = flags(op)
    y = np.flip(x, axis) if reverse else x
    s = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        s = s - y
    return [np.flip(s, axis) if reverse else s]
